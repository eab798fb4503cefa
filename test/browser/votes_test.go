package browser

import (
	"testing"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/inbox"
	. "github.com/hitl-dev/hitl/test/builders"
)

// TestAVoteIsCountedShownAndNotOfferedAgain asks an Approval that needs
// two approvals: the person's Allow is counted, the card shows the tally,
// the voters and what is missing, and offers no second vote, also on a
// page opened afterwards; another person's approval settles it.
func TestAVoteIsCountedShownAndNotOfferedAgain(t *testing.T) {
	e := newEnv(t)
	_, url := e.inbox(inbox.Options{})
	tab := e.tab("", false)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`[data-empty]`)))
	q := Question("gate", e.ns).Ask("gate", "May I roll out v2 to prod?", "Allow", "Deny").Approval("Allow", "Deny", "").Obj()
	q.Spec.Approval = &hitlv1.ApprovalRule{Approvals: 2}
	e.ask(q)
	e.do(tab, chromedp.WaitVisible(card("gate")))
	e.g.Eventually(func() string { return e.text(tab, card("gate", ".tally")) }).Should(
		Equal("Votes 0/2 · settles with 2 approvals; a rejection vetoes; the asker may not vote"))
	e.g.Expect(e.text(tab, card("gate", ".needs"))).To(Equal("Still needed: 2 more approvals"))

	e.do(tab, chromedp.Click(card("gate", `[data-action="toggle"]`)), chromedp.Click(card("gate", `button[data-choice="Allow"]`)),
		chromedp.WaitVisible(card("gate", ".outcome-counted")))
	e.g.Expect(e.text(tab, card("gate", "[data-outcome]"))).To(ContainSubstring("Counted — Your vote is counted; the question needs more approvals."))
	e.g.Expect(eval[bool](e, tab, `document.querySelector('li.item[data-name="gate"]').classList.contains('answered')`)).To(BeTrue(),
		"a counted vote is a reply the card is done with")
	e.g.Expect(e.question("gate").Status.Votes).To(HaveLen(1))
	e.g.Expect(e.question("gate").Status.State).To(Equal(hitlv1.StateOpen), "one approval of two does not settle it")

	// The card follows the vote: the tally, who voted what, what is
	// missing, and the person's own vote instead of the answer controls.
	e.g.Eventually(func() string { return e.text(tab, card("gate", ".my-vote")) }).Should(Equal("You voted Approve; each person votes once."))
	e.g.Expect(e.text(tab, card("gate", ".tally"))).To(HavePrefix("Votes 1/2"))
	e.g.Expect(e.text(tab, card("gate", ".voters"))).To(Equal(e.person + " (you) voted Approve"))
	e.g.Expect(e.text(tab, card("gate", ".needs"))).To(Equal("Still needed: 1 more approval"))
	e.g.Expect(eval[bool](e, tab, `document.querySelector('li.item[data-name="gate"] [data-form]').hidden`)).To(BeTrue())
	e.g.Expect(e.text(tab, card("gate", "[data-outcome]"))).To(ContainSubstring("Counted"), "the open card still shows the outcome")
	e.screenshot(tab, card("gate"), "inbox-vote-counted")
	e.do(tab, chromedp.Click(card("gate", `[data-action="toggle"]`)))
	e.g.Expect(eval[bool](e, tab, `document.querySelector('li.item[data-name="gate"] [data-action="toggle"]').hidden`)).To(BeTrue(),
		"once closed, the card offers no second vote")

	// The page loaded again (the one-time link has made its session)
	// shows the vote, and no way to vote again.
	e.do(tab, chromedp.Reload(), chromedp.WaitVisible(card("gate", ".my-vote")))
	e.g.Expect(eval[bool](e, tab, `document.querySelector('li.item[data-name="gate"] [data-action="toggle"]').hidden`)).To(BeTrue())
	e.g.Expect(e.text(tab, card("gate", ".voters"))).To(Equal(e.person + " (you) voted Approve"))

	// bob's approval settles it.
	bob := "bob-" + e.ns
	_, bc := e.user(bob, "hitl_answerer.yaml")
	e.g.Expect(bc.Create(e.ctx, Reply("gate-bob", e.ns, "gate").Select("gate", "Allow").Obj())).To(Succeed())
	e.g.Eventually(e.state("gate")).Should(Equal(hitlv1.StateSettled))
	settled := e.question("gate")
	e.g.Expect(settled.Status.Settlement.Votes).To(HaveLen(2))
	e.g.Eventually(func() string { return e.text(tab, card("gate", ".finished")) }).Should(HavePrefix("This question was settled"))
	e.g.Expect(e.text(tab, card("gate", ".voters"))).To(ContainSubstring(bob + " voted Approve"))
	e.g.Expect(e.text(tab, card("gate", ".tally"))).To(HavePrefix("Votes 2/2"))
}
