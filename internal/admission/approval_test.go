package admission_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	hitladmission "github.com/hitl-dev/hitl/internal/admission"
)

// These tests are plain Go tests: `go test -run 'Approval|Weaker|Governs'`
// runs them without the suite's control plane.

func sre(minimum int32) hitlv1.ApproverSet {
	return hitlv1.ApproverSet{Name: "sre", Groups: []string{"sre", "sre-oncall"}, Minimum: minimum}
}

func security(minimum int32) hitlv1.ApproverSet {
	return hitlv1.ApproverSet{Name: "security", Users: []string{"bob"}, Minimum: minimum}
}

func policy(name string, sel hitlv1.ApprovalSelector, rule hitlv1.ApprovalRule) hitlv1.ApprovalPolicy {
	return hitlv1.ApprovalPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: hitlv1.ApprovalPolicySpec{Selector: sel, Rule: rule}}
}

func TestWeakerThan(t *testing.T) {
	p := policy("two-sets", hitlv1.ApprovalSelector{}, hitlv1.ApprovalRule{Approvals: 3, From: []hitlv1.ApproverSet{sre(2), security(1)}})
	noVeto := policy("lenient", hitlv1.ApprovalSelector{}, hitlv1.ApprovalRule{Approvals: 1, Veto: ptr.To(false), ExcludeRequester: ptr.To(false)})
	explicit := policy("explicit", hitlv1.ApprovalSelector{}, hitlv1.ApprovalRule{Approvals: 1, Veto: ptr.To(true), ExcludeRequester: ptr.To(true)})
	same := func(change func(r *hitlv1.ApprovalRule)) *hitlv1.ApprovalRule {
		r := p.Spec.Rule.DeepCopy()
		change(r)
		return r
	}
	cases := []struct {
		name   string
		own    *hitlv1.ApprovalRule
		policy hitlv1.ApprovalPolicy
		// field is the field named, "" when own is not weaker.
		field string
		want  string
	}{
		{"the same rule", same(func(*hitlv1.ApprovalRule) {}), p, "", ""},
		{"the same rule, said explicitly, sets reordered and renamed", same(func(r *hitlv1.ApprovalRule) {
			r.Veto, r.ExcludeRequester = ptr.To(true), ptr.To(true)
			r.From = []hitlv1.ApproverSet{{Name: "sec", Users: []string{"bob"}, Minimum: 1},
				{Name: "platform", Groups: []string{"sre-oncall", "sre"}, Minimum: 2}}
		}), p, "", ""},
		{"stricter", same(func(r *hitlv1.ApprovalRule) {
			r.Approvals = 5
			r.From[0].Minimum = 3
			r.From = append(r.From, hitlv1.ApproverSet{Name: "dba", Groups: []string{"dba"}, Minimum: 1})
		}), p, "", ""},
		{"fewer approvals", same(func(r *hitlv1.ApprovalRule) { r.Approvals = 2 }), p,
			"spec.approval.approvals", "POLICY_WEAKENED: 2 approvals are fewer than the 3 ApprovalPolicy two-sets requires (spec.approval.approvals)"},
		{"no veto", same(func(r *hitlv1.ApprovalRule) { r.Veto = ptr.To(false) }), p,
			"spec.approval.veto", "POLICY_WEAKENED: ApprovalPolicy two-sets requires the veto, which spec.approval turns off (spec.approval.veto)"},
		{"no veto, against an explicit one", &hitlv1.ApprovalRule{Approvals: 1, Veto: ptr.To(false)}, explicit,
			"spec.approval.veto", "requires the veto"},
		{"the requester allowed", same(func(r *hitlv1.ApprovalRule) { r.ExcludeRequester = ptr.To(false) }), p,
			"spec.approval.excludeRequester", "POLICY_WEAKENED: ApprovalPolicy two-sets excludes the requester from voting, which spec.approval allows (spec.approval.excludeRequester)"},
		{"the requester allowed, against an explicit exclusion", &hitlv1.ApprovalRule{Approvals: 1, ExcludeRequester: ptr.To(false)}, explicit,
			"spec.approval.excludeRequester", "excludes the requester"},
		{"no veto and the requester allowed, where the policy has neither", &hitlv1.ApprovalRule{Approvals: 1, Veto: ptr.To(false), ExcludeRequester: ptr.To(false)}, noVeto, "", ""},
		{"no sets", same(func(r *hitlv1.ApprovalRule) { r.From = nil }), p,
			"spec.approval.from", "POLICY_WEAKENED: ApprovalPolicy two-sets requires approver sets sre, security: spec.approval.from needs, for each, a set of the same groups and users with at least its minimum (spec.approval.from)"},
		{"a set dropped", same(func(r *hitlv1.ApprovalRule) { r.From = r.From[1:] }), p, "spec.approval.from", "requires approver sets sre:"},
		{"a lower minimum", same(func(r *hitlv1.ApprovalRule) { r.From[0].Minimum = 1 }), p, "spec.approval.from", "requires approver sets sre:"},
		{"a set of more groups", same(func(r *hitlv1.ApprovalRule) { r.From[0].Groups = append(r.From[0].Groups, "dev") }), p,
			"spec.approval.from", "requires approver sets sre:"},
		{"a set of fewer groups", same(func(r *hitlv1.ApprovalRule) { r.From[0].Groups = r.From[0].Groups[:1] }), p,
			"spec.approval.from", "requires approver sets sre:"},
		{"a set of the users as a group", same(func(r *hitlv1.ApprovalRule) { r.From[1].Users, r.From[1].Groups = nil, []string{"bob"} }), p,
			"spec.approval.from", "requires approver sets security:"},
		{"a set with users added", same(func(r *hitlv1.ApprovalRule) { r.From[0].Users = []string{"carol"} }), p,
			"spec.approval.from", "requires approver sets sre:"},
		{"the first broken rule is named", &hitlv1.ApprovalRule{Approvals: 1, Veto: ptr.To(false)}, p,
			"spec.approval.approvals", "1 approvals are fewer than the 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := hitladmission.WeakerThan(c.own, &c.policy)
			if c.field == "" {
				if got != nil {
					t.Fatalf("weaker: %v", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("not weaker, want %s", c.field)
			}
			if got.Code != hitlv1.CodePolicyWeakened || got.Field != c.field || !strings.Contains(got.Error(), c.want) {
				t.Fatalf("got %s %s %q, want %s %s %q", got.Code, got.Field, got.Error(), hitlv1.CodePolicyWeakened, c.field, c.want)
			}
			if !strings.HasPrefix(got.Error(), "POLICY_WEAKENED: ") || !strings.Contains(got.Error(), "ApprovalPolicy "+c.policy.Name+" ") {
				t.Fatalf("%q does not start with the code or name the policy", got.Error())
			}
		})
	}
}

// question is an Approval ask by agent with labels and its own rule.
func question(agent string, labels map[string]string, own *hitlv1.ApprovalRule) *hitlv1.UserQuestion {
	return &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns", Labels: labels},
		Spec: hitlv1.UserQuestionSpec{Agent: agent, Approval: own, Questions: []hitlv1.Question{{ID: "perm", Question: "May I?",
			Options: []hitlv1.QuestionOption{{Label: "Allow"}, {Label: "Deny"}},
			Intent:  &hitlv1.QuestionIntent{Type: hitlv1.IntentApproval, Approval: &hitlv1.ApprovalIntent{Approve: "Allow", Reject: "Deny"}}}}},
	}
}

