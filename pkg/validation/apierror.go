package validation

import (
	"errors"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// codedMessage finds a code at the start of a rule's message inside an API
// server error, e.g. `admission webhook "..." denied the request: REPLY_QUEUED: ...`
// or `spec.timeout: Invalid value: "0s": BAD_TIMEOUT: ...`.
var codedMessage = regexp.MustCompile(`(?:^|: )(EMPTY_QUESTIONS|BAD_INTENT|BAD_TIMEOUT|DELEGATED_CALLER|AGENT_MISMATCH|BAD_ANSWER|REPLY_QUEUED|NOT_ANSWERABLE|FORBIDDEN|ASK_ABORTED): (.*)$`)

// FromAPIError turns an API server error whose message carries one of the
// specification's codes (a webhook denial or a CEL rule) into an *Error
// wrapping it, so that callers can test it with CodeOf. Other errors are
// returned unchanged.
func FromAPIError(err error) error {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return err
	}
	msg := status.Status().Message
	for _, cause := range causes(status) {
		if m := codedMessage.FindStringSubmatch(cause); m != nil {
			msg = cause
			break
		}
	}
	m := codedMessage.FindStringSubmatch(msg)
	if m == nil {
		return err
	}
	return &apiError{coded: &Error{Code: hitlv1.ErrorCode(m[1]), Rule: m[2]}, cause: err}
}

func causes(status apierrors.APIStatus) []string {
	var out []string
	if d := status.Status().Details; d != nil {
		for _, c := range d.Causes {
			out = append(out, c.Message)
		}
	}
	return out
}

// apiError is an *Error that came back from the API server; it unwraps to
// the original error, so apierrors helpers still work on it.
type apiError struct {
	coded *Error
	cause error
}

func (e *apiError) Error() string   { return e.coded.Error() }
func (e *apiError) Unwrap() []error { return []error{e.coded, e.cause} }
