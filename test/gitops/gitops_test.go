// Package gitops runs a real Flux against the local control plane:
// source-controller and kustomize-controller (built by hack/flux-assets.sh)
// as processes, a Git server on a loopback port (git http-backend), and a
// tenant whose Kustomization applies, as its own ServiceAccount, what the
// test pushes. Run it with `make test-gitops`, which builds Flux first;
// without the binaries the test skips, so that `go test ./...` passes.
package gitops

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/testenv"
)

// tenant is the namespace whose Kustomization applies the repository's
// deploy/ directory.
const tenant = "apps"

// tenantManifest sets a tenant up as `flux create tenant` and the Flux
// multi-tenancy guide do: a ServiceAccount bound to cluster-admin by a
// RoleBinding, so that what it applies stays inside its namespace, and a
// Kustomization that impersonates it. The GitRepository polls every 2s;
// the Kustomization reconciles when a new artifact appears, so its own
// interval only matters for drift. wait: true makes Ready mean every
// applied object passed kstatus's health check.
func tenantManifest(url string) string {
	return `
apiVersion: v1
kind: Namespace
metadata: {name: apps}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: dev-team, namespace: apps}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: gotk-reconciler, namespace: apps}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
  - {kind: ServiceAccount, name: dev-team, namespace: apps}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: apps, namespace: apps}
spec:
  interval: 2s
  url: ` + url + `
  ref: {branch: main}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: apps}
spec:
  interval: 10m
  timeout: 1m
  sourceRef: {kind: GitRepository, name: apps}
  path: ./deploy
  prune: true
  wait: true
  serviceAccountName: dev-team
`
}

// base is in every commit: pruning must leave it alone.
const base = `apiVersion: v1
kind: ConfigMap
metadata: {name: base, namespace: apps}
data: {kept: "yes"}
`

// greeting is added by one commit and deleted by the next. The question
// shows hitl's CRDs go through Flux's apply and health checks; no manager
// runs, so it has no status and kstatus reads it as Current.
const greeting = `apiVersion: v1
kind: ConfigMap
metadata: {name: greeting, namespace: apps}
data: {hello: world}
---
apiVersion: hitl.dev/v1alpha1
kind: UserQuestion
metadata: {name: ship-it, namespace: apps}
spec:
  agent: release-bot
  questions:
    - id: go
      question: Ship it?
      options: [{label: "yes"}, {label: "no"}]
`

// escape is outside the tenant's namespace.
const escape = `apiVersion: v1
kind: Namespace
metadata: {name: escape}
`

var kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}