func expressions(exprs ...metav1.LabelSelectorRequirement) hitlv1.ApprovalSelector {
	return hitlv1.ApprovalSelector{QuestionSelector: &metav1.LabelSelector{MatchExpressions: exprs}}
}

func requirement(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
}

func TestGoverns(t *testing.T) {
	in, notIn := metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn
	exists, absent := metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist
	dev := map[string]string{"env": "dev", hitlv1.AgentLabel: "coder"}
	cases := []struct {
		name   string
		sel    hitlv1.ApprovalSelector
		agent  string
		labels map[string]string
		want   bool
	}{
		{"an empty selector", hitlv1.ApprovalSelector{}, "coder", nil, true},
		{"its agent", hitlv1.ApprovalSelector{Agents: []string{"builder", "coder"}}, "coder", nil, true},
		{"another agent", hitlv1.ApprovalSelector{Agents: []string{"builder"}}, "coder", nil, false},
		{"its intent", hitlv1.ApprovalSelector{Intents: []hitlv1.IntentType{hitlv1.IntentApproval}}, "coder", nil, true},
		{"another intent", hitlv1.ApprovalSelector{Intents: []hitlv1.IntentType{hitlv1.IntentPlanReview}}, "coder", nil, false},
		{"an empty label selector", hitlv1.ApprovalSelector{QuestionSelector: &metav1.LabelSelector{}}, "coder", nil, true},
		{"matchLabels", hitlv1.ApprovalSelector{QuestionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}, "coder", dev, true},
		{"matchLabels, another value", hitlv1.ApprovalSelector{QuestionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}, "coder", dev, false},
		{"matchLabels, no labels", hitlv1.ApprovalSelector{QuestionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}, "coder", nil, false},
		{"In", expressions(requirement("env", in, "dev", "prod")), "coder", dev, true},
		{"In, another value", expressions(requirement("env", in, "prod")), "coder", dev, false},
		{"NotIn", expressions(requirement("env", notIn, "dev")), "coder", dev, false},
		{"NotIn, another value", expressions(requirement("env", notIn, "prod")), "coder", dev, true},
		{"NotIn, no such label", expressions(requirement("stage", notIn, "prod")), "coder", dev, true},
		{"Exists", expressions(requirement("env", exists)), "coder", dev, true},
		{"Exists, no such label", expressions(requirement("stage", exists)), "coder", dev, false},
		{"DoesNotExist", expressions(requirement("stage", absent)), "coder", dev, true},
		{"DoesNotExist, a label", expressions(requirement(hitlv1.AgentLabel, absent)), "coder", dev, false},
		{"all requirements", expressions(requirement("env", exists), requirement("stage", absent), requirement("env", in, "dev")), "coder", dev, true},
		{"one requirement fails", expressions(requirement("env", exists), requirement("stage", exists)), "coder", dev, false},
		{"every part set and matching", hitlv1.ApprovalSelector{Agents: []string{"coder"}, Intents: []hitlv1.IntentType{hitlv1.IntentApproval},
			QuestionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}, "coder", dev, true},
		// Malformed selectors select nothing.
		{"NotIn without values", expressions(requirement("env", notIn)), "coder", dev, false},
		{"In without values", expressions(requirement("env", in)), "coder", dev, false},
		{"Exists with values", expressions(requirement("env", exists, "dev")), "coder", dev, false},
		{"DoesNotExist with values", expressions(requirement("stage", absent, "dev")), "coder", dev, false},
		{"an unknown operator", expressions(requirement("env", "Gt", "1")), "coder", dev, false},
		{"DoesNotExist of an invalid key", expressions(requirement("not a key", absent)), "coder", dev, false},
		{"NotIn with an invalid value", expressions(requirement("env", notIn, "prod", "not a value")), "coder", dev, false},
		{"In with an invalid value besides the label's", expressions(requirement("env", in, "dev", "not a value")), "coder", dev, false},
		{"NotIn of a key with a too long prefix", expressions(requirement(strings.Repeat("a", 254)+"/env", notIn, "dev")), "coder", dev, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := policy("p", c.sel, hitlv1.ApprovalRule{Approvals: 1})
			if got := p.Governs(question(c.agent, c.labels, nil), c.labels); got != c.want {
				t.Fatalf("Governs = %v, want %v", got, c.want)
			}
		})
	}
}

