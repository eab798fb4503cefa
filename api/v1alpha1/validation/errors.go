// Package validation holds hitl's rules: what makes an ask valid and what
// makes an answer batch valid for it. The controller, the webhooks, the SDKs
// and the CLI all call these functions, so every rule is written once; the
// CRD's CEL rules repeat only what one object can tell about itself.
package validation

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Error is a broken rule. Its message starts with the code, names the
// question id when there is one, and says which rule was broken.
type Error struct {
	// Code is the specification's error code.
	Code hitlv1.ErrorCode
	// QuestionID is the question the rule concerns, if any.
	QuestionID string
	// Field is the path of the offending field, e.g. "spec.answers[1].selected".
	Field string
	// Rule says, in words, what was wrong.
	Rule string
}

func (e *Error) Error() string {
	msg := string(e.Code) + ": "
	if e.QuestionID != "" {
		msg += "question " + e.QuestionID + ": "
	}
	msg += e.Rule
	if e.Field != "" {
		msg += " (" + e.Field + ")"
	}
	return msg
}

func newError(code hitlv1.ErrorCode, questionID, field, format string, args ...any) *Error {
	return &Error{Code: code, QuestionID: questionID, Field: field, Rule: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of the first *Error in err's chain; for an error
// of the API server without one, the code its status carries (in
// status.details.causes first, else in its message, see FromAPIError); ""
// when there is none.
func CodeOf(err error) hitlv1.ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if e := codedStatus(status.Status()); e != nil {
			return e.Code
		}
	}
	return ""
}

// IsCode reports whether err carries the given code.
func IsCode(err error, code hitlv1.ErrorCode) bool { return err != nil && CodeOf(err) == code }
