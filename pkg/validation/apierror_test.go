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
