package browser

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/inbox"
	. "github.com/hitl-dev/hitl/test/builders"
)

// answered expects a question Settled in its window by the person with
// the batch want.
func (e *env) answered(name string, want ...hitlv1.AnswerItem) {
	e.t.Helper()
	e.g.Eventually(e.state(name)).Should(Equal(hitlv1.StateSettled))
	q := e.question(name)
	e.g.Expect(q.Status.Settlement.AnsweredBy.Username).To(Equal(e.person), "answeredBy is the person")
	e.g.Expect(q.Status.Settlement.Late).To(BeFalse())
	e.g.Expect(q.Status.Answers).To(Equal(want))
}

// claims lists the QuestionClaims on a question.
func (e *env) claims(name string) func() []hitlv1.QuestionClaim {
	return func() []hitlv1.QuestionClaim {
		l := &hitlv1.QuestionClaimList{}
		e.g.Expect(e.admin.List(e.ctx, l, client.InNamespace(e.ns), client.MatchingLabels{hitlv1.QuestionLabel: name})).To(Succeed())
		return l.Items
	}
}

func TestEveryKindOfQuestionAppearsLiveAndIsAnswered(t *testing.T) {
	e := newEnv(t)
	_, url := e.inbox(inbox.Options{})
	tab := e.tab("de-DE,de;q=0.9,en;q=0.5", false)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`[data-empty]`)))
	e.g.Eventually(func() string { return e.text(tab, `[data-connection]`) }).Should(Equal("Live"))

	// Single choice, radio buttons with descriptions, in a timed window
	// (the card claims the question while it is open).
	q := Question("deploy", e.ns).Ask("env", "Where should I deploy?", "staging", "production").Timeout(10 * time.Minute).Obj()
	q.Spec.Questions[0].Header = "Deploy"
	q.Spec.Questions[0].Options[1].Description = "the real thing: customers see it"
	e.ask(q)
	e.do(tab, chromedp.WaitVisible(card("deploy")), chromedp.Click(card("deploy", `[data-action="toggle"]`)),
		chromedp.WaitVisible(card("deploy", `input[type=radio][value="production"]`)))
	e.g.Expect(e.text(tab, card("deploy", ".chip"))).To(Equal("Deploy"))
	e.g.Eventually(e.claims("deploy")).Should(HaveLen(1), "the open card claims the timed question")
	e.g.Eventually(func() string { return e.text(tab, card("deploy", "[data-claim]")) }).Should(MatchRegexp(`You hold the window: \d+:\d\d left`))
	e.g.Expect(e.claims("deploy")()[0].Spec.Holder).To(HaveValue(HaveField("Username", e.person)), "the API server stamps the person as the holder")
	e.screenshot(tab, card("deploy"), "inbox-single")
	e.do(tab, chromedp.Click(card("deploy", `input[value="production"]`)), chromedp.Click(card("deploy", `button.primary`)),
		chromedp.WaitVisible(card("deploy", ".outcome-applied")))
	e.g.Expect(e.text(tab, card("deploy", "[data-outcome]"))).To(ContainSubstring("Applied — The agent has your answer"))
	e.answered("deploy", hitlv1.AnswerItem{ID: "env", Selected: []string{"production"}})
	e.g.Eventually(e.claims("deploy")).Should(BeEmpty(), "answering releases the claim")

	// Multi-select: checkboxes, with an "Other" text that accompanies them.
	e.ask(Question("langs", e.ns).Ask("langs", "Which languages may the service use?", "Go", "Rust", "Zig").Multi().Obj())
	e.do(tab, chromedp.WaitVisible(card("langs")), chromedp.Click(card("langs", `[data-action="toggle"]`)),
		chromedp.Click(card("langs", `input[type=checkbox][value="Go"]`)), chromedp.Click(card("langs", `input[type=checkbox][value="Zig"]`)),
		chromedp.SendKeys(card("langs", `[data-custom]`), "OCaml"))
	e.screenshot(tab, card("langs"), "inbox-multi")
	e.do(tab, chromedp.Click(card("langs", `button.primary`)), chromedp.WaitVisible(card("langs", ".outcome-applied")))
	e.answered("langs", hitlv1.AnswerItem{ID: "langs", Selected: []string{"Go", "Zig"}, Custom: "OCaml"})

	// Free text: a question without options.
	e.ask(Question("notes", e.ns).Ask("notes", "Anything the release notes should say?").Obj())
	e.do(tab, chromedp.WaitVisible(card("notes")), chromedp.Click(card("notes", `[data-action="toggle"]`)),
		chromedp.SendKeys(card("notes", `textarea[data-custom]`), "Faster startup."))
	e.screenshot(tab, card("notes"), "inbox-text")
	e.do(tab, chromedp.Click(card("notes", `button.primary`)), chromedp.WaitVisible(card("notes", ".outcome-applied")))
	e.answered("notes", hitlv1.AnswerItem{ID: "notes", Custom: "Faster startup."})

	// Skip: a batch may skip some questions, not all; the page says so
	// with the rule's code and field before sending anything.
	e.ask(Question("two", e.ns).Ask("size", "Which instance size?", "small", "large").Ask("why", "Why that size?").Obj())
	e.do(tab, chromedp.WaitVisible(card("two")), chromedp.Click(card("two", `[data-action="toggle"]`)),
		chromedp.Click(card("two", `fieldset[data-question="size"] [data-skip]`)),
		chromedp.Click(card("two", `fieldset[data-question="why"] [data-skip]`)),
		chromedp.Click(card("two", `button.primary`)), chromedp.WaitVisible(card("two", "[data-errors] p")))
	e.g.Expect(e.text(tab, card("two", "[data-errors]"))).To(Equal("BAD_ANSWER: a batch may skip some questions, not all of them (spec.answers)"))
	replies := &hitlv1.QuestionReplyList{}
	e.g.Expect(e.admin.List(e.ctx, replies, client.InNamespace(e.ns), client.MatchingLabels{hitlv1.QuestionLabel: "two"})).To(Succeed())
	e.g.Expect(replies.Items).To(BeEmpty(), "an invalid batch is not sent")
	e.do(tab, chromedp.Click(card("two", `fieldset[data-question="size"] [data-skip]`)),
		chromedp.Click(card("two", `input[value="small"]`)))
	e.screenshot(tab, card("two"), "inbox-skip")
	e.do(tab, chromedp.Click(card("two", `button.primary`)), chromedp.WaitVisible(card("two", ".outcome-applied")))
	e.answered("two", hitlv1.AnswerItem{ID: "size", Selected: []string{"small"}}, hitlv1.AnswerItem{ID: "why"})

	// PlanReview: the plan rendered from markdown, Approve.
	e.ask(Question("plan", e.ns).Ask("plan", "Run this migration plan?", "Ship it", "Revise").
		Detail("## Migration\n\n1. Snapshot the **orders** table\n2. Run `migrate up`\n\n| step | time |\n|---|---|\n| snapshot | 2m |").
		PlanReview("Ship it").Obj())
	e.do(tab, chromedp.WaitVisible(card("plan")), chromedp.Click(card("plan", `[data-action="toggle"]`)),
		chromedp.WaitVisible(card("plan", `.plan h2`)))
	e.g.Expect(e.text(tab, card("plan", ".plan strong"))).To(Equal("orders"))
	e.screenshot(tab, card("plan"), "inbox-plan")
	e.do(tab, chromedp.Click(card("plan", `button[data-choice="Ship it"]`)), chromedp.WaitVisible(card("plan", ".outcome-applied")))
	e.answered("plan", hitlv1.AnswerItem{ID: "plan", Selected: []string{"Ship it"}})

	// PlanReview: Revise, with feedback instead of a choice.
	e.ask(Question("plan2", e.ns).Ask("plan", "Run this plan?", "Ship it", "Revise").Detail("1. Drop the table").PlanReview("Ship it").Obj())
	e.do(tab, chromedp.WaitVisible(card("plan2")), chromedp.Click(card("plan2", `[data-action="toggle"]`)),
		chromedp.SendKeys(card("plan2", `textarea[data-custom]`), "Snapshot it first."),
		chromedp.Click(card("plan2", `button[data-feedback]`)), chromedp.WaitVisible(card("plan2", ".outcome-applied")))
	e.answered("plan2", hitlv1.AnswerItem{ID: "plan", Custom: "Snapshot it first."})

	// Approval: the subject, the texts of the browser's locale, Allow /
	// Deny / Always.
	ap := Question("perm", e.ns).Ask("perm", "May I delete the build cache?", "Allow once", "Deny", "Always allow").
		Approval("Allow once", "Deny", "Always allow").Obj()
	ap.Spec.Questions[0].Intent.Approval.Subject = &hitlv1.ApprovalSubject{Name: "cache-janitor"}
	ap.Spec.Questions[0].Intent.Approval.Display = &hitlv1.ApprovalDisplay{
		Question: hitlv1.LocalizedText{"en": "May I delete the build cache?", "de": "Darf ich den Build-Cache löschen?"},
		Approve:  hitlv1.LocalizedText{"en": "Only this time", "de": "Nur dieses eine Mal"},
	}
	e.ask(ap)
	e.do(tab, chromedp.WaitVisible(card("perm")), chromedp.Click(card("perm", `[data-action="toggle"]`)),
		chromedp.WaitVisible(card("perm", `button[data-choice="Always allow"]`)))
	e.g.Expect(e.text(tab, card("perm", "legend"))).To(Equal("Darf ich den Build-Cache löschen?"))
	e.g.Expect(e.text(tab, card("perm", ".subject"))).To(Equal("Requested by cache-janitor"))
	e.g.Expect(e.text(tab, card("perm", ".grant"))).To(Equal("Nur dieses eine Mal"))
	e.g.Expect(e.text(tab, card("perm", `button[data-choice="Deny"]`))).To(HavePrefix("Deny"))
	e.screenshot(tab, card("perm"), "inbox-approval")
	e.do(tab, chromedp.Click(card("perm", `button[data-choice="Allow once"]`)), chromedp.WaitVisible(card("perm", ".outcome-applied")))
	e.answered("perm", hitlv1.AnswerItem{ID: "perm", Selected: []string{"Allow once"}})
}

