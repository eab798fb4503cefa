package answerer_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/answerer"
	. "github.com/hitl-dev/hitl/test/builders"
)

// governed is q with status.approval: two approvals, one of them from the
// set prod/sre, and the votes given.
func governed(votes ...hitlv1.Vote) *hitlv1.UserQuestion {
	q := Question("deploy", "agents").Agent("bot").Ask("env", "Where?", "staging", "prod").Obj()
	q.Status = hitlv1.UserQuestionStatus{State: hitlv1.StateOpen, Votes: votes,
		Approval: &hitlv1.EffectiveApproval{Approvals: 2, Veto: true, ExcludeRequester: true, From: []hitlv1.ApproverSet{
			{Name: "prod/sre", Groups: []string{"sre"}, Users: []string{"carol"}, Minimum: 1},
		}}}
	return q
}

func vote(user string, choice hitlv1.VoteChoice, sets ...string) hitlv1.Vote {
	return hitlv1.Vote{Reply: "deploy-" + user, By: hitlv1.UserInfo{Username: user}, Choice: choice, Sets: sets,
		At: metav1.NewMicroTime(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))}
}

func TestApprovalOf(t *testing.T) {
	g := NewWithT(t)
	ungoverned := Question("q", "agents").Ask("env", "Where?", "staging").Obj()
	g.Expect(answerer.ApprovalOf(ungoverned)).To(BeNil(), "a question without status.approval is not governed")

	none := answerer.ApprovalOf(governed())
	g.Expect(none.Tally).To(Equal("0/2"), "the tally before the controller wrote one")
	g.Expect(none.Needed).To(Equal(2))
	g.Expect(none.Needs()).To(Equal([]string{"2 more approvals", "1 more from prod/sre (group sre; user carol)"}))
	g.Expect(none.Rules()).To(Equal("2 approvals; at least 1 from prod/sre; a rejection vetoes; the asker may not vote"))

	// alice approved, outside the set; bob rejected.
	q := governed(vote("alice", hitlv1.VoteApprove), vote("bob", hitlv1.VoteReject))
	q.Status.Tally = "1/2 (1 no)"
	a := answerer.ApprovalOf(q)
	g.Expect(a.Question).To(Equal("deploy"))
	g.Expect(a.Tally).To(Equal("1/2 (1 no)"), "status.tally as the controller wrote it")
	g.Expect(a.Approvals).To(Equal(1))
	g.Expect(a.Rejections).To(Equal(1))
	g.Expect(a.Needed).To(Equal(1))
	g.Expect(a.Missing).To(HaveLen(1))
	g.Expect(a.Missing[0].Name).To(Equal("prod/sre"))
	g.Expect(a.Missing[0].Needed()).To(Equal(1))
	g.Expect(a.Needs()).To(Equal([]string{"1 more approval", "1 more from prod/sre (group sre; user carol)"}))

	g.Expect(a.VoteOf("bob")).To(HaveField("Choice", hitlv1.VoteReject))
	g.Expect(a.VoteOf("carol")).To(BeNil())
	g.Expect(a.VoteOf("")).To(BeNil(), "an unknown identity has no vote")
	g.Expect(a.CheckVoter("carol")).To(Succeed())
	err := a.CheckVoter("alice")
	g.Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodeDuplicateVote))
	g.Expect(err.Error()).To(Equal("DUPLICATE_VOTE: alice has already voted Approve on question deploy with reply deploy-alice (status.votes); each identity votes once"))

	// carol approves for the set: the rule is met.
	met := answerer.ApprovalOf(governed(vote("alice", hitlv1.VoteApprove), vote("carol", hitlv1.VoteApprove, "prod/sre")))
	g.Expect(met.Needed).To(BeZero())
	g.Expect(met.Missing).To(BeEmpty())
	g.Expect(met.Needs()).To(BeEmpty())

	// Two approvals, neither from the set: the set still lacks one.
	short := answerer.ApprovalOf(governed(vote("alice", hitlv1.VoteApprove), vote("dave", hitlv1.VoteApprove)))
	g.Expect(short.Needs()).To(Equal([]string{"1 more from prod/sre (group sre; user carol)"}))

	noVeto := governed()
	noVeto.Status.Approval.Veto, noVeto.Status.Approval.ExcludeRequester, noVeto.Status.Approval.From = false, false, nil
	g.Expect(answerer.ApprovalOf(noVeto).Rules()).To(Equal("2 approvals; rejected once 2 reject"))
}

