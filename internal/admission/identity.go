// Package webhooks holds hitl's admission webhooks, which are optional: the
// default install checks identity and authorization with admission policies
// inside the API server (config/policies). The mutating webhooks stamp what
// the mutating policies stamp, for clusters without MutatingAdmissionPolicy
// (webhook mode, config/webhook-mode); the validating reply webhook gives a
// person applying a reply immediate feedback on checks that need the
// question (config/webhook-feedback). Both run with failurePolicy Ignore
// where they can: the controller repeats every check that matters.
package admission

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/internal/access"
)

// requestUser returns the authenticated user of the admission request.
func requestUser(ctx context.Context) (authenticationv1.UserInfo, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return authenticationv1.UserInfo{}, apierrors.NewInternalError(fmt.Errorf("no admission request in context: %w", err))
	}
	return req.UserInfo, nil
}

// subject is the access.Subject of an admission request's user.
func subject(user authenticationv1.UserInfo) access.Subject {
	extra := make(map[string][]string, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = v
	}
	return access.Subject{Username: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra}
}

// replyKind is the kind the reply webhook's denials name.
// userInfo is the stamped form of an authenticated user.
func userInfo(user authenticationv1.UserInfo) *hitlv1.UserInfo {
	return &hitlv1.UserInfo{Username: user.Username, UID: user.UID, Groups: user.Groups}
}

var replyKind = hitlv1.GroupVersion.WithKind("QuestionReply").GroupKind()

// denial is the error the reply webhook returns for a broken rule: a
// status whose message starts with the code and whose cause names the code
// and the field (validation.Denial).
func denial(r *hitlv1.QuestionReply, code hitlv1.ErrorCode, field, format string, args ...any) error {
	return deny(r, &validation.Error{Code: code, Field: field, Rule: fmt.Sprintf(format, args...)})
}

// deny refuses r for the broken rules errs.
func deny(r *hitlv1.QuestionReply, errs ...*validation.Error) error {
	return validation.Denial(replyKind, r.Name, errs...)
}