func TestKeyboardOnly(t *testing.T) {
	e := newEnv(t)
	_, url := e.inbox(inbox.Options{})
	tab := e.tab("", true)
	e.ask(Question("kb", e.ns).Ask("env", "Where should I deploy?", "staging", "production").Obj())
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(card("kb")))
	e.screenshot(tab, chromedp.CSS("body"), "inbox-dark")
	// Tab to the card's button, open it with Enter, pick with the arrow
	// keys (native radio buttons), send with Enter.
	e.do(tab, chromedp.Focus(card("kb", `[data-action="toggle"]`)), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(card("kb", `input[value="staging"]`)))
	e.g.Expect(eval[string](e, tab, `document.activeElement.value`)).To(Equal("staging"), "opening the card focuses its first answer")
	e.do(tab, chromedp.KeyEvent(kb.ArrowDown)) // native radio buttons: the arrow moves and selects
	e.g.Expect(eval[string](e, tab, `document.activeElement.value`)).To(Equal("production"))
	e.g.Expect(eval[bool](e, tab, `document.activeElement.checked`)).To(BeTrue())
	e.do(tab, chromedp.KeyEvent("\r"), chromedp.WaitVisible(card("kb", ".outcome-applied")))
	e.answered("kb", hitlv1.AnswerItem{ID: "env", Selected: []string{"production"}})
	e.g.Expect(eval[string](e, tab, `document.querySelector('li.item [data-action="toggle"]').getAttribute('aria-expanded')`)).To(Equal("true"))
}