// voterClient is a client of a new user in system:masters: a person who
// may answer anything.
func voterClient(name string) client.WithWatch {
	GinkgoHelper()
	u, err := env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, cfg)
	Expect(err).NotTo(HaveOccurred())
	c, err := client.NewWithWatch(u.Config(), client.Options{Scheme: hitlv1.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

var _ = Describe("Votes on a governed question", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("counts a vote bound to the question read, refuses a second vote and a changed question locally, and settles on the last approval", func() {
		q := where("q", ns, "bot").Obj()
		q.Spec.Approval = &hitlv1.ApprovalRule{Approvals: 2}
		ask(q)
		Eventually(func() *hitlv1.EffectiveApproval { return question(ns, "q")().Status.Approval }).ShouldNot(BeNil())
		digest := question(ns, "q")().Status.SpecDigest
		Expect(digest).To(HavePrefix("sha256:"))

		alice := answerer.New(voterClient("alice-"+ns), ns, "inbox", "bot")
		out, err := alice.Reply(ctx, "q", staging())
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Outcome).To(Equal(hitlv1.OutcomeCounted), out.Message)
		Expect(out.Err()).NotTo(HaveOccurred(), "Counted is a success")
		Expect(replies(ns)).To(HaveLen(1))
		Expect(replies(ns)[0].Spec.QuestionRef.SpecDigest).To(Equal(digest), "the reply is bound to the question read")

		a := answerer.ApprovalOf(question(ns, "q")())
		Expect(a).NotTo(BeNil())
		Expect(a.Tally).To(Equal("1/2"))
		Expect(a.Votes).To(HaveLen(1))
		Expect(a.Votes[0].By.Username).To(Equal("alice-" + ns))
		Expect(a.Votes[0].Choice).To(Equal(hitlv1.VoteApprove))
		Expect(a.Needs()).To(Equal([]string{"1 more approval"}))
		Expect(question(ns, "q")().State()).To(Equal(hitlv1.StateOpen))

		_, err = alice.Reply(ctx, "q", staging())
		Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodeDuplicateVote), "got %v", err)
		Expect(replies(ns)).To(HaveLen(1), "a second vote creates nothing")

		bob := answerer.New(voterClient("bob-"+ns), ns, "inbox", "bot")
		stale := &hitlv1.QuestionReply{ObjectMeta: metav1.ObjectMeta{GenerateName: "q-"}, Spec: hitlv1.QuestionReplySpec{
			QuestionRef: hitlv1.QuestionReference{Name: "q", SpecDigest: "sha256:" + strings.Repeat("0", 64)}, Answers: staging()}}
		_, err = bob.Create(ctx, stale)
		Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodeQuestionChanged), "got %v", err)
		Expect(replies(ns)).To(HaveLen(1), "a reply prepared for another question creates nothing")

		out, err = bob.Reply(ctx, "q", staging())
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Outcome).To(Equal(hitlv1.OutcomeApplied), out.Message)
		settled := question(ns, "q")()
		Expect(settled.Status.State).To(Equal(hitlv1.StateSettled))
		Expect(settled.Status.Settlement.Votes).To(HaveLen(2))
		Expect(answerer.ApprovalOf(settled).Tally).To(Equal("2/2"))
		Expect(answerer.ApprovalOf(settled).Needs()).To(BeEmpty())
	})
})
