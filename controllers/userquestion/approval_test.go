package userquestion_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	. "github.com/hitl-dev/hitl/test/builders"
)

// policy is an ApprovalPolicy in ns for the agent release-bot's questions
// with the given intents.
func policy(ns, name string, rule hitlv1.ApprovalRule, intents ...hitlv1.IntentType) *hitlv1.ApprovalPolicy {
	return &hitlv1.ApprovalPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: hitlv1.ApprovalPolicySpec{
			Selector: hitlv1.ApprovalSelector{Agents: []string{"release-bot"}, Intents: intents},
			Rule:     rule,
		},
	}
}

func withGroups(r *hitlv1.QuestionReply, groups ...string) *hitlv1.QuestionReply {
	r.Spec.AnsweredBy.Groups = append(r.Spec.AnsweredBy.Groups, groups...)
	return r
}

var _ = Describe("A question governed by an ApprovalPolicy", func() {
	var ns string
	asker := &hitlv1.UserInfo{Username: "release-bot", UID: "uid-bot", Groups: []string{AuthenticatedGroup}}
	approvalAsk := func(name string) *hitlv1.UserQuestion {
		q := Question(name, ns).Agent("release-bot").Ask("ship", "Ship v2 to prod?", "approve", "reject").Approval("approve", "reject", "").Obj()
		q.Spec.AskedBy = asker
		return q
	}
	BeforeEach(func() { ns = newNamespace() })

	It("needs two distinct approvers, one of them from sre, and records every vote", func() {
		Expect(k8s.Create(ctx, policy(ns, "two-with-sre", hitlv1.ApprovalRule{Approvals: 2,
			From: []hitlv1.ApproverSet{{Name: "sre", Groups: []string{"sre"}, Minimum: 1}}}, hitlv1.IntentApproval))).To(Succeed())
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "two-with-sre"}, &hitlv1.ApprovalPolicy{})
		}).Should(Succeed())
		time.Sleep(200 * time.Millisecond) // the manager's cache sees the policy
		Expect(k8s.Create(ctx, approvalAsk("ship"))).To(Succeed())
		Eventually(func() *hitlv1.EffectiveApproval { return question(ns, "ship")().Status.Approval }).ShouldNot(BeNil())
		rule := question(ns, "ship")().Status.Approval
		Expect(rule.Approvals).To(Equal(int32(2)))
		Expect(rule.Veto).To(BeTrue())
		Expect(rule.ExcludeRequester).To(BeTrue())
		Expect(rule.From).To(HaveLen(1))
		Expect(rule.From[0].Name).To(Equal("two-with-sre/sre"))
		Expect(rule.Policies).To(Equal([]hitlv1.PolicyReference{{Name: "two-with-sre", Generation: 1}}))
		Expect(question(ns, "ship")().Status.Tally).To(Equal("0/2"))

		Expect(k8s.Create(ctx, Reply("alice", ns, "ship").Select("ship", "approve").AnsweredBy("alice").Obj())).To(Succeed())
		Eventually(outcome(ns, "alice")).Should(Equal(hitlv1.OutcomeCounted))
		Expect(k8s.Create(ctx, Reply("bob", ns, "ship").Select("ship", "approve").AnsweredBy("bob").Obj())).To(Succeed())
		Eventually(outcome(ns, "bob")).Should(Equal(hitlv1.OutcomeCounted))
		Expect(question(ns, "ship")().Status.Tally).To(Equal("2/2"))
		Consistently(state(ns, "ship"), "500ms").Should(Equal(hitlv1.StateOpen), "two approvals, none from sre")

		Expect(k8s.Create(ctx, withGroups(Reply("carol", ns, "ship").Select("ship", "approve").AnsweredBy("carol").Obj(), "sre"))).To(Succeed())
		Eventually(state(ns, "ship")).Should(Equal(hitlv1.StateSettled))
		Eventually(outcome(ns, "carol")).Should(Equal(hitlv1.OutcomeApplied))
		q := question(ns, "ship")()
		Expect(q.Status.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "ship", Selected: []string{"approve"}}}))
		Expect(q.Status.Settlement.Reply).To(Equal("carol"))
		var voters []string
		for _, v := range q.Status.Settlement.Votes {
			voters = append(voters, v.By.Username+":"+string(v.Choice))
		}
		Expect(voters).To(Equal([]string{"alice:Approve", "bob:Approve", "carol:Approve"}))
		Expect(q.Status.Votes[2].Sets).To(Equal([]string{"two-with-sre/sre"}))
		Eventually(events(ns, "ship", "Voted")).Should(Equal(3))
		Expect(outcome(ns, "alice")()).To(Equal(hitlv1.OutcomeCounted), "a counted vote stays counted")
	})

	It("is settled as rejected by one veto, and refuses a second vote and the requester's", func() {
		Expect(k8s.Create(ctx, policy(ns, "two", hitlv1.ApprovalRule{Approvals: 2}))).To(Succeed())
		time.Sleep(200 * time.Millisecond)
		Expect(k8s.Create(ctx, approvalAsk("ship"))).To(Succeed())
		Eventually(func() string { return question(ns, "ship")().Status.Tally }).Should(Equal("0/2"))

		Expect(k8s.Create(ctx, Reply("self", ns, "ship").Select("ship", "approve").AnsweredBy("release-bot").Obj())).To(Succeed())
		Eventually(outcome(ns, "self")).Should(Equal(hitlv1.OutcomeRejected))
		Expect(reply(ns, "self")().Reason).To(Equal(hitlv1.CodeSelfApproval))

		Expect(k8s.Create(ctx, Reply("alice", ns, "ship").Select("ship", "approve").AnsweredBy("alice").Obj())).To(Succeed())
		Eventually(outcome(ns, "alice")).Should(Equal(hitlv1.OutcomeCounted))
		Expect(k8s.Create(ctx, Reply("alice-again", ns, "ship").Select("ship", "approve").AnsweredBy("alice").Obj())).To(Succeed())
		Eventually(outcome(ns, "alice-again")).Should(Equal(hitlv1.OutcomeRejected))
		again := reply(ns, "alice-again")()
		Expect(again.Reason).To(Equal(hitlv1.CodeDuplicateVote))
		Expect(again.Message).To(HavePrefix("DUPLICATE_VOTE: alice has already voted on question ship"))
		Consistently(state(ns, "ship"), "500ms").Should(Equal(hitlv1.StateOpen))

		Expect(k8s.Create(ctx, Reply("bob", ns, "ship").Select("ship", "reject").AnsweredBy("bob").Obj())).To(Succeed())
		Eventually(state(ns, "ship")).Should(Equal(hitlv1.StateSettled))
		q := question(ns, "ship")()
		Expect(q.Status.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "ship", Selected: []string{"reject"}}}))
		Expect(q.Status.Settlement.Reply).To(Equal("bob"))
		Expect(q.Status.Tally).To(Equal("1/2 (1 no)"))
	})

	It("keeps the rule it was asked under when the policy is weakened or deleted later", func() {
		Expect(k8s.Create(ctx, policy(ns, "two", hitlv1.ApprovalRule{Approvals: 2}))).To(Succeed())
		time.Sleep(200 * time.Millisecond)
		Expect(k8s.Create(ctx, approvalAsk("ship"))).To(Succeed())
		Eventually(func() string { return question(ns, "ship")().Status.Tally }).Should(Equal("0/2"))
		p := &hitlv1.ApprovalPolicy{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "two"}, p)).To(Succeed())
		p.Spec.Rule.Approvals = 1
		Expect(k8s.Update(ctx, p)).To(Succeed())
		time.Sleep(200 * time.Millisecond)

		Expect(k8s.Create(ctx, Reply("alice", ns, "ship").Select("ship", "approve").AnsweredBy("alice").Obj())).To(Succeed())
		Eventually(outcome(ns, "alice")).Should(Equal(hitlv1.OutcomeCounted))
		Consistently(state(ns, "ship"), "500ms").Should(Equal(hitlv1.StateOpen))
		Expect(question(ns, "ship")().Status.Approval.Policies).To(Equal([]hitlv1.PolicyReference{{Name: "two", Generation: 1}}))

		// A question asked now takes the policy as it is now.
		Expect(k8s.Create(ctx, approvalAsk("next"))).To(Succeed())
		Eventually(func() string { return question(ns, "next")().Status.Tally }).Should(Equal("0/1"))
	})

	It("takes the agent's own stricter rule with the policy's", func() {
		Expect(k8s.Create(ctx, policy(ns, "one", hitlv1.ApprovalRule{Approvals: 1, Veto: ptr.To(false)}))).To(Succeed())
		time.Sleep(200 * time.Millisecond)
		q := approvalAsk("ship")
		q.Spec.Approval = &hitlv1.ApprovalRule{Approvals: 2}
		Expect(k8s.Create(ctx, q)).To(Succeed())
		Eventually(func() string { return question(ns, "ship")().Status.Tally }).Should(Equal("0/2"))
		Expect(question(ns, "ship")().Status.Approval.Veto).To(BeTrue(), "the agent's rule keeps the default veto")
	})

	It("refuses a reply prepared for another question with QUESTION_CHANGED", func() {
		Expect(k8s.Create(ctx, approvalAsk("ship"))).To(Succeed())
		Eventually(func() string { return question(ns, "ship")().Status.SpecDigest }).Should(HavePrefix("sha256:"))
		digest := question(ns, "ship")().Status.SpecDigest
		Expect(digest).To(Equal(hitlv1.SpecDigest(&approvalAsk("ship").Spec)), "the digest of the whole spec, text included")

		stale := Reply("stale", ns, "ship").Select("ship", "approve").AnsweredBy("alice").Obj()
		stale.Spec.QuestionRef.SpecDigest = "sha256:" + strings.Repeat("0", 64)
		Expect(k8s.Create(ctx, stale)).To(Succeed())
		Eventually(outcome(ns, "stale")).Should(Equal(hitlv1.OutcomeRejected))
		Expect(reply(ns, "stale")().Reason).To(Equal(hitlv1.CodeQuestionChanged))

		bound := Reply("bound", ns, "ship").Select("ship", "approve").AnsweredBy("alice").Obj()
		bound.Spec.QuestionRef.SpecDigest = digest
		Expect(k8s.Create(ctx, bound)).To(Succeed())
		Eventually(outcome(ns, "bound")).Should(Equal(hitlv1.OutcomeApplied), "ungoverned: the first valid reply settles")
	})

	It("keeps counting votes after its window closes, and queues the late quorum for the agent", func() {
		Expect(k8s.Create(ctx, policy(ns, "two-any", hitlv1.ApprovalRule{Approvals: 2}))).To(Succeed())
		time.Sleep(200 * time.Millisecond)
		q := Question("plan", ns).Agent("release-bot").Ask("env", "Where?", "staging", "prod").Timeout(2 * time.Second).Obj()
		q.Spec.AskedBy = asker
		Expect(k8s.Create(ctx, q)).To(Succeed())
		Expect(k8s.Create(ctx, Reply("alice", ns, "plan").Select("env", "prod").AnsweredBy("alice").Obj())).To(Succeed())
		Eventually(outcome(ns, "alice")).Should(Equal(hitlv1.OutcomeCounted))
		Eventually(state(ns, "plan"), "10s").Should(Equal(hitlv1.StateContinued))
		Expect(question(ns, "plan")().Status.Votes).To(HaveLen(1))

		Expect(k8s.Create(ctx, Reply("bob", ns, "plan").Select("env", "staging").AnsweredBy("bob").Obj())).To(Succeed())
		Eventually(outcome(ns, "bob")).Should(Equal(hitlv1.OutcomeQueued))
		Expect(question(ns, "plan")().Status.QueuedReply.Name).To(Equal("bob"))
		update(ns, "plan", func(q *hitlv1.UserQuestion) { q.Spec.AdmittedReply = "bob" })
		Eventually(state(ns, "plan")).Should(Equal(hitlv1.StateSettled))
		Eventually(outcome(ns, "bob")).Should(Equal(hitlv1.OutcomeAdmitted))
		got := question(ns, "plan")()
		Expect(got.Status.Settlement.Late).To(BeTrue())
		Expect(got.Status.Settlement.Votes).To(HaveLen(2))
		Expect(got.Status.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}}), "the answers of the vote that completed the quorum")
	})
})
