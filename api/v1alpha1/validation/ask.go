package validation

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// DefaultMaxTimeout is the largest foreground window the controller accepts
// unless its --max-timeout flag says otherwise.
const DefaultMaxTimeout = 24 * time.Hour

// ValidateAsk checks an ask and returns the first broken rule, or nil:
// EMPTY_QUESTIONS, DELEGATED_CALLER, BAD_INTENT, BAD_INPUT or BAD_TIMEOUT (with
// maxTimeout as the upper bound; zero means DefaultMaxTimeout).
func ValidateAsk(spec *hitlv1.UserQuestionSpec, maxTimeout time.Duration) error {
	if len(spec.Questions) == 0 {
		return newError(hitlv1.CodeEmptyQuestions, "", "spec.questions", "an ask needs at least one question")
	}
	if spec.Origin == hitlv1.OriginSubagent {
		return newError(hitlv1.CodeDelegatedCaller, "", "spec.origin", "a subagent may not ask a person directly")
	}
	for i := range spec.Questions {
		if err := ValidateIntent(&spec.Questions[i], fmt.Sprintf("spec.questions[%d]", i)); err != nil {
			return err
		}
	}
	for i := range spec.Questions {
		if err := ValidateInput(&spec.Questions[i], fmt.Sprintf("spec.questions[%d]", i)); err != nil {
			return err
		}
	}
	if err := validateSealing(spec); err != nil {
		return err
	}
	for i := range spec.Questions {
		if isApproval(&spec.Questions[i]) && (len(spec.Questions) != 1 || spec.Timeout != nil) {
			return newError(hitlv1.CodeBadIntent, spec.Questions[i].ID, "spec.questions",
				"an Approval ask has exactly one question and no spec.timeout")
		}
	}
	return ValidateTimeout(spec.Timeout, maxTimeout)
}

// ValidateTimeout checks a foreground window: absent (blocking) or positive,
// whole milliseconds, and at most maxTimeout (zero means DefaultMaxTimeout).
func ValidateTimeout(timeout *metav1.Duration, maxTimeout time.Duration) error {
	if timeout == nil {
		return nil
	}
	if maxTimeout <= 0 {
		maxTimeout = DefaultMaxTimeout
	}
	d := timeout.Duration
	switch {
	case d <= 0:
		return newError(hitlv1.CodeBadTimeout, "", "spec.timeout", "the timeout %s must be positive", d)
	case d%time.Millisecond != 0:
		return newError(hitlv1.CodeBadTimeout, "", "spec.timeout", "the timeout %s must be a whole number of milliseconds", d)
	case d > maxTimeout:
		return newError(hitlv1.CodeBadTimeout, "", "spec.timeout", "the timeout %s is above the maximum of %s", d, maxTimeout)
	}
	return nil
}

// ValidateIntent checks one question's presentation intent. field is the
// question's path, e.g. "spec.questions[0]".
func ValidateIntent(q *hitlv1.Question, field string) error {
	in := q.Intent
	if in == nil {
		return nil
	}
	bad := func(sub, format string, args ...any) error {
		return newError(hitlv1.CodeBadIntent, q.ID, field+sub, format, args...)
	}
	switch in.Type {
	case hitlv1.IntentPlanReview:
		if in.PlanReview == nil || in.Approval != nil {
			return bad(".intent", "a PlanReview intent takes intent.planReview and no intent.approval")
		}
		if q.Detail == "" {
			return bad(".detail", "a PlanReview intent needs the plan in detail")
		}
		if !hasOption(q, in.PlanReview.Approve) {
			return bad(".intent.planReview.approve", "%q must name one of the options", in.PlanReview.Approve)
		}
	case hitlv1.IntentApproval:
		a := in.Approval
		if a == nil || in.PlanReview != nil {
			return bad(".intent", "an Approval intent takes intent.approval and no intent.planReview")
		}
		if q.MultiSelect {
			return bad(".multiSelect", "an Approval question cannot be multiSelect")
		}
		if a.Approve == "" || a.Reject == "" || a.Approve == a.Reject || (a.Always != "" && (a.Always == a.Approve || a.Always == a.Reject)) {
			return bad(".intent.approval", "approve, reject and always must be distinct labels")
		}
		want := map[string]bool{a.Approve: true, a.Reject: true}
		if a.Always != "" {
			want[a.Always] = true
		}
		if len(q.Options) != len(want) {
			return bad(".options", "approve, reject and always must be exactly the option labels")
		}
		for _, o := range q.Options {
			if !want[o.Label] {
				return bad(".options", "approve, reject and always must be exactly the option labels (%q is neither)", o.Label)
			}
		}
		for _, label := range []string{a.Approve, a.Reject, a.Always} {
			if label != "" && !hasOption(q, label) {
				return bad(".options", "approve, reject and always must be exactly the option labels (%q is not an option)", label)
			}
		}
		if a.Display != nil {
			texts := []struct {
				name string
				text hitlv1.LocalizedText
			}{{"question", a.Display.Question}, {"detail", a.Display.Detail}, {"approve", a.Display.Approve}}
			for _, t := range texts {
				if (t.name == "question" || t.text != nil) && t.text["en"] == "" {
					return bad(".intent.approval.display."+t.name, "localized text needs an en entry")
				}
			}
		}
	default:
		return bad(".intent.type", "unknown intent type %q", in.Type)
	}
	return nil
}

func hasOption(q *hitlv1.Question, label string) bool {
	for _, o := range q.Options {
		if o.Label == label {
			return true
		}
	}
	return false
}
