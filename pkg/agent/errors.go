package agent

import (
	"fmt"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// codedError is a *validation.Error together with the error that caused it,
// so that callers can test both: validation.CodeOf for the code, and
// errors.Is(err, context.Canceled) or apierrors.IsNotFound for the cause.
// Its message is the coded one, which starts with the code.
type codedError struct {
	coded *validation.Error
	cause error
}

func (e *codedError) Error() string   { return e.coded.Error() }
func (e *codedError) Unwrap() []error { return []error{e.coded, e.cause} }

// coded returns an error with the code and rule, wrapping cause when there
// is one.
func coded(code hitlv1.ErrorCode, cause error, format string, args ...any) error {
	e := &validation.Error{Code: code, Rule: fmt.Sprintf(format, args...)}
	if cause == nil {
		return e
	}
	return &codedError{coded: e, cause: cause}
}

// aborted is the ASK_ABORTED error of an ask whose context ended.
func aborted(cause error, format string, args ...any) error {
	return coded(hitlv1.CodeAskAborted, cause, format+": %v", append(args, cause)...)
}

// notAnswerable is the NOT_ANSWERABLE error of a question that is missing,
// finished, or not in the state the agent needs.
func notAnswerable(cause error, format string, args ...any) error {
	return coded(hitlv1.CodeNotAnswerable, cause, format, args...)
}

// apiError turns an error from the API server into the coded error it
// carries (a webhook denial or a CEL rule), whose message already says what
// was wrong; an error without a code is wrapped with what the agent did.
func apiError(err error, format string, args ...any) error {
	err = validation.FromAPIError(err)
	if validation.CodeOf(err) != "" {
		return err
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
