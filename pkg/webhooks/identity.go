// Package webhooks holds hitl's admission webhooks, which are optional: the
// default install checks identity and authorization with admission policies
// inside the API server (config/policies). The mutating webhooks stamp what
// the mutating policies stamp, for clusters without MutatingAdmissionPolicy
// (webhook mode, config/webhook-mode); the validating reply webhook gives a
// person applying a reply immediate feedback on checks that need the
// question (config/webhook-feedback). Both run with failurePolicy Ignore
// where they can: the controller repeats every check that matters.
package webhooks

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/access"
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

// denial is the error a webhook returns for a broken rule: its message
// starts with the code.
func denial(code hitlv1.ErrorCode, format string, args ...any) error {
	return fmt.Errorf("%s: %s", code, fmt.Sprintf(format, args...))
}
