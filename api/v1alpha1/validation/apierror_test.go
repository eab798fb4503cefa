package validation

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func TestFromAPIError(t *testing.T) {
	gr := schema.GroupResource{Group: "hitl.dev", Resource: "questionreplies"}
	denied := apierrors.NewForbidden(gr, "r", errors.New(`admission webhook "vquestionreply.hitl.dev" denied the request: REPLY_QUEUED: question q already has queued reply a`))
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "hitl.dev", Kind: "UserQuestion"}, "q",
		field.ErrorList{field.Invalid(field.NewPath("spec", "timeout"), "0s", "BAD_TIMEOUT: spec.timeout must be positive")})
	cases := []struct {
		name string
		err  error
		code hitlv1.ErrorCode
		rule string
	}{
		{"webhook denial", denied, hitlv1.CodeReplyQueued, "question q already has queued reply a"},
		{"CEL rule", invalid, hitlv1.CodeBadTimeout, "spec.timeout must be positive"},
		{"no code", apierrors.NewNotFound(gr, "r"), "", ""},
		{"not an API error", errors.New("BAD_ANSWER: x"), "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := FromAPIError(c.err)
			if CodeOf(got) != c.code {
				t.Fatalf("code %q, want %q (%v)", CodeOf(got), c.code, got)
			}
			if c.code == "" {
				if got != c.err {
					t.Fatalf("an error without a code must come back unchanged")
				}
				return
			}
			var e *Error
			errors.As(got, &e)
			if e.Rule != c.rule {
				t.Errorf("rule %q, want %q", e.Rule, c.rule)
			}
			if !errors.Is(got, c.err) {
				t.Errorf("the API error must stay in the chain")
			}
			var status apierrors.APIStatus
			if !errors.As(got, &status) {
				t.Errorf("apierrors helpers must still see the status")
			}
		})
	}
}

// A denial carries its code and field twice: in the message for people and
// in status.details.causes for programs. CodeOf and FromAPIError read the
// causes first.
func TestDenialCarriesCauses(t *testing.T) {
	kind := schema.GroupKind{Group: "hitl.dev", Kind: "QuestionReply"}
	broken := &Error{Code: hitlv1.CodeBadAnswer, QuestionID: "q1", Field: "spec.answers[0].selected", Rule: "pick one"}
	err := Denial(kind, "r", broken)
	st := err.Status()
	if st.Message != "BAD_ANSWER: question q1: pick one (spec.answers[0].selected)" {
		t.Errorf("message %q", st.Message)
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("reason %s, code %d: want an admission denial's Forbidden", st.Reason, st.Code)
	}
	if st.Details == nil || len(st.Details.Causes) != 1 {
		t.Fatalf("details %+v, want one cause", st.Details)
	}
	c := st.Details.Causes[0]
	if c.Field != "spec.answers[0].selected" || c.Type != "FieldValueInvalid" || c.Message != "Invalid value: "+broken.Error() {
		t.Errorf("cause %+v", c)
	}
	if CodeOf(err) != hitlv1.CodeBadAnswer {
		t.Errorf("CodeOf(denial) = %q", CodeOf(err))
	}
	var back *Error
	if !errors.As(FromAPIError(err), &back) {
		t.Fatal("FromAPIError found no code")
	}
	if *back != (Error{Code: hitlv1.CodeBadAnswer, Field: broken.Field, Rule: "question q1: pick one"}) || back.Error() != broken.Error() {
		t.Errorf("read back %+v (%q), want %q", back, back.Error(), broken.Error())
	}

	forbidden := Denial(kind, "r", &Error{Code: hitlv1.CodeForbidden, Field: "spec.answeredBy", Rule: "no"})
	if c := forbidden.Status().Details.Causes[0]; c.Type != "FieldValueForbidden" || c.Field != "spec.answeredBy" {
		t.Errorf("a FORBIDDEN cause: %+v", c)
	}

	// The causes win over the message: the webhook's message is for
	// people and may be rewritten on the way (the API server prefixes it).
	mixed := Denial(kind, "r", broken)
	mixed.ErrStatus.Message = "REPLY_QUEUED: something else"
	if CodeOf(mixed) != hitlv1.CodeBadAnswer {
		t.Errorf("CodeOf read the message before the causes: %q", CodeOf(mixed))
	}
	// A raw API error (not passed through FromAPIError) has its code too.
	policy := apierrors.NewForbidden(schema.GroupResource{Group: "hitl.dev", Resource: "userquestions"}, "q",
		errors.New("ValidatingAdmissionPolicy 'hitl-question-identity' with binding 'b' denied request: AGENT_MISMATCH: user u may not ask as agent a (spec.agent)"))
	if CodeOf(policy) != hitlv1.CodeAgentMismatch {
		t.Errorf("CodeOf(a policy denial without causes) = %q", CodeOf(policy))
	}
	uncoded := apierrors.NewInvalid(kind, "r", field.ErrorList{field.Invalid(field.NewPath("spec"), "x", "no code here")})
	if CodeOf(uncoded) != "" || FromAPIError(uncoded) != error(uncoded) {
		t.Errorf("an error without a code got %q", CodeOf(uncoded))
	}
}
