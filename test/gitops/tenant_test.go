package gitops

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hitl-dev/hitl/test/testenv"
)

// tenant is a team that answers by commit: a namespace with the
// ServiceAccount its Kustomization applies as, bound in the agents'
// namespace to a role; a repository on the Git server; and the
// GitRepository and Kustomization (both named answers) that apply the
// repository's answers/ directory. Each scenario has its own, so that
// scenarios run in parallel and one's Kustomization never sees another's
// commits.
type tenant struct {
	w    *world
	ns   string
	repo *worktree
	// first is the SHA of the repository's first commit, which holds no
	// reply.
	first string
}

// The tenant's ServiceAccount, and the name of its GitRepository and
// Kustomization.
const (
	tenantSA = "gitops"
	answers  = "answers"
)

// answeringTenant is a tenant's objects. The tenant's ServiceAccount is
// bound to role in the agents' namespace, where its reply files land, and
// has no rights anywhere else, its own namespace included. The
// Kustomization is as `flux create kustomization` with --prune --wait
// --service-account would write it: it applies as the tenant, prunes what a
// commit removes, and is Ready only once every reply it applied is
// healthy (kstatus Current); its interval is long, so that the scenarios
// decide when it reconciles (a new commit, or reconcile).
func answeringTenant(ns, role, url string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: gitops, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[1]s-gitops, namespace: agents}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[2]s}
subjects:
  - {kind: ServiceAccount, name: gitops, namespace: %[1]s}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: answers, namespace: %[1]s}
spec:
  interval: 2s
  url: %[3]s
  ref: {branch: main}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: answers, namespace: %[1]s}
spec:
  interval: 10m
  timeout: 30s
  sourceRef: {kind: GitRepository, name: answers}
  path: ./answers
  prune: true
  wait: true
  serviceAccountName: gitops
`, ns, role, url)
}

// newTenant sets up a tenant whose ServiceAccount is bound to role, and
// waits until its Kustomization is Ready at the repository's first
// commit.
func newTenant(ctx context.Context, t *testing.T, w *world, ns, role string) *tenant {
	t.Helper()
	url := w.git.newRepository(t, ns)
	k := &tenant{w: w, ns: ns, repo: newWorktree(t, w.gitEnv, url)}
	k.repo.write("answers/README.md", "Replies to hitl's questions, written by `kubectl hitl answer --to-file`.\n")
	k.first = k.repo.commit("Start the answers")
	k.repo.push()
	apply(ctx, t, w.admin, answeringTenant(ns, role, url))
	binding := &rbacv1.RoleBinding{}
	if err := w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: ns + "-gitops"}, binding); err != nil {
		t.Fatal(err)
	}
	if err := testenv.AwaitBinding(ctx, w.admin, agents, binding.RoleRef, binding.Subjects, testenv.GrantWait); err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(k.applied(ctx), time.Minute, 50*time.Millisecond).Should(Equal(revision(k.first)), "Flux applies the tenant's first commit")
	return k
}

// username is the user the tenant's Kustomization applies as.
func (k *tenant) username() string { return "system:serviceaccount:" + k.ns + ":" + tenantSA }

// revision is how Flux names a commit of main.
func revision(sha string) string { return "main@sha1:" + sha }

// applied returns a function that reads the Kustomization's applied
// revision once it is Ready, else why not (see appliedRevision).
func (k *tenant) applied(ctx context.Context) func() (string, error) {
	return appliedRevision(ctx, k.w.admin, k.ns, answers)
}

// kustomization reads the tenant's Kustomization.
func (k *tenant) kustomization(ctx context.Context) (*unstructured.Unstructured, error) {
	return readKustomization(ctx, k.w.admin, k.ns, answers)
}

// reconcile asks kustomize-controller to reconcile the Kustomization now,
// as `flux reconcile kustomization` does (annotation
// reconcile.fluxcd.io/requestedAt), waits until it has handled the
// request, and returns the Kustomization as that reconciliation left it.
func (k *tenant) reconcile(ctx context.Context, t *testing.T) *unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	requested := requestReconcile(ctx, t, k.w.admin, kustomizationGVK, k.ns, answers)
	var ks *unstructured.Unstructured
	g.Eventually(func() (string, error) {
		u, err := k.kustomization(ctx)
		if err != nil {
			return "", err
		}
		handled, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt")
		ks = u
		return handled, nil
	}, time.Minute, 50*time.Millisecond).Should(Equal(requested), "kustomize-controller handles the reconcile request")
	return ks
}

// requestReconcile asks a Flux controller to reconcile an object now, as
// `flux reconcile` and a Receiver do (annotation
// reconcile.fluxcd.io/requestedAt), and returns the request's value.
func requestReconcile(ctx context.Context, t *testing.T, c client.Client, gvk schema.GroupVersionKind, ns, name string) string {
	t.Helper()
	requested := time.Now().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, requested)
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(ns)
	obj.SetName(name)
	if err := c.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
	return requested
}

// suspend sets the Kustomization's spec.suspend, as `flux suspend` and
// `flux resume` do.
func (k *tenant) suspend(ctx context.Context, t *testing.T, suspended bool) {
	t.Helper()
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(kustomizationGVK)
	ks.SetNamespace(k.ns)
	ks.SetName(answers)
	patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspended)
	if err := k.w.admin.Patch(ctx, ks, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// sourceRevision returns a function that reads the revision of the
// artifact source-controller made of the tenant's repository.
func (k *tenant) sourceRevision(ctx context.Context) func() (string, error) {
	return func() (string, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gitRepositoryGVK)
		if err := k.w.admin.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: answers}, u); err != nil {
			return "", err
		}
		rev, _, _ := unstructured.NestedString(u.Object, "status", "artifact", "revision")
		return rev, nil
	}
}

var (
	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
	gitRepositoryGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}
)

// readKustomization reads a Kustomization.
func readKustomization(ctx context.Context, c client.Client, ns, name string) (*unstructured.Unstructured, error) {
	k := &unstructured.Unstructured{}
	k.SetGroupVersionKind(kustomizationGVK)
	return k, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, k)
}

// appliedRevision returns a function that reads a Kustomization's
// lastAppliedRevision once it is Ready for its current generation, else
// why it is not, so that a failed wait shows Flux's message.
func appliedRevision(ctx context.Context, c client.Client, ns, name string) func() (string, error) {
	return func() (string, error) {
		k, err := readKustomization(ctx, c, ns, name)
		if err != nil {
			return "", err
		}
		observed, _, _ := unstructured.NestedInt64(k.Object, "status", "observedGeneration")
		if observed != k.GetGeneration() {
			return "not reconciled yet", nil
		}
		if status, message := condition(k, "Ready"); status != "True" {
			return "not Ready: " + message, nil
		}
		revision, _, _ := unstructured.NestedString(k.Object, "status", "lastAppliedRevision")
		return revision, nil
	}
}

// condition is the status and message of an object's condition, or
// "Missing".
func condition(u *unstructured.Unstructured, kind string) (status, message string) {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == kind {
			status, _ := m["status"].(string)
			message, _ := m["message"].(string)
			return status, message
		}
	}
	return "Missing", "no " + kind + " condition"
}

// conditions summarises an object's conditions as "Type=Status" words.
func conditions(u *unstructured.Unstructured) string {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []string
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			out = append(out, fmt.Sprintf("%v=%v", m["type"], m["status"]))
		}
	}
	return strings.Join(out, " ")
}
