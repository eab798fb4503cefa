package admission_test

import (
	"fmt"
	"maps"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// approvalCases: an agent's own approval rule (spec.approval) may be
// stricter than the ApprovalPolicies that govern its question, never
// weaker (POLICY_WEAKENED), and the agent may not touch the policies. The
// policies are the platform team's, created here by the admin; the asks
// are the agent's, made with the shipped agent role. In webhook mode the
// defaulting question webhook refuses a weakened rule before the
// question-approval policy would; in the other modes the policy does.
var approvalCases = []admissionCase{
	{name: "a spec.approval weaker than a governing ApprovalPolicy is refused, POLICY_WEAKENED", run: func(s *scene) {
		coder := s.agent("coder")
		s.installPolicies(
			s.approvalPolicy("two-sets", hitlv1.ApprovalSelector{}, approvalRule(3, sreSet(2), securitySet(1))),
			// It governs too, and nothing below is weaker than it.
			s.approvalPolicy("lenient", hitlv1.ApprovalSelector{}, lenientRule(1)))

		weak := func(change func(r *hitlv1.ApprovalRule)) *hitlv1.UserQuestion {
			r := approvalRule(3, sreSet(2), securitySet(1))
			change(&r)
			return withApproval(approvalQuestion(s, "coder"), r)
		}
		s.refusedWeakened(coder.Create(ctx, weak(func(r *hitlv1.ApprovalRule) {
			r.Approvals = 2
		})), "two-sets", "spec.approval.approvals", "2 approvals are fewer than the 3")
		s.refusedWeakened(coder.Create(ctx, weak(func(r *hitlv1.ApprovalRule) {
			r.Veto = ptr.To(false)
		})), "two-sets", "spec.approval.veto", "requires the veto")
		s.refusedWeakened(coder.Create(ctx, weak(func(r *hitlv1.ApprovalRule) {
			r.ExcludeRequester = ptr.To(false)
		})), "two-sets", "spec.approval.excludeRequester", "excludes the requester")
		// A set left out.
		s.refusedWeakened(coder.Create(ctx, weak(func(r *hitlv1.ApprovalRule) {
			r.From = r.From[:1]
		})), "two-sets", "spec.approval.from", "requires approver sets security:")
		s.refusedWeakened(coder.Create(ctx, weak(func(r *hitlv1.ApprovalRule) {
			r.From = nil
		})), "two-sets", "spec.approval.from", "requires approver sets sre, security:")
		// A set with a lower minimum.
		s.refusedWeakened(coder.Create(ctx, weak(func(r *hitlv1.ApprovalRule) {
			r.From[0].Minimum = 1
		})), "two-sets", "spec.approval.from", "requires approver sets sre:")
		// A set of other approvers: more groups, or users for groups.
		s.refusedWeakened(coder.Create(ctx, weak(func(r *hitlv1.ApprovalRule) {
			r.From[0].Groups = []string{"sre", "dev"}
		})), "two-sets", "spec.approval.from", "requires approver sets sre:")
		s.refusedWeakened(coder.Create(ctx, weak(func(r *hitlv1.ApprovalRule) {
			r.From[1] = hitlv1.ApproverSet{Name: "security", Groups: []string{"security"}, Minimum: 1}
		})), "two-sets", "spec.approval.from", "requires approver sets security:")
		// Nothing was admitted.
		list := &hitlv1.UserQuestionList{}
		Expect(s.admin.List(ctx, list, client.InNamespace(s.ns))).To(Succeed())
		Expect(list.Items).To(BeEmpty())
	}},

	{name: "a spec.approval as strict as the governing ApprovalPolicies or stricter is admitted, and so is none", run: func(s *scene) {
		coder := s.agent("coder")
		s.installPolicies(
			s.approvalPolicy("two-sets", hitlv1.ApprovalSelector{}, approvalRule(3, sreSet(2), securitySet(1))),
			s.approvalPolicy("lenient", hitlv1.ApprovalSelector{}, lenientRule(1)))

		// The same rule: the sets match by their approvers, not their names.
		same := approvalRule(3,
			hitlv1.ApproverSet{Name: "platform-sre", Groups: []string{"sre-oncall", "sre"}, Minimum: 2},
			hitlv1.ApproverSet{Name: "sec", Users: []string{"bob"}, Minimum: 1})
		Expect(coder.Create(ctx, withApproval(approvalQuestion(s, "coder"), same))).To(Succeed())
		// Said explicitly, and on a question without an intent.
		explicit := approvalRule(3, securitySet(1), sreSet(2))
		explicit.Veto, explicit.ExcludeRequester = ptr.To(true), ptr.To(true)
		Expect(coder.Create(ctx, withApproval(s.question("coder"), explicit))).To(Succeed())
		// Stricter: more approvals, higher minimums, one more set.
		stricter := approvalRule(5, sreSet(3), securitySet(1),
			hitlv1.ApproverSet{Name: "dba", Groups: []string{"dba", "dba-oncall"}, Users: []string{"carol"}, Minimum: 1})
		Expect(coder.Create(ctx, withApproval(approvalQuestion(s, "coder"), stricter))).To(Succeed())
		// No rule of its own: the controller applies the policies.
		plain := approvalQuestion(s, "coder")
		Expect(coder.Create(ctx, plain)).To(Succeed())
		Expect(s.storedQuestion(plain.Name).Spec.Approval).To(BeNil())

		list := &hitlv1.UserQuestionList{}
		Expect(s.admin.List(ctx, list, client.InNamespace(s.ns))).To(Succeed())
		Expect(list.Items).To(HaveLen(4))
	}},

	{name: "an ApprovalPolicy that does not govern the question does not refuse it", run: func(s *scene) {
		coder := s.agent("coder")
		builder := s.agent("builder")
		strict := lenientRule(3) // weaker only in approvals, whatever the question's veto
		s.installPolicies(
			s.approvalPolicy("other-agent", hitlv1.ApprovalSelector{Agents: []string{"builder"}}, strict),
			s.approvalPolicy("plan-reviews", hitlv1.ApprovalSelector{Intents: []hitlv1.IntentType{hitlv1.IntentPlanReview}}, strict),
			s.approvalPolicy("high-risk", labelSelector(map[string]string{"risk": "high"}), strict),
			s.approvalPolicy("in-prod", labelSelector(nil, metav1.LabelSelectorRequirement{
				Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "canary"}}), strict),
			s.approvalPolicy("not-dev", labelSelector(nil, metav1.LabelSelectorRequirement{
				Key: "stage", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"dev", "test"}}), strict),
			s.approvalPolicy("team", labelSelector(nil, metav1.LabelSelectorRequirement{
				Key: "team", Operator: metav1.LabelSelectorOpExists}), strict),
			s.approvalPolicy("unlabelled", labelSelector(nil, metav1.LabelSelectorRequirement{
				Key: hitlv1.AgentLabel, Operator: metav1.LabelSelectorOpDoesNotExist}), strict),
			// A malformed selector (NotIn without values) selects nothing,
			// as metav1.LabelSelectorAsSelector makes it for the controller.
			s.approvalPolicy("malformed", labelSelector(nil, metav1.LabelSelectorRequirement{
				Key: "env", Operator: metav1.LabelSelectorOpNotIn}), strict),
			// Governs everything, and asks for no more than the asks below.
			s.approvalPolicy("lenient", hitlv1.ApprovalSelector{}, lenientRule(1)))

		asked := func(q *hitlv1.UserQuestion, labels map[string]string, approvals int32) *hitlv1.UserQuestion {
			q.Labels = labels
			return withApproval(q, lenientRule(approvals))
		}
		ungoverned := map[string]string{"env": "dev", "stage": "dev"}
		Expect(coder.Create(ctx, asked(approvalQuestion(s, "coder"), ungoverned, 1))).To(Succeed())
		Expect(coder.Create(ctx, asked(s.question("coder"), map[string]string{"env": "staging", "stage": "test"}, 1))).To(Succeed())

		// Each of them governs the question it selects.
		with := func(extra map[string]string) map[string]string {
			l := map[string]string{"env": "dev", "stage": "dev"}
			for k, v := range extra {
				l[k] = v
			}
			return l
		}
		s.refusedWeakened(builder.Create(ctx, asked(approvalQuestion(s, "builder"), ungoverned, 2)),
			"other-agent", "spec.approval.approvals", "2 approvals are fewer than the 3")
		s.refusedWeakened(coder.Create(ctx, asked(planReviewQuestion(s, "coder"), ungoverned, 2)),
			"plan-reviews", "spec.approval.approvals", "2 approvals are fewer than the 3")
		s.refusedWeakened(coder.Create(ctx, asked(approvalQuestion(s, "coder"), with(map[string]string{"risk": "high"}), 2)),
			"high-risk", "spec.approval.approvals", "2 approvals are fewer than the 3")
		s.refusedWeakened(coder.Create(ctx, asked(approvalQuestion(s, "coder"), with(map[string]string{"env": "canary"}), 2)),
			"in-prod", "spec.approval.approvals", "2 approvals are fewer than the 3")
		s.refusedWeakened(coder.Create(ctx, asked(approvalQuestion(s, "coder"), with(map[string]string{"stage": "prod"}), 2)),
			"not-dev", "spec.approval.approvals", "2 approvals are fewer than the 3")
		s.refusedWeakened(coder.Create(ctx, asked(approvalQuestion(s, "coder"), with(map[string]string{"team": ""}), 2)),
			"team", "spec.approval.approvals", "2 approvals are fewer than the 3")

		list := &hitlv1.UserQuestionList{}
		Expect(s.admin.List(ctx, list, client.InNamespace(s.ns))).To(Succeed())
		Expect(list.Items).To(HaveLen(2))
	}},

	{name: "admission governs exactly the questions ApprovalPolicy.Governs does, malformed selectors included", run: func(s *scene) {
		// Each selector is a policy of its own agent, so that a refusal
		// says which policy governs the question; each refuses the asks
		// below (1 approval) where it governs.
		req := func(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
			return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
		}
		in, notIn := metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn
		exists, absent := metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist
		selectors := []hitlv1.ApprovalSelector{
			{},
			{QuestionSelector: &metav1.LabelSelector{}},
			{QuestionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{}, MatchExpressions: []metav1.LabelSelectorRequirement{}}},
			labelSelector(map[string]string{"env": "dev"}),
			labelSelector(map[string]string{"env": "dev", "team": "a"}),
			labelSelector(map[string]string{"team": "a"}, req("env", notIn, "prod")),
			labelSelector(nil, req("env", in, "dev", "prod")),
			labelSelector(nil, req("env", notIn, "dev")),
			labelSelector(nil, req("team", exists)),
			labelSelector(nil, req("team", absent)),
			labelSelector(nil, req("example.com/env", notIn, "dev")),
			labelSelector(nil, req("example.com/env", in, "prod")),
			labelSelector(nil, req(hitlv1.AgentLabel, exists)),
			labelSelector(nil, req(hitlv1.AgentLabel, absent)),
			labelSelector(nil, req("env", exists), req("team", absent)),
			{Intents: []hitlv1.IntentType{hitlv1.IntentPlanReview}},
			{Intents: []hitlv1.IntentType{hitlv1.IntentApproval, hitlv1.IntentPlanReview}, QuestionSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"env": "dev"}}},
			// Malformed: each selects nothing.
			labelSelector(nil, req("env", in)),
			labelSelector(nil, req("env", notIn)),
			labelSelector(nil, req("team", exists, "a")),
			labelSelector(nil, req("team", absent, "a")),
			labelSelector(nil, req("env", "Gt", "1")),
			labelSelector(nil, req("not a key", absent)),
			labelSelector(nil, req("-team", absent)),
			labelSelector(nil, req("a/b/c", absent)),
			labelSelector(nil, req("/team", absent)),
			labelSelector(nil, req(strings.Repeat("p", 254)+"/team", absent)),
			labelSelector(nil, req(strings.Repeat("n", 64), absent)),
			labelSelector(nil, req("env", notIn, "prod", "not a value")),
			labelSelector(nil, req("env", in, "dev", "-dev")),
			labelSelector(nil, req("env", notIn, strings.Repeat("v", 64))),
			// Well-formed at the limits.
			labelSelector(nil, req(strings.Repeat("p", 253)+"/"+strings.Repeat("n", 63), absent)),
			labelSelector(nil, req("env", notIn, strings.Repeat("v", 63), "")),
			labelSelector(nil, req("A.b_c-D", absent)),
		}
		var policies []*hitlv1.ApprovalPolicy
		for i, sel := range selectors {
			sel.Agents = []string{fmt.Sprintf("agent-%02d", i)}
			policies = append(policies, s.approvalPolicy(fmt.Sprintf("selector-%02d", i), sel, approvalRule(2)))
		}
		s.installPolicies(policies...)

		labelSets := []map[string]string{
			nil, {"env": "dev"}, {"env": "prod"}, {"env": "dev", "team": "a"}, {"team": "a"}, {"team": "b", "env": "staging"},
			{"example.com/env": "dev"}, {"example.com/env": "prod"}, {"env": ""},
		}
		var mismatches []string
		for i, p := range policies {
			agent := p.Spec.Selector.Agents[0]
			for _, labels := range labelSets {
				asks := []*hitlv1.UserQuestion{approvalQuestion(s, agent)}
				if len(p.Spec.Selector.Intents) > 0 {
					asks = append(asks, planReviewQuestion(s, agent), s.question(agent))
				}
				for _, q := range asks {
					q.Labels = maps.Clone(labels)
					withApproval(q, approvalRule(1))
					// What the controller sees: the labels with the agent's.
					stored := maps.Clone(labels)
					if stored == nil {
						stored = map[string]string{}
					}
					stored[hitlv1.AgentLabel] = agent
					want := p.Governs(q, stored)
					err := s.admin.Create(ctx, q, client.DryRunAll)
					if err != nil && (validation.CodeOf(err) != hitlv1.CodePolicyWeakened || !strings.Contains(err.Error(), "ApprovalPolicy "+p.Name+" ")) {
						Fail(fmt.Sprintf("selector %d, labels %v: not a refusal by %s: %v", i, labels, p.Name, err))
					}
					if got := err != nil; got != want {
						mismatches = append(mismatches, fmt.Sprintf("selector %d %+v, question %s, labels %v: admission governs %v, Governs %v",
							i, p.Spec.Selector, q.Spec.Questions[0].ID, labels, got, want))
					}
				}
			}
		}
		Expect(mismatches).To(BeEmpty())
	}},

	{name: "the agent role may not create, change or delete an ApprovalPolicy", run: func(s *scene) {
		coder := s.agent("coder")
		for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection", "get", "list", "watch"} {
			s.expectDenied(coder, access{resource: "approvalpolicies", verb: verb})
		}
		p := s.approvalPolicy("two-approvers", hitlv1.ApprovalSelector{}, approvalRule(2))
		forbidden := func(err error, verb string) {
			GinkgoHelper()
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: want Forbidden, got %v", verb, err)
			Expect(err.Error()).To(ContainSubstring(`cannot %s resource "approvalpolicies" in API group "hitl.dev"`, verb))
		}
		forbidden(coder.Create(ctx, p.DeepCopy()), "create")

		Expect(s.admin.Create(ctx, p)).To(Succeed())
		weaker := p.DeepCopy()
		weaker.Spec.Rule.Approvals = 1
		forbidden(coder.Update(ctx, weaker), "update")
		forbidden(coder.Patch(ctx, weaker, client.MergeFrom(p)), "patch")
		forbidden(coder.Delete(ctx, p), "delete")
		forbidden(coder.DeleteAllOf(ctx, &hitlv1.ApprovalPolicy{}, client.InNamespace(s.ns)), "deletecollection")
		stored := &hitlv1.ApprovalPolicy{}
		Expect(s.admin.Get(ctx, client.ObjectKeyFromObject(p), stored)).To(Succeed())
		Expect(stored.Spec.Rule.Approvals).To(BeEquivalentTo(2))

		// The policy admin role may.
		platform := s.user("platform")
		s.bind(policyAdminRole, userSubject("platform"))
		s.awaitAllowed(platform, access{resource: "approvalpolicies", verb: "create"}, access{resource: "approvalpolicies", verb: "update"},
			access{resource: "approvalpolicies", verb: "delete"})
		Expect(platform.Update(ctx, stored.DeepCopy())).To(Succeed())
		Expect(platform.Create(ctx, s.approvalPolicy("three-approvers", hitlv1.ApprovalSelector{}, approvalRule(3)))).To(Succeed())
		Expect(platform.Delete(ctx, stored)).To(Succeed())
	}},
}

