package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/inbox"
	"github.com/hitl-dev/hitl/pkg/sealed"
	. "github.com/hitl-dev/hitl/test/builders"
)

// typed is an ask of one free-text question id whose answer has input.
func (e *env) typed(name, id, text string, in *hitlv1.AnswerInput) *hitlv1.UserQuestion {
	q := Question(name, e.ns).Ask(id, text).Obj()
	q.Spec.Questions[0].Input = in
	return q
}

// replies lists the replies to a question.
func (e *env) replies(name string) []hitlv1.QuestionReply {
	l := &hitlv1.QuestionReplyList{}
	e.g.Expect(e.admin.List(e.ctx, l, client.InNamespace(e.ns), client.MatchingLabels{hitlv1.QuestionLabel: name})).To(Succeed())
	return l.Items
}

// setValue sets a field's value as the person's editing would, which
// the page hears of (an input event).
func setValue(sel chromedp.CSS, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q;
		e.dispatchEvent(new Event('input', {bubbles: true})); })()`, string(sel), v))
}

// replyPosts counts the page's replies the inbox server received.
func replyPosts(g *gate) int {
	n := 0
	for _, p := range g.posts() {
		if strings.HasPrefix(p, "/api/reply ") {
			n++
		}
	}
	return n
}

// postReply posts a reply to the inbox's API from the page, as its own
// script would, with the page's CSRF token, but without its checks: a
// person who bypasses them. It returns the status and the body.
func (e *env) postReply(tab context.Context, name string, answers ...hitlv1.AnswerItem) (int, map[string]any) {
	e.t.Helper()
	q := e.question(name)
	body, err := json.Marshal(map[string]any{"namespace": e.ns, "name": name, "uid": q.UID, "answers": answers})
	e.g.Expect(err).NotTo(HaveOccurred())
	type result struct {
		Status int            `json:"status"`
		Body   map[string]any `json:"body"`
	}
	js := fmt.Sprintf(`fetch('api/reply', {method: 'POST', headers: {'Content-Type': 'application/json',
		'X-Hitl-Csrf': document.querySelector('meta[name="hitl-csrf"]').content}, body: %q})
		.then(r => r.json().then(b => ({status: r.status, body: b})))`, body)
	res, err := chromedp.Run(tab, chromedp.Evaluate[result](js, chromedp.EvalAwaitPromise))
	e.g.Expect(err).NotTo(HaveOccurred())
	return res.Status, res.Body
}

// A number question with bounds: the card's field is a number field
// with them; a value out of range, or not a number, is refused in the
// page next to the field, and nothing is sent; one in range settles the
// question with the value as typed.
func TestANumberIsCheckedInThePageAndSettlesAsTyped(t *testing.T) {
	e := newEnv(t)
	gt, url := e.inbox(inbox.Options{})
	tab := e.tab("", false)
	e.ask(e.typed("scale", "replicas", "How many replicas?", &hitlv1.AnswerInput{Type: hitlv1.InputNumber,
		Minimum: ptr.To(intstr.FromString("0.5")), Maximum: ptr.To(intstr.FromInt32(10))}))
	field := card("scale", `input[type=number][min="0.5"][max="10"][step="any"][data-custom]`)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(card("scale")), chromedp.Click(card("scale", `[data-action="toggle"]`)),
		chromedp.WaitVisible(field))
	e.g.Expect(e.text(tab, card("scale", ".hint"))).To(Equal("A number from 0.5 to 10."))

	e.do(tab, chromedp.SendKeys(field, "12"), chromedp.Click(card("scale", `button.primary`)),
		chromedp.WaitVisible(card("scale", `[data-field-error]`)))
	e.g.Expect(e.text(tab, card("scale", `[data-field-error]`))).To(Equal("12 is above maximum 10 (input.type number)"))
	e.g.Expect(e.text(tab, card("scale", `[data-errors]`))).To(HavePrefix(
		"BAD_ANSWER: question replicas: 12 is above maximum 10 (input.type number) (spec.answers[0].custom)"))
	e.g.Expect(eval[string](e, tab, `document.activeElement.type`)).To(Equal("number"), "the field has the focus")

	// "1e" is no number: the field's value is then empty, which is no skip.
	e.do(tab, setValue(field, ""), chromedp.SendKeys(field, "1e"), chromedp.Click(card("scale", `button.primary`)))
	e.g.Eventually(func() string { return e.text(tab, card("scale", `[data-field-error]`)) }).Should(
		Equal("the field does not hold a number (e.g. 42, -1.5, 2e3) (input.type number)"))
	e.g.Expect(replyPosts(gt)).To(BeZero(), "nothing was sent")
	e.g.Expect(e.replies("scale")).To(BeEmpty())

	e.do(tab, setValue(field, ""), chromedp.SendKeys(field, "2.50"), chromedp.Click(card("scale", `button.primary`)),
		chromedp.WaitVisible(card("scale", ".outcome-applied")))
	e.g.Expect(eval[bool](e, tab, `document.querySelector('li.item[data-name="scale"] [data-field-error]').hidden`)).To(BeTrue())
	e.answered("scale", hitlv1.AnswerItem{ID: "replicas", Custom: "2.50"})
}

// A date question: a date the field holds but that is none
// (20261-12-24) or a date half filled in is refused in the page; a bad
// date sent past the page's checks is refused by the inbox server
// (BAD_ANSWER, nothing created), and one created straight through the
// API as the person is Rejected by the controller with BAD_ANSWER naming
// the question. A whole date settles it.
func TestABadDateIsRefusedInThePageAndByTheServer(t *testing.T) {
	e := newEnv(t)
	gt, url := e.inbox(inbox.Options{})
	tab := e.tab("en-US", false)
	e.ask(e.typed("release", "when", "When should the release go out?", &hitlv1.AnswerInput{Type: hitlv1.InputDate}))
	field := card("release", `input[type=date][data-custom]`)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(card("release")),
		chromedp.Click(card("release", `[data-action="toggle"]`)), chromedp.WaitVisible(field))

	// The picker takes a year of five digits; a date has four.
	e.do(tab, chromedp.SendKeys(field, "12"+"24"+"20261"), chromedp.Click(card("release", `button.primary`)),
		chromedp.WaitVisible(card("release", `[data-field-error]`)))
	e.g.Expect(eval[string](e, tab, `document.querySelector('li.item[data-name="release"] input[type=date]').value`)).To(Equal("20261-12-24"))
	e.g.Expect(e.text(tab, card("release", `[data-field-error]`))).To(Equal(
		`"20261-12-24" is not a date (YYYY-MM-DD, e.g. 2026-12-24) (input.type date)`))

	e.do(tab, setValue(field, ""), chromedp.SendKeys(field, "12"), chromedp.Click(card("release", `button.primary`)))
	e.g.Eventually(func() string { return e.text(tab, card("release", `[data-field-error]`)) }).Should(
		Equal("the field does not hold a whole date: fill in its day, month and year (input.type date)"))
	e.g.Expect(replyPosts(gt)).To(BeZero(), "nothing was sent")

	// Past the page's checks, to the inbox server: refused, nothing created.
	status, body := e.postReply(tab, "release", hitlv1.AnswerItem{ID: "when", Custom: "2026-02-30"})
	e.g.Expect(status).To(Equal(422))
	e.g.Expect(body).To(HaveKeyWithValue("code", "BAD_ANSWER"))
	e.g.Expect(body).To(HaveKeyWithValue("questionID", "when"))
	e.g.Expect(body["message"]).To(Equal(`BAD_ANSWER: question when: "2026-02-30" is not a date (YYYY-MM-DD, e.g. 2026-12-24) (input.type date) (spec.answers[0].custom)`))
	e.g.Expect(e.replies("release")).To(BeEmpty())

	// Past the inbox, to the API server as the person: the admission
	// policies cannot read the question, so the controller rejects it.
	direct := Reply("", e.ns, "release").Custom("when", "2026-02-30").Obj()
	direct.GenerateName = "release-"
	e.g.Expect(e.pclient.Create(e.ctx, direct)).To(Succeed())
	e.g.Eventually(func() hitlv1.QuestionReplyStatus {
		r := &hitlv1.QuestionReply{}
		e.g.Expect(e.admin.Get(e.ctx, client.ObjectKeyFromObject(direct), r)).To(Succeed())
		return r.Status
	}).Should(And(HaveField("Outcome", hitlv1.OutcomeRejected), HaveField("Reason", hitlv1.CodeBadAnswer),
		HaveField("Message", ContainSubstring(`question when: "2026-02-30" is not a date`))))
	e.g.Expect(e.question("release").State()).To(Equal(hitlv1.StateOpen))

	e.do(tab, setValue(field, ""), chromedp.SendKeys(field, "12"+"24"+"2026"), chromedp.Click(card("release", `button.primary`)),
		chromedp.WaitVisible(card("release", ".outcome-applied")))
	e.answered("release", hitlv1.AnswerItem{ID: "when", Custom: "2026-12-24"})
}

// A required question has no skip in its card, and the page does not send
// a batch that leaves it empty; neither does the inbox server. A required
// boolean may be answered false, and an option with a value is still
// answered with its label.
func TestARequiredQuestionCannotBeSkipped(t *testing.T) {
	e := newEnv(t)
	gt, url := e.inbox(inbox.Options{})
	tab := e.tab("", false)
	q := Question("rollout", e.ns).Ask("size", "Which instance size?", "small", "large").
		Ask("replicas", "How many replicas?").Ask("canary", "Start with a canary?").Obj()
	// An option's value is the agent's: the person picks, and the reply
	// selects, its label.
	q.Spec.Questions[0].Options[0].Value = "t3.small"
	q.Spec.Questions[1].Input = &hitlv1.AnswerInput{Type: hitlv1.InputInteger, Minimum: ptr.To(intstr.FromInt32(1)), Required: true}
	q.Spec.Questions[2].Input = &hitlv1.AnswerInput{Type: hitlv1.InputBoolean, Required: true}
	e.ask(q)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(card("rollout")),
		chromedp.Click(card("rollout", `[data-action="toggle"]`)), chromedp.WaitVisible(card("rollout", `input[value="small"]`)))
	e.g.Expect(eval[[]string](e, tab, `Array.from(document.querySelectorAll('li.item[data-name="rollout"] fieldset:has([data-skip])')).map(f => f.dataset.question)`)).
		To(Equal([]string{"size"}), "only the question that is not required may be skipped")
	e.g.Expect(e.text(tab, card("rollout", `fieldset[data-question="replicas"] .hint`))).To(Equal("Required. A whole number of at least 1."))

	e.do(tab, chromedp.Click(card("rollout", `input[value="small"]`)), chromedp.Click(card("rollout", `input[data-bool][value="false"]`)),
		chromedp.Click(card("rollout", `button.primary`)), chromedp.WaitVisible(card("rollout", `fieldset[data-question="replicas"] [data-field-error]`)))
	e.g.Expect(e.text(tab, card("rollout", `fieldset[data-question="replicas"] [data-field-error]`))).To(
		Equal("the question is required (input.required): it may not be skipped"))
	e.g.Expect(e.text(tab, card("rollout", `[data-errors]`))).To(HavePrefix(
		"BAD_ANSWER: question replicas: the question is required (input.required): it may not be skipped (spec.answers[1])"))
	e.g.Expect(replyPosts(gt)).To(BeZero(), "nothing was sent")

	status, body := e.postReply(tab, "rollout", hitlv1.AnswerItem{ID: "size", Selected: []string{"small"}},
		hitlv1.AnswerItem{ID: "replicas"}, hitlv1.AnswerItem{ID: "canary", Custom: "false"})
	e.g.Expect(status).To(Equal(422))
	e.g.Expect(body["message"]).To(Equal("BAD_ANSWER: question replicas: the question is required (input.required): it may not be skipped (spec.answers[1])"))
	e.g.Expect(e.replies("rollout")).To(BeEmpty())

	e.do(tab, chromedp.SendKeys(card("rollout", `fieldset[data-question="replicas"] input[type=number][step="1"]`), "3"),
		chromedp.Click(card("rollout", `button.primary`)), chromedp.WaitVisible(card("rollout", ".outcome-applied")))
	e.answered("rollout", hitlv1.AnswerItem{ID: "size", Selected: []string{"small"}},
		hitlv1.AnswerItem{ID: "replicas", Custom: "3"}, hitlv1.AnswerItem{ID: "canary", Custom: "false"})
}

// Each input type has its control, and the page sends what the rule
// reads: a date and time picked on the person's clock goes with their
// offset from UTC.
func TestEveryInputTypeHasItsControl(t *testing.T) {
	e := newEnv(t)
	_, url := e.inbox(inbox.Options{})
	tab := e.tab("", false)
	_, err := chromedp.Call(tab, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"})
	e.g.Expect(err).NotTo(HaveOccurred())
	q := Question("change", e.ns).Ask("when", "When?").Ask("notify", "Whom to tell?").Ask("ticket", "Which ticket?").
		Ask("approved", "Approved by the CAB?").Obj()
	for i, t := range []hitlv1.InputType{hitlv1.InputDateTime, hitlv1.InputEmail, hitlv1.InputURI, hitlv1.InputBoolean} {
		q.Spec.Questions[i].Input = &hitlv1.AnswerInput{Type: t, Required: true}
	}
	e.ask(q)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(card("change")),
		chromedp.Click(card("change", `[data-action="toggle"]`)), chromedp.WaitVisible(card("change", `input[type=email]`)))
	// The picker's parts are typed in the order of the browser's locale:
	// the test sets its value as the picker does.
	e.do(tab, setValue(card("change", `input[type=datetime-local]`), "2026-12-24T18:00"),
		chromedp.SendKeys(card("change", `input[type=email]`), "cab@example.com"),
		chromedp.SendKeys(card("change", `input[type=url]`), "ticket/CHG-1"),
		chromedp.Click(card("change", `input[data-bool][value="true"]`)),
		chromedp.Click(card("change", `button.primary`)), chromedp.WaitVisible(card("change", `fieldset[data-question="ticket"] [data-field-error]`)))
	e.g.Expect(e.text(tab, card("change", `fieldset[data-question="ticket"] [data-field-error]`))).To(Equal(
		`"ticket/CHG-1" is not an absolute URI (with a scheme, e.g. https://example.com/x) (input.type uri)`))
	e.do(tab, setValue(card("change", `input[type=url]`), ""),
		chromedp.SendKeys(card("change", `input[type=url]`), "https://tickets.example.com/CHG-1"),
		chromedp.Click(card("change", `button.primary`)), chromedp.WaitVisible(card("change", ".outcome-applied")))
	e.answered("change", hitlv1.AnswerItem{ID: "when", Custom: "2026-12-24T18:00:00+05:30"},
		hitlv1.AnswerItem{ID: "notify", Custom: "cab@example.com"}, hitlv1.AnswerItem{ID: "ticket", Custom: "https://tickets.example.com/CHG-1"},
		hitlv1.AnswerItem{ID: "approved", Custom: "true"})
}

