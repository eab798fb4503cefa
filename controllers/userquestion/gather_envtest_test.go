package userquestion_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/watch"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/manager"
	. "github.com/hitl-dev/hitl/test/builders"
)

// Approvers notified together vote together: the votes that arrive while
// one that decides nothing waits are counted with it in one status write.
// The manager runs with a long gather window here, so the test does not
// depend on how fast two creates follow each other.
var _ = Describe("Votes sent together", Ordered, func() {
	const window = 2 * time.Second
	var ns string
	runManagerWith(func(c *manager.Config) { c.VoteGather = window })
	BeforeEach(func() { ns = governedNamespace() })
	ask := func(name string) {
		GinkgoHelper()
		q := Question(name, ns).Agent("release-bot").Ask("ship", "Ship v2?", "approve", "reject").Approval("approve", "reject", "").Obj()
		q.Spec.AskedBy = &hitlv1.UserInfo{Username: "release-bot", UID: "uid-bot"}
		Expect(k8s.Create(ctx, q)).To(Succeed())
		Eventually(func() string { return question(ns, name)().Status.Tally }).Should(Equal("0/2"))
	}

	It("are counted in the one write that settles the question", func() {
		ask("ship")
		Expect(k8s.Create(ctx, Reply("alice", ns, "ship").Select("ship", "approve").AnsweredBy("alice").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Reply("bob", ns, "ship").Select("ship", "approve").AnsweredBy("bob").Obj())).To(Succeed())
		Eventually(state(ns, "ship"), "10s").Should(Equal(hitlv1.StateSettled))
		votes := question(ns, "ship")().Status.Settlement.Votes
		Expect(votes).To(HaveLen(2))
		Expect(votes[0].At).To(Equal(votes[1].At), "both votes were counted by one decision")
		Eventually(outcome(ns, "alice")).Should(Equal(hitlv1.OutcomeCounted))
		Eventually(outcome(ns, "bob")).Should(Equal(hitlv1.OutcomeApplied))
		Eventually(events(ns, "ship", "Voted")).Should(Equal(2))
	})

	It("write a lone vote once the window has passed", func() {
		ask("ship")
		sent := time.Now()
		Expect(k8s.Create(ctx, Reply("alice", ns, "ship").Select("ship", "approve").AnsweredBy("alice").Obj())).To(Succeed())
		Eventually(outcome(ns, "alice"), "10s", "20ms").Should(Equal(hitlv1.OutcomeCounted))
		Expect(time.Since(sent)).To(BeNumerically(">=", window), "the vote waited for others")
		q := question(ns, "ship")()
		Expect(q.Status.Tally).To(Equal("1/2"))
		Expect(q.Status.State).To(Equal(hitlv1.StateOpen))
	})

	It("never hold back a vote that decides", func() {
		ask("ship")
		sent := time.Now()
		Expect(k8s.Create(ctx, Reply("bob", ns, "ship").Select("ship", "reject").AnsweredBy("bob").Obj())).To(Succeed())
		Eventually(state(ns, "ship"), "10s", "20ms").Should(Equal(hitlv1.StateSettled), "a veto settles")
		Expect(time.Since(sent)).To(BeNumerically("<", window), "the veto was written at once")
	})
})