// The approval policy cases, run in a cluster of each mode.
var _ = Describe("Approval policies", func() {
	for _, mode := range modes {
		var entries []TableEntry
		for _, c := range approvalCases {
			if c.in(mode) {
				entries = append(entries, Entry(c.name, c))
			}
		}
		Describe("in "+mode.String()+" mode", func() {
			DescribeTable("approval policy cases", func(c admissionCase) {
				c.run(clusters[mode].newScene())
			}, entries)
		})
	}
})

// approvalRule is a rule of approvals with the sets given (veto and
// excludeRequester unset: both on).
func approvalRule(approvals int32, from ...hitlv1.ApproverSet) hitlv1.ApprovalRule {
	return hitlv1.ApprovalRule{Approvals: approvals, From: from}
}

// lenientRule is a rule of approvals without veto, the requester allowed.
func lenientRule(approvals int32) hitlv1.ApprovalRule {
	return hitlv1.ApprovalRule{Approvals: approvals, Veto: ptr.To(false), ExcludeRequester: ptr.To(false)}
}

func sreSet(minimum int32) hitlv1.ApproverSet {
	return hitlv1.ApproverSet{Name: "sre", Groups: []string{"sre", "sre-oncall"}, Minimum: minimum}
}

func securitySet(minimum int32) hitlv1.ApproverSet {
	return hitlv1.ApproverSet{Name: "security", Users: []string{"bob"}, Minimum: minimum}
}

