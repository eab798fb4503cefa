package model_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/testenv"
)

// The identities the operations run as, set up as the tenancy guide says:
// each is a ServiceAccount or a user as the API server sees it (the admin
// impersonates it), bound to the roles hitl ships (config/rbac/examples),
// with grants by agent name. The admin only sets the scene up, reads, and
// pokes questions after a clock step.
const (
	// agent asks every question, as its ServiceAccount. It also holds
	// answer on itself and the answerer's rights on replies (grants bound
	// by mistake), so that its replies to its own questions get past
	// FORBIDDEN to SELF_APPROVAL, and it withdraws them as an answerer does.
	agent = "bot"
	// otherAgent is another agent's ServiceAccount in the namespace.
	otherAgent = "builder"
	// editor is a holder who may also update questions, as a namespace
	// editor may: the ownership policy, not RBAC, refuses its changes.
	editor = "carol"
	// outsider holds hitl-answerer, whose resourceNames do not list the
	// agent: it may reply and claim, but not answer or claim the agent.
	outsider = "mallory"
	// platform is the platform team, which writes ApprovalPolicies
	// (hitl-policy-admin).
	platform = "platform"
)

// holders answer the agent.
var holders = []string{"alice", "bob", editor}

// identity is who an operation runs as, and what it is granted in the
// namespace.
type identity struct {
	name           string
	serviceAccount bool
	// role is the shipped ClusterRole bound to it; rules its own Role.
	role  string
	rules []rbacv1.PolicyRule
	// groups are the groups the API server authenticates it in.
	groups []string
}

var (
	answerAgent = rbacv1.PolicyRule{APIGroups: []string{hitlv1.GroupVersion.Group}, Resources: []string{hitlv1.AgentsResource},
		Verbs: []string{hitlv1.VerbAnswer}, ResourceNames: []string{agent}}
	answerReplies = rbacv1.PolicyRule{APIGroups: []string{hitlv1.GroupVersion.Group}, Resources: []string{"questionreplies"},
		Verbs: []string{"create", "get", "delete"}}
	updateQuestions = rbacv1.PolicyRule{APIGroups: []string{hitlv1.GroupVersion.Group}, Resources: []string{"userquestions"},
		Verbs: []string{"update", "patch"}}
)

var identities = []identity{
	{name: agent, serviceAccount: true, role: "hitl-agent", rules: []rbacv1.PolicyRule{answerAgent, answerReplies}},
	{name: otherAgent, serviceAccount: true, role: "hitl-agent"},
	{name: "alice", role: "hitl-answerer", rules: []rbacv1.PolicyRule{answerAgent}, groups: groupsOf["alice"]},
	{name: "bob", role: "hitl-answerer", rules: []rbacv1.PolicyRule{answerAgent}, groups: groupsOf["bob"]},
	{name: editor, role: "hitl-answerer", rules: []rbacv1.PolicyRule{answerAgent, updateQuestions}, groups: groupsOf[editor]},
	{name: outsider, role: "hitl-answerer"},
	{name: platform, role: "hitl-policy-admin"},
}

// updatesQuestions reports whether RBAC lets an identity update questions
// (hitl-agent, and the editor's grant), so that a change it makes reaches
// the admission policies; hitl-answerer alone does not.
func updatesQuestions(name string) bool {
	return name == agent || name == otherAgent || name == editor
}

// requester is an identity's client, and the username the API server
// stamps for it.
type requester struct {
	username string
	c        client.Client
}

// setUpIdentities installs the shipped ClusterRoles, binds every identity's
// grants in namespace ns, waits until the authorizer applies them, and
// returns a client for each, impersonating it with the admin's cfg.
func setUpIdentities(ctx context.Context, admin client.Client, cfg *rest.Config, ns string) (map[string]requester, error) {
	if err := installExampleRoles(ctx, admin); err != nil {
		return nil, err
	}
	out := map[string]requester{}
	for _, id := range identities {
		subject := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: id.name}
		username := id.name
		if id.serviceAccount {
			subject = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: id.name, Namespace: ns}
			username = "system:serviceaccount:" + ns + ":" + id.name
		}
		roleRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: id.role}
		if err := admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: id.name + "-" + id.role, Namespace: ns},
			RoleRef: roleRef, Subjects: []rbacv1.Subject{subject}}); err != nil {
			return nil, fmt.Errorf("binding %s to %s: %w", id.role, id.name, err)
		}
		if err := testenv.AwaitBinding(ctx, admin, ns, roleRef, []rbacv1.Subject{subject}, testenv.GrantWait); err != nil {
			return nil, err
		}
		if len(id.rules) > 0 {
			role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: id.name, Namespace: ns}, Rules: id.rules}
			binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: id.name, Namespace: ns},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
				Subjects: []rbacv1.Subject{subject}}
			for _, o := range []client.Object{role, binding} {
				if err := admin.Create(ctx, o); err != nil {
					return nil, fmt.Errorf("granting %s its rules: %w", id.name, err)
				}
			}
			if err := testenv.AwaitGrant(ctx, admin, ns, subject, id.rules, testenv.GrantWait); err != nil {
				return nil, err
			}
		}
		as := rest.CopyConfig(cfg)
		as.Impersonate = rest.ImpersonationConfig{UserName: username, Groups: id.groups}
		c, err := client.New(as, client.Options{Scheme: admin.Scheme()})
		if err != nil {
			return nil, err
		}
		out[id.name] = requester{username: username, c: c}
	}
	return out, nil
}

// installExampleRoles creates the ClusterRoles of config/rbac/examples as
// `kubectl apply -f` would.
func installExampleRoles(ctx context.Context, admin client.Client) error {
	dir := filepath.Join(testenv.Root(), "config", "rbac", "examples")
	for _, file := range []string{"hitl_agent.yaml", "hitl_answerer.yaml", "hitl_policy_admin.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			role := &rbacv1.ClusterRole{}
			if err := d.Decode(role); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if err := admin.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
			}
		}
	}
	return nil
}
