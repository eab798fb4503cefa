package testenv

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GrantWait is how long AwaitGrant waits for the authorizer by default: it
// learns of roles and bindings from watches, which a loaded machine may
// deliver seconds late.
const GrantWait = 30 * time.Second

// AwaitGrant waits until the API server's authorizer lets subject do what
// rules grant in namespace ns ("" for a ClusterRoleBinding's cluster-wide
// grant): every verb on every resource (and resource name) they list, as
// SubjectAccessReviews that c, an admin, creates. A Role or binding just
// written reaches the RBAC authorizer through its informers; a request made
// before it did is denied.
func AwaitGrant(ctx context.Context, c client.Client, ns string, subject rbacv1.Subject, rules []rbacv1.PolicyRule, timeout time.Duration) error {
	user, groups, err := subjectUser(subject)
	if err != nil {
		return err
	}
	for _, spec := range reviews(ns, rules) {
		spec.User, spec.Groups = user, groups
		var last error
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			review := &authorizationv1.SubjectAccessReview{Spec: spec}
			if last = c.Create(ctx, review); last != nil {
				return false, nil
			}
			return review.Status.Allowed, nil
		})
		if err != nil {
			what := fmt.Sprintf("%+v", spec.NonResourceAttributes)
			if ra := spec.ResourceAttributes; ra != nil {
				what = fmt.Sprintf("%s %s/%s %q in namespace %q", ra.Verb, ra.Group, ra.Resource, ra.Name, ns)
			}
			return fmt.Errorf("%s %s may not %s after %s (last error: %v)", subject.Kind, subject.Name, what, timeout, last)
		}
	}
	return nil
}

// subjectUser is the user and groups a request by subject carries.
func subjectUser(s rbacv1.Subject) (string, []string, error) {
	switch s.Kind {
	case rbacv1.UserKind:
		return s.Name, []string{"system:authenticated"}, nil
	case rbacv1.ServiceAccountKind:
		return "system:serviceaccount:" + s.Namespace + ":" + s.Name,
			[]string{"system:serviceaccounts", "system:serviceaccounts:" + s.Namespace, "system:authenticated"}, nil
	case rbacv1.GroupKind:
		return "hitl-test-member-of-" + s.Name, []string{s.Name, "system:authenticated"}, nil
	}
	return "", nil, fmt.Errorf("a subject of kind %q", s.Kind)
}

// reviews lists the requests that rules allow in ns, one per verb,
// resource and resource name, or verb and non-resource URL.
func reviews(ns string, rules []rbacv1.PolicyRule) []authorizationv1.SubjectAccessReviewSpec {
	var out []authorizationv1.SubjectAccessReviewSpec
	for _, r := range rules {
		for _, path := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				out = append(out, authorizationv1.SubjectAccessReviewSpec{
					NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: v}})
			}
		}
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				resource, subresource, _ := strings.Cut(res, "/")
				for _, v := range r.Verbs {
					for _, name := range names {
						out = append(out, authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
							Namespace: ns, Group: g, Resource: resource, Subresource: subresource, Verb: v, Name: name}})
					}
				}
			}
		}
	}
	return out
}

// AwaitBinding waits until the authorizer lets every subject of a binding
// to roleRef (a Role of ns, or a ClusterRole) do what the role grants, in
// ns ("" for a ClusterRoleBinding). It reads the role's rules from the API
// server.
func AwaitBinding(ctx context.Context, c client.Client, ns string, roleRef rbacv1.RoleRef, subjects []rbacv1.Subject, timeout time.Duration) error {
	var rules []rbacv1.PolicyRule
	switch roleRef.Kind {
	case "Role":
		role := &rbacv1.Role{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: roleRef.Name}, role); err != nil {
			return err
		}
		rules = role.Rules
	case "ClusterRole":
		role := &rbacv1.ClusterRole{}
		if err := c.Get(ctx, client.ObjectKey{Name: roleRef.Name}, role); err != nil {
			return err
		}
		rules = role.Rules
	default:
		return fmt.Errorf("a role of kind %q", roleRef.Kind)
	}
	for _, s := range subjects {
		if err := AwaitGrant(ctx, c, ns, s, rules, timeout); err != nil {
			return err
		}
	}
	return nil
}