// labelSelector selects questions by labels and requirements.
func labelSelector(match map[string]string, exprs ...metav1.LabelSelectorRequirement) hitlv1.ApprovalSelector {
	return hitlv1.ApprovalSelector{QuestionSelector: &metav1.LabelSelector{MatchLabels: match, MatchExpressions: exprs}}
}

// withApproval gives q its own approval rule.
func withApproval(q *hitlv1.UserQuestion, r hitlv1.ApprovalRule) *hitlv1.UserQuestion {
	q.Spec.Approval = r.DeepCopy()
	return q
}

// planReviewQuestion is a PlanReview ask by agent.
func planReviewQuestion(s *scene, agent string) *hitlv1.UserQuestion {
	q := s.question(agent)
	q.Spec.Questions = []hitlv1.Question{{ID: "plan", Question: "May I go ahead with this plan?", Detail: "1. build\n2. deploy",
		Options: []hitlv1.QuestionOption{{Label: "Go ahead"}, {Label: "Revise"}},
		Intent:  &hitlv1.QuestionIntent{Type: hitlv1.IntentPlanReview, PlanReview: &hitlv1.PlanReviewIntent{Approve: "Go ahead"}}}}
	return q
}

// approvalPolicy is an ApprovalPolicy of the scene's namespace.
func (s *scene) approvalPolicy(name string, sel hitlv1.ApprovalSelector, rule hitlv1.ApprovalRule) *hitlv1.ApprovalPolicy {
	return &hitlv1.ApprovalPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec:       hitlv1.ApprovalPolicySpec{Selector: sel, Rule: rule},
	}
}