func TestOpenCardHoldsTheWindowPastItsDeadline(t *testing.T) {
	e := newEnv(t)
	// The lease is renewed every third of its 6 s and the page reports
	// every second, released after 6 s without a report: a machine that
	// stalls for a few seconds does not lose the claim.
	const lease = 6 * time.Second
	_, url := e.inbox(inbox.Options{ClaimDuration: lease, Heartbeat: time.Second, ClaimIdle: lease})
	tab := e.tab("", false)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`[data-empty]`)))
	// The window is long enough for the card to open and the person to
	// tick "hold" before it closes, however slow the machine.
	e.ask(Question("held", e.ns).Ask("env", "Where should I deploy?", "staging", "production").Timeout(10 * time.Second).Obj())
	e.do(tab, chromedp.WaitVisible(card("held")), chromedp.Click(card("held", `[data-action="toggle"]`)),
		chromedp.WaitVisible(card("held", `[data-hold-wrap]`)), chromedp.Click(card("held", `[data-hold]`)))
	deadline, timed := e.question("held").Deadline()
	e.g.Expect(timed).To(BeTrue())
	e.g.Expect(time.Now()).To(BeTemporally("<", deadline), "the card was opened and held before the deadline")
	e.g.Expect(eval[bool](e, tab, `document.querySelector('li.item[data-name="held"] [data-hold]').checked`)).To(BeTrue())
	e.g.Expect(e.claims("held")()).To(HaveLen(1))
	// Keep the person active (they read and move the pointer) past the
	// deadline and past the lease duration, so that only the page's
	// heartbeats and the server's renewals keep the window open.
	for time.Now().Before(deadline.Add(lease + 2*time.Second)) {
		e.do(tab, chromedp.Click(card("held", `input[value="staging"]`)))
		time.Sleep(500 * time.Millisecond)
	}
	q := e.question("held")
	e.g.Expect(q.Status.State).To(Equal(hitlv1.StateOpen), "the open card holds the window past its deadline; conditions %v; the card says %q",
		q.Status.Conditions, e.text(tab, card("held", "[data-claim]")))
	e.g.Expect(e.text(tab, card("held", "[data-claim]"))).To(MatchRegexp(`holding the window open: its deadline passed \d+:\d\d ago`))
	e.do(tab, chromedp.Click(card("held", `button.primary`)), chromedp.WaitVisible(card("held", ".outcome-applied")))
	e.answered("held", hitlv1.AnswerItem{ID: "env", Selected: []string{"staging"}})
	e.g.Eventually(e.claims("held")).Should(BeEmpty())
}

