package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Governs reports whether the policy selects question q, whose labels are
// given apart (a cache may keep none): its spec.selector matches q
// (ApprovalSelector.Matches). The controller, the question webhook and the
// question-approval admission policy (config/policies, in CEL) apply this
// same rule.
func (p *ApprovalPolicy) Governs(q *UserQuestion, questionLabels map[string]string) bool {
	return p.Spec.Selector.Matches(q, questionLabels)
}

// Selects reports whether the notification policy selects question q,
// whose labels are given apart: its spec.selector matches q
// (ApprovalSelector.Matches), as an ApprovalPolicy's does.
func (p *NotificationPolicy) Selects(q *UserQuestion, questionLabels map[string]string) bool {
	return p.Spec.Selector.Matches(q, questionLabels)
}

// Matches reports whether the selector selects question q, whose labels are
// given apart: every part that is set matches. agents: q's spec.agent is one
// of them; intents: one of q's questions has one of them; questionSelector:
// the labels match it. A malformed label selector (one
// metav1.LabelSelectorAsSelector refuses: an unknown operator, In or NotIn
// without values, Exists or DoesNotExist with values, an invalid key or
// value) selects nothing.
func (sel *ApprovalSelector) Matches(q *UserQuestion, questionLabels map[string]string) bool {
	if len(sel.Agents) > 0 && !slices.Contains(sel.Agents, q.Spec.Agent) {
		return false
	}
	if len(sel.Intents) > 0 && !slices.ContainsFunc(q.Spec.Questions, func(qq Question) bool {
		return qq.Intent != nil && slices.Contains(sel.Intents, qq.Intent.Type)
	}) {
		return false
	}
	if sel.QuestionSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(sel.QuestionSelector)
		if err != nil || !s.Matches(labels.Set(questionLabels)) {
			return false
		}
	}
	return true
}