// sentinel is the policy installPolicies creates last: it governs only
// the questions labelled with it.
const sentinel = "zz-sentinel"

// installPolicies creates the policies as the admin, as the platform team
// would, and waits until admission acts on all of them. The API server
// (the question-approval policy's parameters) and the manager (the
// question webhook) learn of policies from watches, in the order they were
// created; so once a last, sentinel policy refuses a probe, the others are
// known too. The probe asks for more than every other policy (the most
// approvals, each of their sets with the largest minimum), so only the
// sentinel, whose set it lacks, refuses it.
func (s *scene) installPolicies(policies ...*hitlv1.ApprovalPolicy) {
	GinkgoHelper()
	probeRule := hitlv1.ApprovalRule{Approvals: 16}
	for i, p := range policies {
		Expect(s.admin.Create(ctx, p)).To(Succeed())
		for _, set := range p.Spec.Rule.From {
			set.Name = fmt.Sprintf("set-%d-%s", i, set.Name)
			set.Minimum = 16
			probeRule.From = append(probeRule.From, set)
		}
	}
	Expect(len(probeRule.From)).To(BeNumerically("<=", 8), "the probe has room for 8 sets")
	Expect(s.admin.Create(ctx, s.approvalPolicy(sentinel, labelSelector(map[string]string{"hitl-test/sentinel": "true"}),
		approvalRule(1, hitlv1.ApproverSet{Name: "sentinel", Users: []string{"sentinel"}, Minimum: 1})))).To(Succeed())
	probe := withApproval(s.question("coder"), probeRule)
	probe.Labels = map[string]string{"hitl-test/sentinel": "true"}
	Eventually(func(g Gomega) {
		err := s.admin.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		g.Expect(err).To(HaveOccurred(), "the sentinel policy is not applied yet")
		g.Expect(err.Error()).To(ContainSubstring("ApprovalPolicy " + sentinel))
		if webhookMode(s) {
			// The manager's cache holds it too.
			g.Expect(err.Error()).To(ContainSubstring(`admission webhook "muserquestion.hitl.dev"`))
		}
	}).Should(Succeed(), "admission never applied the ApprovalPolicies")
}