func TestClosedCardGivesTheWindowBackAndALateReplyIsQueuedAndWithdrawn(t *testing.T) {
	e := newEnv(t)
	_, url := e.inbox(inbox.Options{})
	tab := e.tab("", false)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`[data-empty]`)))
	// The card must open, and claim the question, inside the window,
	// however slow the machine.
	e.ask(Question("late", e.ns).Ask("env", "Where should I deploy?", "staging", "production").Timeout(8 * time.Second).Obj())
	e.do(tab, chromedp.WaitVisible(card("late")), chromedp.Click(card("late", `[data-action="toggle"]`)))
	e.g.Eventually(e.claims("late")).Should(HaveLen(1))
	e.do(tab, chromedp.Click(card("late", `[data-action="toggle"]`)))
	e.g.Eventually(e.claims("late")).Should(BeEmpty(), "closing the card releases its claim")
	e.g.Eventually(e.state("late")).Should(Equal(hitlv1.StateContinued))
	e.g.Eventually(func() string { return e.text(tab, card("late", "[data-state-text]")) }).Should(Equal("window closed: answer late"))

	e.do(tab, chromedp.Click(card("late", `[data-action="toggle"]`)), chromedp.Click(card("late", `input[value="staging"]`)),
		chromedp.Click(card("late", `button.primary`)), chromedp.WaitVisible(card("late", ".outcome-queued")))
	e.g.Expect(e.text(tab, card("late", "[data-outcome]"))).To(ContainSubstring("the agent will take it when ready"))
	e.g.Eventually(func() string { return e.text(tab, card("late", ".queued")) }).Should(ContainSubstring("A late reply by " + e.person + " is queued"))
	e.screenshot(tab, card("late"), "inbox-queued")
	queued := e.question("late").Status.QueuedReply
	e.g.Expect(queued).NotTo(BeNil())
	e.g.Expect(queued.AnsweredBy.Username).To(Equal(e.person))

	e.do(tab, chromedp.Click(card("late", `[data-outcome] [data-action="withdraw"]`)))
	e.g.Eventually(func() string { return e.text(tab, card("late", "[data-outcome]")) }).Should(ContainSubstring("Withdrawn"))
	e.g.Eventually(func() *hitlv1.QueuedReply { return e.question("late").Status.QueuedReply }).Should(BeNil())
	e.g.Expect(e.state("late")()).To(Equal(hitlv1.StateContinued))
	e.g.Eventually(func() int {
		return len(eval[[]any](e, tab, `Array.from(document.querySelectorAll('li.item .queued'))`))
	}).Should(BeZero())
}

