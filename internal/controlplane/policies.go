package controlplane

// Admission as the default install sets it up: the admission policies of
// config/policies, rendered through config/default, installed into the
// local control plane, and waited for until the API server enforces them.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Admission is how a test cluster admits questions and replies.
type Admission int

const (
	// Policies is the default install: admission policies only, no webhook.
	Policies Admission = iota
	// Feedback adds the optional validating reply webhook
	// (config/webhook-feedback) to the policies.
	Feedback
	// WebhookMode is the install for clusters without
	// MutatingAdmissionPolicy (config/webhook-mode): the validating
	// policies, and the mutating webhooks in place of the mutating ones.
	WebhookMode
)

func (a Admission) String() string {
	return [...]string{"policies", "feedback", "webhooks"}[a]
}

// ParseAdmission reads the name String gives a mode.
func ParseAdmission(name string) (Admission, error) {
	for _, a := range []Admission{Policies, Feedback, WebhookMode} {
		if a.String() == name {
			return a, nil
		}
	}
	return 0, fmt.Errorf("unknown admission mode %q (want policies, feedback or webhooks)", name)
}

// Webhooks reports whether the manager serves webhooks in this mode.
func (a Admission) Webhooks() bool { return a != Policies }

// AdmissionObjects renders config/default and returns its admission
// policies, their bindings and their parameter ConfigMap, in the order to
// create them: the mutating policies (none in webhook mode), then the
// validating ones, each kind's question-agent-label or question-identity
// policy and binding last (WaitForPolicies probes those).
func AdmissionObjects(mode Admission) ([]*unstructured.Unstructured, error) {
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(Root(), "config", "default"))
	if err != nil {
		return nil, fmt.Errorf("rendering config/default: %w", err)
	}
	rank := map[string]int{"ConfigMap": 0, "MutatingAdmissionPolicy": 1, "MutatingAdmissionPolicyBinding": 1, "ValidatingAdmissionPolicy": 2, "ValidatingAdmissionPolicyBinding": 2}
	var first, last [3][]*unstructured.Unstructured
	for _, r := range resources.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, err
		}
		o := &unstructured.Unstructured{Object: m}
		group := rank[o.GetKind()]
		switch {
		case o.GetKind() == "ConfigMap":
		case !strings.HasSuffix(o.GetKind(), "AdmissionPolicy") && !strings.HasSuffix(o.GetKind(), "AdmissionPolicyBinding"):
			continue
		case mode == WebhookMode && strings.HasPrefix(o.GetKind(), "Mutating"):
			continue
		default:
			o.SetNamespace("") // cluster-scoped; kustomize does not know these kinds
		}
		if strings.HasSuffix(o.GetName(), "question-agent-label") || strings.HasSuffix(o.GetName(), "question-identity") {
			last[group] = append(last[group], o)
		} else {
			first[group] = append(first[group], o)
		}
	}
	var out []*unstructured.Unstructured
	for g := range first {
		out = append(append(out, first[g]...), last[g]...)
	}
	return out, nil
}

// InstallAdmission creates the admission objects of mode (and the install
// namespace their parameters live in) with an admin client c, sets the
// largest timeout to maxTimeout when it is not zero, and waits until the API
// server enforces them.
func InstallAdmission(ctx context.Context, c client.Client, mode Admission, maxTimeout time.Duration) error {
	install, err := DefaultInstall()
	if err != nil {
		return err
	}
	objs, err := AdmissionObjects(mode)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && maxTimeout > 0 {
			_ = unstructured.SetNestedField(o.Object, maxTimeout.String(), "data", "maxTimeout")
		}
	}
	if err := install.create(ctx, c, objs); err != nil {
		return err
	}
	return WaitForPolicies(ctx, c, install.Namespace, mode != WebhookMode, 120*time.Second)
}

// WaitForPolicies waits until the API server enforces the validating
// policies (it refuses a question whose agent label conflicts, and one whose
// timeout is above the configured maximum) and, when mutating is true, the
// mutating ones (it sets a question's agent label), probing with dry-run
// creations in namespace. The API server loads policies, bindings and
// parameters from watches, in the order they were created.
func WaitForPolicies(ctx context.Context, c client.Client, namespace string, mutating bool, timeout time.Duration) error {
	var maxTimeout time.Duration
	install, err := DefaultInstall()
	if err != nil {
		return err
	}
	probe := func() error {
		cm := &corev1.ConfigMap{}
		var err error
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: install.NamePrefix + "admission"}, cm); err != nil {
			return err
		}
		if maxTimeout, err = time.ParseDuration(cm.Data["maxTimeout"]); err != nil {
			return fmt.Errorf("admission ConfigMap: maxTimeout: %w", err)
		}
		conflict := probeQuestion(namespace)
		conflict.Labels = map[string]string{hitlv1.AgentLabel: "someone-else"}
		if err := c.Create(ctx, conflict, client.DryRunAll); err == nil || !strings.Contains(err.Error(), string(hitlv1.CodeAgentMismatch)) {
			return fmt.Errorf("a conflicting agent label is not refused yet (%v)", err)
		}
		long := probeQuestion(namespace)
		long.Spec.Timeout = &metav1.Duration{Duration: maxTimeout + time.Millisecond}
		if err := c.Create(ctx, long, client.DryRunAll); err == nil || !strings.Contains(err.Error(), string(hitlv1.CodeBadTimeout)) {
			return fmt.Errorf("a timeout above %s is not refused yet (%v)", maxTimeout, err)
		}
		if !mutating {
			return nil
		}
		labelled := probeQuestion(namespace)
		if err := c.Create(ctx, labelled, client.DryRunAll); err != nil {
			return err
		}
		if labelled.Labels[hitlv1.AgentLabel] != labelled.Spec.Agent {
			return errors.New("the agent label is not set yet")
		}
		return nil
	}
	deadline := time.Now().Add(timeout)
	for {
		err := probe()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the admission policies are not enforced after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// probeQuestion is a valid ask, for dry-run probes.
func probeQuestion(namespace string) *hitlv1.UserQuestion {
	return &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "admission-probe-", Namespace: namespace},
		Spec:       hitlv1.UserQuestionSpec{Agent: "admission-probe", Questions: []hitlv1.Question{{ID: "probe", Question: "Is admission up?"}}},
	}
}

// GrantAnswering lets every authenticated user answer every agent, with an
// admin client c: for suites that test the controller alone, whose replies
// carry a made-up author that the controller checks.
func GrantAnswering(ctx context.Context, c client.Client) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-answer-every-agent"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{hitlv1.GroupVersion.Group}, Resources: []string{hitlv1.AgentsResource}, Verbs: []string{hitlv1.VerbAnswer}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("granting answer on every agent: %w", err)
		}
	}
	return nil
}
