package admission

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// PolicyWeakened is the first way in which question q's own approval rule
// (spec.approval) is weaker than one of the policies that govern it
// (ApprovalPolicy.Governs, on q's labels), as a POLICY_WEAKENED error; nil
// when q has no rule of its own (the controller applies the policies
// anyway) or weakens none. The policies are taken by name, and each one's
// rules in the order of WeakerThan.
func PolicyWeakened(q *hitlv1.UserQuestion, policies []hitlv1.ApprovalPolicy) *validation.Error {
	if q.Spec.Approval == nil {
		return nil
	}
	order := make([]int, len(policies))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return policies[order[i]].Name < policies[order[j]].Name })
	for _, i := range order {
		p := &policies[i]
		if !p.Governs(q, q.Labels) {
			continue
		}
		if err := WeakerThan(q.Spec.Approval, p); err != nil {
			return err
		}
	}
	return nil
}

// WeakerThan is the first rule of policy p that the rule own asks less
// of, as a POLICY_WEAKENED error naming the field and p; nil when own is
// as strict as p or stricter. The rules, in this order (the
// question-approval admission policy, in config/policies, checks the same
// in CEL and words them the same):
//   - spec.approval.approvals: fewer approvals than p's;
//   - spec.approval.veto: p's veto is on (unset or true) and own's is
//     explicitly false;
//   - spec.approval.excludeRequester: likewise;
//   - spec.approval.from: a set of p's has no set in own with the same
//     groups and the same users (as sets; names do not matter) and at
//     least its minimum. Every such set of p is named.
func WeakerThan(own *hitlv1.ApprovalRule, p *hitlv1.ApprovalPolicy) *validation.Error {
	rule := &p.Spec.Rule
	weakened := func(field, format string, args ...any) *validation.Error {
		return &validation.Error{Code: hitlv1.CodePolicyWeakened, Field: field, Rule: fmt.Sprintf(format, args...)}
	}
	switch {
	case own.Approvals < rule.Approvals:
		return weakened("spec.approval.approvals", "%d approvals are fewer than the %d ApprovalPolicy %s requires",
			own.Approvals, rule.Approvals, p.Name)
	case rule.VetoEnabled() && !own.VetoEnabled():
		return weakened("spec.approval.veto", "ApprovalPolicy %s requires the veto, which spec.approval turns off", p.Name)
	case rule.RequesterExcluded() && !own.RequesterExcluded():
		return weakened("spec.approval.excludeRequester", "ApprovalPolicy %s excludes the requester from voting, which spec.approval allows", p.Name)
	}
	var missing []string
	for _, want := range rule.From {
		if !slices.ContainsFunc(own.From, func(s hitlv1.ApproverSet) bool {
			return s.Minimum >= want.Minimum && sameSet(s.Groups, want.Groups) && sameSet(s.Users, want.Users)
		}) {
			missing = append(missing, want.Name)
		}
	}
	if len(missing) > 0 {
		return weakened("spec.approval.from", "ApprovalPolicy %s requires approver sets %s: spec.approval.from needs, for each, "+
			"a set of the same groups and users with at least its minimum", p.Name, strings.Join(missing, ", "))
	}
	return nil
}

// sameSet reports whether a and b hold the same strings, in any order and
// however often (CEL's sets.equivalent).
func sameSet(a, b []string) bool {
	return !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) }) &&
		!slices.ContainsFunc(b, func(s string) bool { return !slices.Contains(a, s) })
}