func TestFluxAppliesAndPrunesPushedCommits(t *testing.T) {
	flux := fluxAssets(testenv.Root())
	for _, b := range []string{"source-controller", "kustomize-controller"} {
		if _, err := os.Stat(filepath.Join(flux, b)); err != nil {
			t.Skipf("no Flux: %v (run `make test-gitops`, which builds it with hack/flux-assets.sh)", err)
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("no git: %v (apt-get install git)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(2 * time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)

	env := gitEnv(t)
	server := startGitServer(t, env)
	url := server.newRepository(t, "apps")
	repo := newWorktree(t, env, url)
	repo.write("deploy/base.yaml", base)
	first := repo.commit("Add the base ConfigMap")
	repo.push()

	c := startFlux(ctx, t, flux)
	apply(ctx, t, c, tenantManifest(url))
	g.Eventually(appliedRevision(ctx, c)).Should(Equal("main@sha1:"+first), "Flux applies the first commit")

	repo.write("deploy/greeting.yaml", greeting)
	added := repo.commit("Add the greeting ConfigMap and a question")
	pushed := time.Now()
	repo.push()
	g.Eventually(get(ctx, c, "greeting", &corev1.ConfigMap{})).Should(Succeed())
	t.Logf("git push to the ConfigMap applied: %s", time.Since(pushed).Round(time.Millisecond))
	g.Eventually(appliedRevision(ctx, c)).Should(Equal("main@sha1:" + added))
	t.Logf("git push to the Kustomization Ready at the commit: %s", time.Since(pushed).Round(time.Millisecond))
	cm := &corev1.ConfigMap{}
	g.Expect(get(ctx, c, "greeting", cm)()).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"hello": "world"}))
	g.Expect(cm.Labels).To(HaveKeyWithValue("kustomize.toolkit.fluxcd.io/name", "apps"), "kustomize-controller applied it")
	g.Expect(get(ctx, c, "ship-it", &hitlv1.UserQuestion{})()).To(Succeed())

	repo.git("rm", "--quiet", "deploy/greeting.yaml")
	removed := repo.commit("Remove the greeting ConfigMap and the question")
	pushed = time.Now()
	repo.push()
	g.Eventually(get(ctx, c, "greeting", &corev1.ConfigMap{})).Should(Satisfy(apierrors.IsNotFound))
	t.Logf("git push to the ConfigMap pruned: %s", time.Since(pushed).Round(time.Millisecond))
	g.Eventually(get(ctx, c, "ship-it", &hitlv1.UserQuestion{})).Should(Satisfy(apierrors.IsNotFound))
	g.Eventually(appliedRevision(ctx, c)).Should(Equal("main@sha1:" + removed))
	g.Expect(get(ctx, c, "base", &corev1.ConfigMap{})()).To(Succeed(), "pruning keeps what the commit still has")

	// The tenant's RoleBinding stops at its namespace: a commit with a
	// Namespace fails as the ServiceAccount, and nothing of it is applied.
	repo.write("deploy/escape.yaml", escape)
	repo.commit("Add a Namespace the tenant may not create")
	repo.push()
	g.Eventually(appliedRevision(ctx, c)).Should(And(HavePrefix("not Ready: "),
		ContainSubstring(`"system:serviceaccount:apps:dev-team" cannot`)), "kustomize-controller applies as the tenant")
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "escape"}, &corev1.Namespace{})).To(Satisfy(apierrors.IsNotFound))
}

// startFlux starts the control plane with the CRDs of flux/crds and runs
// source-controller and kustomize-controller against it, each as its
// ServiceAccount. kustomize-controller fetches artifacts from
// source-controller's artifact server on a loopback port.
func startFlux(ctx context.Context, t *testing.T, flux string) client.Client {
	t.Helper()
	cfg, c := startControlPlane(t, filepath.Join(flux, "crds"))
	apply(ctx, t, c, controllerIdentities)
	dir := t.TempDir()
	storage := freePort(t)
	startController(t, flux, "source-controller", controllerKubeconfig(ctx, t, cfg, c, dir, "source-controller"),
		"--storage-path="+t.TempDir(), "--storage-addr="+storage, "--storage-adv-addr="+storage)
	startController(t, flux, "kustomize-controller", controllerKubeconfig(ctx, t, cfg, c, dir, "kustomize-controller"))
	return c
}

// get returns a function that reads the tenant's object name into obj.
func get(ctx context.Context, c client.Client, name string, obj client.Object) func() error {
	return func() error { return c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: name}, obj) }
}

// appliedRevision returns a function that reads the Kustomization's
// lastAppliedRevision once it is Ready for its current generation, else
// why it is not, so that a failed wait shows Flux's message.
func appliedRevision(ctx context.Context, c client.Client) func() (string, error) {
	return func() (string, error) {
		k := &unstructured.Unstructured{}
		k.SetGroupVersionKind(kustomizationGVK)
		if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "apps"}, k); err != nil {
			return "", err
		}
		observed, _, _ := unstructured.NestedInt64(k.Object, "status", "observedGeneration")
		if observed != k.GetGeneration() {
			return "not reconciled yet", nil
		}
		if ok, message := ready(k); !ok {
			return "not Ready: " + message, nil
		}
		revision, _, _ := unstructured.NestedString(k.Object, "status", "lastAppliedRevision")
		return revision, nil
	}
}

// ready says whether an object's Ready condition is True, and its message.
func ready(u *unstructured.Unstructured) (bool, string) {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			message, _ := m["message"].(string)
			return m["status"] == "True", message
		}
	}
	return false, "no Ready condition"
}
