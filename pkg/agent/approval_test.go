package agent_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/agent"
	. "github.com/hitl-dev/hitl/test/builders"
)

// voter is a client of a new user in system:masters: a person, other than
// the asking admin, who may answer anything.
func voter(name string) client.Client {
	GinkgoHelper()
	u, err := env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, cfg)
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(u.Config(), client.Options{Scheme: hitlv1.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// vote replies to question as c with env, and waits until the controller
// has counted the vote or decided with it.
func vote(c client.Client, ns, question, reply, env string) {
	GinkgoHelper()
	Expect(c.Create(ctx, Reply(reply, ns, question).Select("env", env).Obj())).To(Succeed())
	Eventually(func() hitlv1.ReplyOutcome {
		r := &hitlv1.QuestionReply{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: reply}, r)).To(Succeed())
		return r.Status.Outcome
	}).ShouldNot(BeEmpty())
}

// voters are the usernames and choices of votes.
func voters(votes []hitlv1.Vote) []string {
	var out []string
	for _, v := range votes {
		out = append(out, v.By.Username+" "+string(v.Choice))
	}
	return out
}

var _ = Describe("A governed ask", func() {
	var (
		ns  string
		bot *agent.Agent
	)
	BeforeEach(func() {
		ns = newNamespace()
		bot = agent.New(admin, ns, "bot")
	})

	It("returns the rule and the votes that decided it, with the deciding vote's answers", func() {
		done := async(func() (agent.Result, error) {
			return bot.Ask(ctx, agent.Request{Name: "two", Questions: where(), Approval: &hitlv1.ApprovalRule{Approvals: 2}})
		})
		Eventually(exists(ns, "two")).Should(Succeed())
		Eventually(func() *hitlv1.EffectiveApproval { return question(ns, "two")().Status.Approval }).ShouldNot(BeNil())
		Expect(question(ns, "two")().Spec.Approval).To(Equal(&hitlv1.ApprovalRule{Approvals: 2}), "the ask's own rule is its spec.approval")

		alice, bob := "alice-"+ns, "bob-"+ns
		vote(voter(alice), ns, "two", "two-alice", "staging")
		Expect(question(ns, "two")().Status.State).To(Equal(hitlv1.StateOpen), "one approval of two does not settle it")
		Consistently(done, 200*time.Millisecond).ShouldNot(Receive())

		vote(voter(bob), ns, "two", "two-bob", "prod")
		var got asked
		Eventually(done).Should(Receive(&got))
		Expect(got.err).NotTo(HaveOccurred())
		Expect(got.res.Answers).To(Equal(chose("prod")), "the deciding vote's batch")
		Expect(got.res.Approval).NotTo(BeNil())
		Expect(got.res.Approval.Rule.Approvals).To(Equal(int32(2)))
		Expect(got.res.Approval.Rule.Veto).To(BeTrue(), "veto defaults to true")
		Expect(got.res.Approval.Tally).To(Equal("2/2"))
		Expect(voters(got.res.Approval.Votes)).To(Equal([]string{alice + " Approve", bob + " Approve"}))
		Expect(got.res.Approval.Votes[1].Reply).To(Equal("two-bob"), "the deciding vote last")

		v, err := bot.Projection(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Settled).To(HaveLen(1))
		Expect(v.Settled[0].Approval).To(Equal(got.res.Approval))
	})

	It("returns pending with the votes so far, and the admitted deciding vote with all of them", func() {
		Expect(admin.Create(ctx, &hitlv1.ApprovalPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "two-people", Namespace: ns},
			Spec:       hitlv1.ApprovalPolicySpec{Rule: hitlv1.ApprovalRule{Approvals: 2}},
		})).To(Succeed())
		alice, bob := "alice-"+ns, "bob-"+ns
		aliceClient, bobClient := voter(alice), voter(bob)
		done := async(func() (agent.Result, error) {
			return bot.AskTimed(ctx, agent.Request{Name: "late", Questions: where()}, 5*time.Second)
		})
		Eventually(exists(ns, "late")).Should(Succeed())
		Eventually(func() *hitlv1.EffectiveApproval { return question(ns, "late")().Status.Approval }).ShouldNot(BeNil())
		vote(aliceClient, ns, "late", "late-alice", "staging")

		var got asked
		Eventually(done).WithTimeout(15 * time.Second).Should(Receive(&got))
		Expect(got.err).NotTo(HaveOccurred())
		Expect(got.res.Pending).To(BeTrue())
		Expect(got.res.Approval).NotTo(BeNil(), "a policy governs the question")
		Expect(got.res.Approval.Rule.Policies).To(Equal([]hitlv1.PolicyReference{{Name: "two-people", Generation: 1}}))
		Expect(got.res.Approval.Tally).To(Equal("1/2"))
		Expect(voters(got.res.Approval.Votes)).To(Equal([]string{alice + " Approve"}))

		v, err := bot.Projection(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Active).To(HaveLen(1))
		Expect(v.Active[0].Approval).To(Equal(got.res.Approval), "the view shows the votes so far")

		// The second approval decides, late: it is queued for the agent.
		vote(bobClient, ns, "late", "late-bob", "prod")
		Eventually(queuedReply(ns, "late")).Should(Equal("late-bob"))
		res, err := bot.Admit(ctx, "late", "late-bob")
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Answers).To(Equal(chose("prod")))
		Expect(res.Approval).NotTo(BeNil())
		Expect(res.Approval.Tally).To(Equal("2/2"))
		Expect(voters(res.Approval.Votes)).To(Equal([]string{alice + " Approve", bob + " Approve"}))
	})

	It("has no approval when no rule governs it", func() {
		done := async(func() (agent.Result, error) { return bot.Ask(ctx, agent.Request{Name: "plain", Questions: where()}) })
		Eventually(exists(ns, "plain")).Should(Succeed())
		Eventually(state(ns, "plain")).Should(Equal(hitlv1.StateOpen))
		answer(ns, "plain", "plain-r", "prod")
		var got asked
		Eventually(done).Should(Receive(&got))
		Expect(got.err).NotTo(HaveOccurred())
		Expect(got.res.Approval).To(BeNil())
	})
})
