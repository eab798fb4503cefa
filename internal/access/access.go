// Package access asks the API server's authorizer whether a user may ask as,
// or answer for, an agent: RBAC verb "ask" or "answer" on resource "agents"
// of group hitl.dev, named after the agent. The admission policies make the
// same check inside the API server; the controller and the webhooks make it
// with a SubjectAccessReview, for the identity stamped on a reply.
package access

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// Subject is the user whose access is checked.
type Subject struct {
	Username string
	UID      string
	Groups   []string
	// Extra is the authenticator's extra information, when known (an
	// admission request has it; an identity stamped on a reply does not).
	Extra map[string][]string
}

// SubjectOf is the subject a reply's stamped identity names.
func SubjectOf(u *hitlv1.UserInfo) Subject {
	if u == nil {
		return Subject{}
	}
	return Subject{Username: u.Username, UID: u.UID, Groups: u.Groups}
}

// Allowed reports whether subject may use verb (hitlv1.VerbAsk or
// hitlv1.VerbAnswer) on the named agent in namespace, by creating a
// SubjectAccessReview with c.
func Allowed(ctx context.Context, c client.Client, subject Subject, verb, namespace, agent string) (allowed bool, reason string, err error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(subject.Extra))
	for k, v := range subject.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: subject.Username, UID: subject.UID, Groups: subject.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group: hitlv1.GroupVersion.Group, Resource: hitlv1.AgentsResource, Verb: verb, Name: agent, Namespace: namespace,
		},
	}}
	if err := c.Create(ctx, sar); err != nil {
		return false, "", fmt.Errorf("checking whether %s may %s as agent %s: %w", subject.Username, verb, agent, err)
	}
	return sar.Status.Allowed && !sar.Status.Denied, sar.Status.Reason, nil
}

// ForbiddenAnswer is the message of a FORBIDDEN denial or rejection: user
// may not answer the questions of agent.
func ForbiddenAnswer(user, agent string) *validation.Error {
	return &validation.Error{Code: hitlv1.CodeForbidden, Field: "spec.answeredBy",
		Rule: fmt.Sprintf("user %q may not answer the questions of agent %q: it needs RBAC verb %q on %s.%s/%s",
			user, agent, hitlv1.VerbAnswer, hitlv1.AgentsResource, hitlv1.GroupVersion.Group, agent)}
}

// ServiceAccountOf splits the username of a ServiceAccount,
// "system:serviceaccount:<namespace>:<name>"; ok is false for any other
// user.
func ServiceAccountOf(username string) (namespace, name string, ok bool) {
	parts := strings.Split(username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" || parts[2] == "" || parts[3] == "" {
		return "", "", false
	}
	return parts[2], parts[3], true
}