// syncBuffer is a log sink's buffer that the inbox's goroutines share.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) write(prefix, args string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(prefix + " " + args + "\n")
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A sensitive question is a password field, and its answer is sealed in
// the browser to the agent's key: the page sends only the sealed text,
// the reply and the question's status hold only it, the card says that
// an answer was given, and the agent's key opens it to exactly what was
// typed, which neither the inbox server's requests nor its log nor any
// object ever held. The page checks the value's rule without showing it;
// the inbox server refuses a sensitive answer in the clear; and a browser
// without WebCrypto refuses to send one.
func TestASensitiveAnswerIsSealedInTheBrowser(t *testing.T) {
	e := newEnv(t)
	logs := &syncBuffer{}
	gt, url := e.inbox(inbox.Options{Log: funcr.New(logs.write, funcr.Options{Verbosity: 10})})
	tab := e.tab("", false)
	key, err := sealed.NewKey()
	e.g.Expect(err).NotTo(HaveOccurred())
	q := e.typed("deploy-key", "token", "The registry token, please", &hitlv1.AnswerInput{Type: hitlv1.InputString,
		MinLength: ptr.To[int32](12), Required: true})
	q.Spec.Questions[0].Sensitive = true
	q.Spec.SealingKey = key.PublicKey()
	e.ask(q)
	const secret = "  s3cr3t token-ß "
	field := card("deploy-key", `input[type=password][autocomplete=off][data-custom]`)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(card("deploy-key")),
		chromedp.Click(card("deploy-key", `[data-action="toggle"]`)), chromedp.WaitVisible(field))

	// Too short: the rule, never the value.
	e.do(tab, chromedp.SendKeys(field, "hunter2"), chromedp.Click(card("deploy-key", `button.primary`)),
		chromedp.WaitVisible(card("deploy-key", `[data-field-error]`)))
	e.g.Expect(e.text(tab, card("deploy-key", `[data-field-error]`))).To(Equal("the answer has 7 characters, fewer than minLength 12 (input.type string)"))
	e.g.Expect(eval[string](e, tab, `document.querySelector('li.item[data-name="deploy-key"]').innerText`)).NotTo(ContainSubstring("hunter2"))

	// In the clear, past the page: the inbox server refuses it.
	status, body := e.postReply(tab, "deploy-key", hitlv1.AnswerItem{ID: "token", Custom: "in the clear, please"})
	e.g.Expect(status).To(Equal(422))
	e.g.Expect(body["message"]).To(HavePrefix("BAD_ANSWER: question token: the question is sensitive"))
	e.g.Expect(e.replies("deploy-key")).To(BeEmpty())

	e.do(tab, setValue(field, ""), chromedp.SendKeys(field, secret), chromedp.Click(card("deploy-key", `button.primary`)),
		chromedp.WaitVisible(card("deploy-key", ".outcome-applied")))
	e.g.Eventually(e.state("deploy-key")).Should(Equal(hitlv1.StateSettled))
	asked := e.question("deploy-key")
	e.g.Expect(asked.Status.Answers).To(HaveLen(1))
	answer := asked.Status.Answers[0]
	e.g.Expect(answer).To(And(HaveField("ID", "token"), HaveField("Selected", BeEmpty()), HaveField("Custom", BeEmpty()),
		HaveField("Sealed", Not(BeEmpty()))))
	replies := e.replies("deploy-key")
	e.g.Expect(replies).To(HaveLen(1))
	e.g.Expect(replies[0].Spec.Answers).To(Equal([]hitlv1.AnswerItem{answer}), "the reply holds the same sealed answer")
	opened, err := key.Open(answer.Sealed, sealed.Binding{Namespace: e.ns, Question: asked.Name, UID: string(asked.UID), ID: "token"})
	e.g.Expect(err).NotTo(HaveOccurred(), "the browser sealed it as pkg/sealed does")
	e.g.Expect(opened).To(Equal(secret), "exactly as typed")

	posts := strings.Join(gt.posts(), "\n")
	e.g.Expect(posts).To(ContainSubstring(`"sealed":"` + answer.Sealed + `"`))
	objects, err := json.Marshal([]any{asked, replies})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(logs.String()).To(ContainSubstring("Watching questions"), "the inbox logs to the test")
	for where, text := range map[string]string{"the page's requests": posts, "the inbox's log": logs.String(), "the objects": string(objects)} {
		for _, plain := range []string{strings.TrimSpace(secret), "s3cr3t", "hunter2"} {
			e.g.Expect(text).NotTo(ContainSubstring(plain), "%q is not in %s", plain, where)
		}
	}
	e.g.Eventually(func() string { return e.text(tab, card("deploy-key", ".settled")) }).Should(
		ContainSubstring("token: sensitive answer given"))
	e.g.Expect(eval[string](e, tab, `document.body.innerHTML`)).NotTo(ContainSubstring(answer.Sealed), "the card shows no sealed text")

	// A browser without WebCrypto says so, and sends nothing.
	q = e.typed("other-key", "token", "Another token", nil)
	q.Spec.Questions[0].Sensitive = true
	q.Spec.SealingKey = key.PublicKey()
	e.ask(q)
	gt, url = e.inbox(inbox.Options{})
	bare := e.tab("", false)
	_, err = chromedp.Call(bare, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `Object.defineProperty(Crypto.prototype, 'subtle', {get: () => undefined})`})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.do(bare, chromedp.Navigate(url), chromedp.WaitVisible(card("other-key")),
		chromedp.Click(card("other-key", `[data-action="toggle"]`)), chromedp.WaitVisible(card("other-key", `input[type=password]`)))
	e.g.Expect(e.text(bare, card("other-key", `fieldset .problem`))).To(HavePrefix("This browser cannot seal a sensitive answer here"))
	e.do(bare, chromedp.SendKeys(card("other-key", `input[type=password]`), "another secret"),
		chromedp.Click(card("other-key", `button.primary`)), chromedp.WaitVisible(card("other-key", `[data-errors] p`)))
	e.g.Expect(e.text(bare, card("other-key", `[data-errors]`))).To(HavePrefix("Nothing was sent. This browser cannot seal"))
	e.g.Expect(replyPosts(gt)).To(BeZero(), "nothing was sent")
	e.g.Expect(e.replies("other-key")).To(BeEmpty())
}
