package validation

import (
	"errors"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// FieldError is the broken rule as a field error of the kind API servers
// return: the offending field's path, and as its detail the coded message
// (the code first). Codes that say who may do something (FORBIDDEN,
// AGENT_MISMATCH, DELEGATED_CALLER) are Forbidden errors; the others
// Invalid ones.
func (e *Error) FieldError() *field.Error {
	switch e.Code {
	case hitlv1.CodeForbidden, hitlv1.CodeAgentMismatch, hitlv1.CodeDelegatedCaller:
		return &field.Error{Type: field.ErrorTypeForbidden, Field: e.Field, BadValue: field.OmitValueType{}, Detail: e.Error()}
	}
	return &field.Error{Type: field.ErrorTypeInvalid, Field: e.Field, BadValue: field.OmitValueType{}, Detail: e.Error()}
}

// Denial is the API error that refuses an object of kind named name for the
// broken rules errs: apierrors.NewInvalid over their field errors, so that
// clients find each code and field in status.details.causes, with a message
// for people that starts with the first code ("BAD_ANSWER: question q1:
// ... (spec.answers[0].selected)"). The status is 403 Forbidden, as an
// admission denial's: a webhook that refuses a request never says the
// object itself was malformed.
func Denial(kind schema.GroupKind, name string, errs ...*Error) *apierrors.StatusError {
	list := make(field.ErrorList, 0, len(errs))
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		list = append(list, e.FieldError())
		msgs = append(msgs, e.Error())
	}
	status := apierrors.NewInvalid(kind, name, list)
	status.ErrStatus.Code = http.StatusForbidden
	status.ErrStatus.Reason = metav1.StatusReasonForbidden
	status.ErrStatus.Message = strings.Join(msgs, "; ")
	return status
}

// FromAPIError turns an API server error that carries one of the
// specification's codes (a webhook denial, an admission policy's, a CEL
// rule) into an *Error wrapping it, so that callers can test it with
// CodeOf. The code and the field are read from status.details.causes first;
// an admission policy's denial has no causes, and then the message is read.
// Other errors are returned unchanged.
func FromAPIError(err error) error {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return err
	}
	coded := codedStatus(status.Status())
	if coded == nil {
		return err
	}
	return &apiError{coded: coded, cause: err}
}

// codedStatus reads the first coded cause of a status, or else a code in
// its message; nil when there is neither.
func codedStatus(st metav1.Status) *Error {
	if d := st.Details; d != nil {
		for _, c := range d.Causes {
			if code, rest, ok := hitlv1.CodeOfMessage(c.Message); ok {
				return &Error{Code: code, Field: c.Field, Rule: withoutField(rest, c.Field)}
			}
		}
	}
	if code, rest, ok := hitlv1.CodeOfMessage(st.Message); ok {
		return &Error{Code: code, Rule: rest}
	}
	return nil
}

// withoutField drops the " (field)" that Error adds at the end of a message,
// so that an error read back from a cause prints as it was written.
func withoutField(rule, field string) string {
	if field == "" {
		return rule
	}
	return strings.TrimSuffix(rule, " ("+field+")")
}

// apiError is an *Error that came back from the API server; it unwraps to
// the original error, so apierrors helpers still work on it.
type apiError struct {
	coded *Error
	cause error
}

func (e *apiError) Error() string   { return e.coded.Error() }
func (e *apiError) Unwrap() []error { return []error{e.coded, e.cause} }