func TestPolicyWeakened(t *testing.T) {
	strict := hitlv1.ApprovalRule{Approvals: 3, Veto: ptr.To(false), ExcludeRequester: ptr.To(false)}
	policies := []hitlv1.ApprovalPolicy{
		policy("z-builder", hitlv1.ApprovalSelector{Agents: []string{"builder"}}, strict),
		policy("high-risk", hitlv1.ApprovalSelector{QuestionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"risk": "high"}}}, strict),
		policy("b-risky", hitlv1.ApprovalSelector{QuestionSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			requirement("risk", metav1.LabelSelectorOpExists)}}}, strict),
		policy("a-lenient", hitlv1.ApprovalSelector{}, hitlv1.ApprovalRule{Approvals: 1, Veto: ptr.To(false), ExcludeRequester: ptr.To(false)}),
	}
	weak := &hitlv1.ApprovalRule{Approvals: 2, Veto: ptr.To(false), ExcludeRequester: ptr.To(false)}
	cases := []struct {
		name   string
		q      *hitlv1.UserQuestion
		policy string // the policy named, "" for none
	}{
		{"no rule of its own", question("builder", map[string]string{"risk": "high"}, nil), ""},
		{"governed by the lenient policy only", question("coder", nil, weak), ""},
		{"another agent's policy", question("builder", nil, weak), "z-builder"},
		// Two policies it weakens: the first by name.
		{"two policies, by name", question("coder", map[string]string{"risk": "high"}, weak), "b-risky"},
		{"three policies, by name", question("builder", map[string]string{"risk": "low"}, weak), "b-risky"},
		{"as strict as every one", question("builder", map[string]string{"risk": "high"}, strict.DeepCopy()), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := hitladmission.PolicyWeakened(c.q, policies)
			switch {
			case c.policy == "" && got != nil:
				t.Fatalf("weakened: %v", got)
			case c.policy != "" && got == nil:
				t.Fatalf("not weakened, want ApprovalPolicy %s", c.policy)
			case c.policy != "" && !strings.Contains(got.Error(), "ApprovalPolicy "+c.policy+" "):
				t.Fatalf("%q names another policy than %s", got.Error(), c.policy)
			}
		})
	}
}