// refusedWeakened checks that err refuses a question whose spec.approval
// is weaker than policy: by the question webhook in webhook mode, by the
// question-approval policy otherwise; the message starts with
// POLICY_WEAKENED and names the field, the policy and the fragments.
func (s *scene) refusedWeakened(err error, policy, field string, fragments ...string) {
	GinkgoHelper()
	fragments = append([]string{"ApprovalPolicy " + policy + " ", "(" + field + ")"}, fragments...)
	if !webhookMode(s) {
		refusedByPolicy(err, "question-approval", hitlv1.CodePolicyWeakened, "("+field+")", fragments...)
		return
	}
	st := statusOf(err)
	Expect(st.Message).To(ContainSubstring(`admission webhook "muserquestion.hitl.dev" denied the request: %s: `, hitlv1.CodePolicyWeakened))
	for _, f := range fragments {
		Expect(st.Message).To(ContainSubstring(f))
	}
	Expect(st.Reason).To(Equal(metav1.StatusReasonForbidden))
	Expect(st.Details).NotTo(BeNil(), "the denial carries no details")
	Expect(st.Details.Causes).To(HaveLen(1))
	Expect(st.Details.Causes[0].Field).To(Equal(field))
	Expect(st.Details.Causes[0].Message).To(ContainSubstring("%s: ", hitlv1.CodePolicyWeakened))
	Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodePolicyWeakened))
	Expect(strings.Count(st.Message, string(hitlv1.CodePolicyWeakened))).To(Equal(1), "one weakening is reported: %s", st.Message)
}
