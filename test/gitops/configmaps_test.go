package gitops

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// apps is the namespace whose Kustomization applies the repository's
// deploy/ directory.
const apps = "apps"

// appsTenant sets a tenant up as `flux create tenant` and the Flux
// multi-tenancy guide do: a ServiceAccount bound to cluster-admin by a
// RoleBinding, so that what it applies stays inside its namespace, and a
// Kustomization that impersonates it. The GitRepository polls every 2s;
// the Kustomization reconciles when a new artifact appears, so its own
// interval only matters for drift. wait: true makes Ready mean every
// applied object passed kstatus's health check.
func appsTenant(url string) string {
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

// greeting is added by one commit and deleted by the next. (hitl's kinds
// go through Flux's apply, health checks and prune in the answering
// scenarios.)
const greeting = `apiVersion: v1
kind: ConfigMap
metadata: {name: greeting, namespace: apps}
data: {hello: world}
`

// escape is outside the tenant's namespace.
const escape = `apiVersion: v1
kind: Namespace
metadata: {name: escape}
`

func testAppliesAndPrunes(ctx context.Context, t *testing.T, w *world) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c := w.admin
	applied := appliedRevision(ctx, c, apps, "apps")

	url := w.git.newRepository(t, "apps")
	repo := newWorktree(t, w.gitEnv, url)
	repo.write("deploy/base.yaml", base)
	first := repo.commit("Add the base ConfigMap")
	repo.push()
	apply(ctx, t, c, appsTenant(url))
	g.Eventually(applied).Should(Equal(revision(first)), "Flux applies the first commit")

	repo.write("deploy/greeting.yaml", greeting)
	added := repo.commit("Add the greeting ConfigMap")
	pushed := time.Now()
	repo.push()
	g.Eventually(get(ctx, c, "greeting", &corev1.ConfigMap{})).Should(Succeed())
	t.Logf("git push to the ConfigMap applied: %s", time.Since(pushed).Round(time.Millisecond))
	g.Eventually(applied).Should(Equal(revision(added)))
	t.Logf("git push to the Kustomization Ready at the commit: %s", time.Since(pushed).Round(time.Millisecond))
	cm := &corev1.ConfigMap{}
	g.Expect(get(ctx, c, "greeting", cm)()).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"hello": "world"}))
	g.Expect(cm.Labels).To(HaveKeyWithValue("kustomize.toolkit.fluxcd.io/name", "apps"), "kustomize-controller applied it")

	repo.git("rm", "--quiet", "deploy/greeting.yaml")
	removed := repo.commit("Remove the greeting ConfigMap")
	pushed = time.Now()
	repo.push()
	g.Eventually(get(ctx, c, "greeting", &corev1.ConfigMap{})).Should(Satisfy(apierrors.IsNotFound))
	t.Logf("git push to the ConfigMap pruned: %s", time.Since(pushed).Round(time.Millisecond))
	g.Eventually(applied).Should(Equal(revision(removed)))
	g.Expect(get(ctx, c, "base", &corev1.ConfigMap{})()).To(Succeed(), "pruning keeps what the commit still has")

	// The tenant's RoleBinding stops at its namespace: a commit with a
	// Namespace fails as the ServiceAccount, and nothing of it is applied.
	repo.write("deploy/escape.yaml", escape)
	repo.commit("Add a Namespace the tenant may not create")
	repo.push()
	g.Eventually(applied).Should(And(HavePrefix("not Ready: "),
		ContainSubstring(`"system:serviceaccount:apps:dev-team" cannot`)), "kustomize-controller applies as the tenant")
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "escape"}, &corev1.Namespace{})).To(Satisfy(apierrors.IsNotFound))
}

// get returns a function that reads the object name of apps into obj.
func get(ctx context.Context, c client.Client, name string, obj client.Object) func() error {
	return func() error { return c.Get(ctx, client.ObjectKey{Namespace: apps, Name: name}, obj) }
}
