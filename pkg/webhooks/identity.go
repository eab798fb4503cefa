// Package webhooks holds hitl's admission webhooks: they default and check
// UserQuestions and QuestionReplies at the API server, so that a person or a
// GitOps tool applying a bad object learns why at once, and so that
// identities cannot be forged. The controller repeats every check that
// matters, because a webhook can be raced or bypassed.
package webhooks

import (
	"context"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// The RBAC verbs on resource "agents" (group hitl.dev, resource name = the
// agent) that grant asking as, and answering for, an agent.
const (
	VerbAsk    = "ask"
	VerbAnswer = "answer"
	// AgentsResource is the RBAC resource the verbs are checked on.
	AgentsResource = "agents"
)

// requestUser returns the authenticated user of the admission request.
func requestUser(ctx context.Context) (authenticationv1.UserInfo, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return authenticationv1.UserInfo{}, apierrors.NewInternalError(fmt.Errorf("no admission request in context: %w", err))
	}
	return req.UserInfo, nil
}

// authorizer asks the API server whether a user may use a verb on an agent.
type authorizer struct {
	client client.Client
}

func (a authorizer) allowed(ctx context.Context, user authenticationv1.UserInfo, verb, namespace, agent string) (bool, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group: hitlv1.GroupVersion.Group, Resource: AgentsResource, Verb: verb, Name: agent, Namespace: namespace,
		},
	}}
	if err := a.client.Create(ctx, sar); err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("checking whether %s may %s as agent %s: %w", user.Username, verb, agent, err))
	}
	return sar.Status.Allowed, nil
}

// serviceAccount splits "system:serviceaccount:<namespace>:<name>"; ok is
// false when the names are not ones a namespace and a ServiceAccount can
// have (the API reader would refuse to look such a ServiceAccount up).
func serviceAccount(username string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(username, "system:serviceaccount:")
	if !found {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	return namespace, name, ok && len(utilvalidation.IsDNS1123Label(namespace)) == 0 && len(utilvalidation.IsDNS1123Subdomain(name)) == 0
}

// denial is the error a webhook returns for a broken rule: its message
// starts with the code.
func denial(code hitlv1.ErrorCode, format string, args ...any) error {
	return fmt.Errorf("%s: %s", code, fmt.Sprintf(format, args...))
}