func TestAReplyToAQuestionSettledMeanwhileIsNotAnswerableAndTheListRecovers(t *testing.T) {
	e := newEnv(t)
	gt, url := e.inbox(inbox.Options{})
	tab := e.tab("", false)
	e.ask(Question("race", e.ns).Ask("env", "Where should I deploy?", "staging", "production").Obj())
	e.ask(Question("gone", e.ns).Ask("env", "Still needed?", "yes", "no").Obj())
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(card("race")), chromedp.WaitVisible(card("gone")),
		chromedp.Click(card("race", `[data-action="toggle"]`)), chromedp.Click(card("race", `input[value="staging"]`)))

	// The page loses its live updates; meanwhile bob answers first, one
	// question is deleted and the agent asks another.
	gt.cut()
	e.g.Eventually(func() string { return e.text(tab, `[data-connection]`) }).Should(Equal("Reconnecting…"))
	_, bob := e.user("bob-"+e.ns, "hitl_answerer.yaml")
	e.g.Expect(bob.Create(e.ctx, Reply("race-bob", e.ns, "race").Select("env", "production").Obj())).To(Succeed())
	e.g.Eventually(e.state("race")).Should(Equal(hitlv1.StateSettled))
	e.g.Expect(e.admin.Delete(e.ctx, e.question("gone"))).To(Succeed())
	e.ask(Question("fresh", e.ns).Ask("env", "A new one?", "yes", "no").Obj())

	// The reply came after the question was settled: Closed (final and
	// healthy), with the reason NOT_ANSWERABLE and what it means.
	e.do(tab, chromedp.Click(card("race", `button.primary`)), chromedp.WaitVisible(card("race", ".outcome-closed")))
	out := e.text(tab, card("race", "[data-outcome]"))
	e.g.Expect(out).To(ContainSubstring("Closed: NOT_ANSWERABLE"))
	e.g.Expect(out).To(ContainSubstring("settled (someone answered first)"))
	e.screenshot(tab, card("race"), "inbox-rejected")
	e.g.Expect(e.question("race").Status.Settlement.AnsweredBy.Username).To(Equal("bob-"+e.ns), "the question did not change")

	// Back online: the list is what the cluster holds.
	gt.restore()
	e.do(tab, chromedp.WaitVisible(card("fresh")), chromedp.WaitNotPresent(card("gone")))
	e.g.Eventually(func() string { return e.text(tab, `[data-connection]`) }).Should(Equal("Live"))
	e.g.Eventually(func() string { return e.text(tab, card("race", ".settled")) }).Should(ContainSubstring("Settled by bob-" + e.ns + ": env: production"))
}

func TestAgentTextIsShownAsText(t *testing.T) {
	e := newEnv(t)
	_, url := e.inbox(inbox.Options{})
	tab := e.tab("", false)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`[data-empty]`)))
	hostile := Question("xss", e.ns).Ask("q", `<script>window.pwned=1</script>Pick one`, `<img src=x onerror="window.pwned=2">`, "fine").
		Detail("Read [the docs](javascript:window.pwned=3) and <script>window.pwned=4</script> <img src=x onerror=\"window.pwned=5\">\n\n" +
			"![tracker](https://tracker.invalid/pixel.png) <a href=\"javascript:window.pwned=6\">click</a> [ok](https://example.com/)").Obj()
	hostile.Spec.Questions[0].Header = `<b>hdr</b>`
	hostile.Spec.Questions[0].Options[1].Description = `"><script>window.pwned=7</script>`
	e.ask(hostile)
	e.do(tab, chromedp.WaitVisible(card("xss")), chromedp.Click(card("xss", `[data-action="toggle"]`)),
		chromedp.WaitVisible(card("xss", ".detail")))
	e.g.Expect(e.text(tab, card("xss", ".card-title"))).To(Equal("<script>window.pwned=1</script>Pick one"))
	e.g.Expect(e.text(tab, card("xss", ".chip"))).To(Equal("<b>hdr</b>"))
	e.g.Expect(eval[string](e, tab, `document.querySelector('li.item input[data-option]').value`)).To(Equal(`<img src=x onerror="window.pwned=2">`))
	e.g.Expect(eval[bool](e, tab, `'pwned' in window`)).To(BeFalse(), "no agent text ran as script")
	e.g.Expect(eval[int](e, tab, `document.querySelectorAll('li.item script, li.item img, li.item [onerror], li.item a[href^="javascript"]').length`)).To(BeZero())
	e.g.Expect(eval[[]string](e, tab, `Array.from(document.querySelectorAll('li.item .detail a')).map(a => a.href + ' ' + a.rel)`)).To(
		ConsistOf("https://tracker.invalid/pixel.png noopener noreferrer nofollow", "https://example.com/ noopener noreferrer nofollow"))
	detail := e.text(tab, card("xss", ".detail"))
	e.g.Expect(detail).To(ContainSubstring("Read the docs and"), "a refused link keeps its text")
	e.g.Expect(detail).To(ContainSubstring("<script>window.pwned=4</script>"), "raw HTML shows as text")
	e.screenshot(tab, card("xss"), "inbox-hostile")
	e.do(tab, chromedp.Click(card("xss", `input[value="fine"]`)), chromedp.Click(card("xss", `button.primary`)),
		chromedp.WaitVisible(card("xss", ".outcome-applied")))
	e.g.Expect(eval[bool](e, tab, `'pwned' in window`)).To(BeFalse())
	e.g.Expect(strings.Contains(e.text(tab, card("xss", ".settled")), "q: fine")).To(BeTrue())
}