// A governed question's first votes wait their own window, from the first
// of them, not only what is left of its Open status's, which began before
// any vote arrived. The manager runs with long windows here, the vote's
// longer than the Open status's, so the test does not depend on how fast
// the creates follow each other.
var _ = Describe("A new question's first votes", Ordered, func() {
	const openWindow, voteWindow = time.Second, 3 * time.Second
	var ns string
	runManagerWith(func(c *manager.Config) { c.OpenGather, c.VoteGather = openWindow, voteWindow })
	BeforeEach(func() { ns = governedNamespace() })

	It("wait their own window, past the Open status's", func() {
		w, err := k8sWatch(ns)
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		q := Question("fresh", ns).Agent("release-bot").Ask("ship", "Ship v2?", "approve", "reject").Approval("approve", "reject", "").Obj()
		q.Spec.AskedBy = &hitlv1.UserInfo{Username: "release-bot", UID: "uid-bot"}
		Expect(k8s.Create(ctx, q)).To(Succeed())
		asked := time.Now()
		Expect(k8s.Create(ctx, Reply("alice", ns, "fresh").Select("ship", "approve").AnsweredBy("alice").Obj())).To(Succeed())
		// Past the Open status's window, inside the first vote's.
		time.Sleep(time.Until(asked.Add(openWindow + openWindow/2)))
		Expect(k8s.Create(ctx, Reply("bob", ns, "fresh").Select("ship", "approve").AnsweredBy("bob").Obj())).To(Succeed())
		history := statesSeen(w, "fresh")
		Eventually(history, "10s", "10ms").Should(ContainElement(hitlv1.StateSettled))
		Expect(history()).To(Equal([]hitlv1.QuestionState{"", hitlv1.StateSettled}), "one status write: Settled, counting both votes")
		votes := question(ns, "fresh")().Status.Settlement.Votes
		Expect(votes).To(HaveLen(2))
		Expect(votes[0].At).To(Equal(votes[1].At), "both votes were counted by one decision")
		Eventually(outcome(ns, "alice")).Should(Equal(hitlv1.OutcomeCounted))
		Eventually(outcome(ns, "bob")).Should(Equal(hitlv1.OutcomeApplied))
	})
})

// A question answered at once goes straight to Settled in one status write:
// its Open status waits for a reply first. The manager runs with a long
// window here, so the test does not depend on how fast the reply follows.
var _ = Describe("A question answered at once", Ordered, func() {
	const window = 2 * time.Second
	var ns string
	runManagerWith(func(c *manager.Config) { c.OpenGather = window })
	BeforeEach(func() { ns = newNamespace() })

	It("is written Settled without ever being written Open", func() {
		w, err := k8sWatch(ns)
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		Expect(k8s.Create(ctx, Question("now", ns).Ask("q", "Q?", "yes", "no").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Reply("now-r", ns, "now").Select("q", "yes").Obj())).To(Succeed())
		history := statesSeen(w, "now")
		Eventually(history, "10s", "10ms").Should(ContainElement(hitlv1.StateSettled))
		Expect(history()).To(Equal([]hitlv1.QuestionState{"", hitlv1.StateSettled}), "one status write: Settled")
		Eventually(outcome(ns, "now-r")).Should(Equal(hitlv1.OutcomeApplied))
	})

	It("is written Open once the window has passed unanswered", func() {
		asked := time.Now()
		Expect(k8s.Create(ctx, Question("later", ns).Ask("q", "Q?", "yes", "no").Obj())).To(Succeed())
		Eventually(state(ns, "later"), "10s", "20ms").Should(Equal(hitlv1.StateOpen))
		Expect(time.Since(asked)).To(BeNumerically(">=", window), "Open waited for a reply")
	})
})

// statesSeen returns what w has delivered so far of question name's
// states, each status write's in order, taking in what arrived since the
// last call.
func statesSeen(w watch.Interface, name string) func() []hitlv1.QuestionState {
	var history []hitlv1.QuestionState
	return func() []hitlv1.QuestionState {
		for {
			select {
			case ev := <-w.ResultChan():
				if q, ok := ev.Object.(*hitlv1.UserQuestion); ok && q.Name == name {
					history = append(history, q.Status.State)
				}
			default:
				return history
			}
		}
	}
}

// runManagerWith runs the manager of the enclosing Ordered container with
// the default configuration changed by set, and the default one after it.
func runManagerWith(set func(*manager.Config)) {
	BeforeAll(func() {
		stopManager()
		c := manager.DefaultConfig()
		set(&c)
		startManagerWith(c)
	})
	AfterAll(func() {
		stopManager()
		startManager()
	})
}

// governedNamespace is a new namespace whose approvals need two votes
// (policy "two"), once the manager's cache has seen the policy.
func governedNamespace() string {
	GinkgoHelper()
	ns := newNamespace()
	Expect(k8s.Create(ctx, policy(ns, "two", hitlv1.ApprovalRule{Approvals: 2}))).To(Succeed())
	time.Sleep(200 * time.Millisecond) // the manager's cache sees the policy
	return ns
}