// TestQuestionWebhookRefusesAWeakenedRule runs the defaulter as the API
// server would call it, over a client holding the namespace's policies.
func TestQuestionWebhookRefusesAWeakenedRule(t *testing.T) {
	p := policy("two-approvers", hitlv1.ApprovalSelector{}, hitlv1.ApprovalRule{Approvals: 2})
	other := p.DeepCopy()
	other.Namespace, other.Name, other.Spec.Rule.Approvals = "elsewhere", "five-approvers", 5
	store := fake.NewClientBuilder().WithScheme(fzScheme).WithObjects(&p, other).Build()
	listErr := errors.New("the cache is gone")
	broken := interceptor.NewClient(store, interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return listErr
	}})
	request := func(op admissionv1.Operation) context.Context {
		return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: op, Namespace: "ns", UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:ns:coder"}}})
	}
	w := &hitladmission.QuestionWebhook{Client: store}

	// Weaker: refused, with the code and the field in the cause.
	err := w.Default(request(admissionv1.Create), question("coder", nil, &hitlv1.ApprovalRule{Approvals: 1}))
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("want a denial, got %v", err)
	}
	st := status.Status()
	if st.Reason != metav1.StatusReasonForbidden || !strings.HasPrefix(st.Message, "POLICY_WEAKENED: 1 approvals are fewer than the 2 ApprovalPolicy two-approvers requires") {
		t.Fatalf("denial %s %q", st.Reason, st.Message)
	}
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "spec.approval.approvals" {
		t.Fatalf("causes %+v", st.Details)
	}
	if validation.CodeOf(err) != hitlv1.CodePolicyWeakened {
		t.Fatalf("code %q", validation.CodeOf(err))
	}

	// As strict (the other namespace's policy does not count), or without
	// a rule: admitted, and defaulted.
	for _, q := range []*hitlv1.UserQuestion{question("coder", nil, &hitlv1.ApprovalRule{Approvals: 2}), question("coder", nil, nil)} {
		if err := w.Default(request(admissionv1.Create), q); err != nil {
			t.Fatalf("refused: %v", err)
		}
		if q.Labels[hitlv1.AgentLabel] != "coder" || q.Spec.AskedBy == nil {
			t.Fatalf("not defaulted: %+v", q)
		}
	}
	// Updates are not checked (spec.approval is immutable).
	if err := w.Default(request(admissionv1.Update), question("coder", nil, &hitlv1.ApprovalRule{Approvals: 1})); err != nil {
		t.Fatalf("an update refused: %v", err)
	}
	// Policies that cannot be read: refused, not admitted unchecked; a
	// question without a rule does not read them.
	w = &hitladmission.QuestionWebhook{Client: broken}
	if err := w.Default(request(admissionv1.Create), question("coder", nil, &hitlv1.ApprovalRule{Approvals: 2})); !apierrors.IsInternalError(err) ||
		!strings.Contains(err.Error(), listErr.Error()) {
		t.Fatalf("want an internal error, got %v", err)
	}
	if err := w.Default(request(admissionv1.Create), question("coder", nil, nil)); err != nil {
		t.Fatalf("a question without a rule refused: %v", err)
	}
	w = &hitladmission.QuestionWebhook{}
	if err := w.Default(request(admissionv1.Create), question("coder", nil, &hitlv1.ApprovalRule{Approvals: 2})); !apierrors.IsInternalError(err) {
		t.Fatalf("without a client: want an internal error, got %v", err)
	}
}
