package mcp_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
	. "github.com/hitl-dev/hitl/test/builders"
)

// vote replies to question as a new user in system:masters (a person
// other than the asking admin) with env.
func (e *env) vote(user, question, reply, env string) {
	e.t.Helper()
	u, err := e.k.Env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, e.k.Config)
	e.g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(u.Config(), client.Options{Scheme: hitlv1.NewScheme()})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(c.Create(e.ctx, Reply(reply, e.ns, question).Select("env", env).Obj())).To(Succeed())
}

func TestAskGovernedReturnsTheVotes(t *testing.T) {
	e := newEnv(t)
	e.g.Expect(e.admin.Create(e.ctx, &hitlv1.ApprovalPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "two-people", Namespace: e.ns},
		Spec:       hitlv1.ApprovalPolicySpec{Rule: hitlv1.ApprovalRule{Approvals: 2}},
	})).To(Succeed())
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{}, nil)
	done := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("")})
	q := e.asked("bot")

	// While it waits, list_questions shows the rule and the votes so far.
	var active hitlmcp.ActiveQuestion
	e.g.Eventually(func() *hitlmcp.Approval {
		list := structured[hitlmcp.ListResult](e.g, e.call(cs, e.ctx, "list_questions", nil))
		e.g.Expect(list.Active).To(HaveLen(1))
		active = list.Active[0]
		return active.Approval
	}).ShouldNot(BeNil())
	e.g.Expect(active.Approval.Tally).To(Equal("0/2"))
	e.g.Expect(active.Approval.Votes).To(BeEmpty())

	alice, bob := "alice-"+e.ns, "bob-"+e.ns
	e.vote(alice, q.Name, "r-alice", "staging")
	e.g.Eventually(func() string {
		list := structured[hitlmcp.ListResult](e.g, e.call(cs, e.ctx, "list_questions", nil))
		e.g.Expect(list.Active).To(HaveLen(1))
		return list.Active[0].Approval.Tally
	}).Should(Equal("1/2"))
	e.g.Consistently(done, "200ms").ShouldNot(Receive(), "one approval of two does not settle it")

	e.vote(bob, q.Name, "r-bob", "prod")
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred())
	res := structured[hitlmcp.AskResult](e.g, got.res)
	e.g.Expect(res.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}), "the deciding vote's answers")
	e.g.Expect(res.Approval).NotTo(BeNil())
	a := res.Approval
	e.g.Expect(a.Approvals).To(Equal(int32(2)))
	e.g.Expect(a.Veto).To(BeTrue())
	e.g.Expect(a.ExcludeRequester).To(BeTrue())
	e.g.Expect(a.Policies).To(Equal([]string{"two-people"}))
	e.g.Expect(a.Tally).To(Equal("2/2"))
	e.g.Expect(a.Votes).To(HaveLen(2))
	for i, want := range []hitlmcp.Vote{{By: alice, Choice: "Approve", Reply: "r-alice"}, {By: bob, Choice: "Approve", Reply: "r-bob"}} {
		e.g.Expect(a.Votes[i].At).NotTo(BeEmpty())
		a.Votes[i].At = ""
		e.g.Expect(a.Votes[i]).To(Equal(want))
	}
	e.g.Expect(text(got.res)).To(ContainSubstring("env (Where to deploy?): prod\nvotes 2/2 (2 approvals needed): " + alice + " Approve, " + bob + " Approve"))

	list := structured[hitlmcp.ListResult](e.g, e.call(cs, e.ctx, "list_questions", nil))
	e.g.Expect(list.Settled).To(HaveLen(1))
	e.g.Expect(list.Settled[0].Approval).NotTo(BeNil())
	e.g.Expect(list.Settled[0].Approval.Votes).To(HaveLen(2))

	// The tool's output schema describes the approval.
	tools, err := cs.ListTools(e.ctx, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	for _, tool := range tools.Tools {
		if tool.Name == "ask_user_question" {
			data, err := json.Marshal(tool.OutputSchema)
			e.g.Expect(err).NotTo(HaveOccurred())
			e.g.Expect(string(data)).To(ContainSubstring(`"approval"`))
			e.g.Expect(string(data)).To(ContainSubstring(`"votes"`))
		}
	}
}

func TestAskUngovernedHasNoApproval(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{}, nil)
	done := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("")})
	q := e.asked("bot")
	e.answer(q.Name, "r1", "prod")
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred())
	e.g.Expect(got.res.StructuredContent).NotTo(HaveKey("approval"))
	e.g.Expect(structured[hitlmcp.AskResult](e.g, got.res).Approval).To(BeNil())
	e.g.Expect(text(got.res)).NotTo(ContainSubstring("votes"))
}

// An agent asks for a rule of its own through the tool; one weaker than
// the platform's policy is refused by admission, naming the field.
func TestAskWithItsOwnRule(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{}, nil)
	args := whereArgs("")
	args["approval"] = map[string]any{"approvals": 2}
	done := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: args})
	q := e.asked("bot")
	e.g.Expect(q.Spec.Approval).To(Equal(&hitlv1.ApprovalRule{Approvals: 2}))
	e.vote("alice-"+e.ns, q.Name, "r-alice", "prod")
	e.g.Consistently(done, "300ms").ShouldNot(Receive(), "its own rule needs two")
	e.vote("bob-"+e.ns, q.Name, "r-bob", "prod")
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred())
	res := structured[hitlmcp.AskResult](e.g, got.res)
	e.g.Expect(res.Approval).NotTo(BeNil())
	e.g.Expect(res.Approval.Tally).To(Equal("2/2"))
	e.g.Expect(res.Approval.Policies).To(BeEmpty(), "no policy: the agent's own rule")

	e.g.Expect(e.admin.Create(e.ctx, &hitlv1.ApprovalPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "three-people", Namespace: e.ns},
		Spec:       hitlv1.ApprovalPolicySpec{Rule: hitlv1.ApprovalRule{Approvals: 3}},
	})).To(Succeed())
	// The API server's admission sees the new policy within moments; an
	// ask it still let through is cancelled when the call gives up.
	e.g.Eventually(func() string {
		ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: args})
		if err != nil {
			return err.Error()
		}
		return text(res)
	}, "20s").Should(And(HavePrefix("POLICY_WEAKENED"), ContainSubstring("spec.approval")))
}
