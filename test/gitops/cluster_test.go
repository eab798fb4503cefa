package gitops

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/hitl-dev/hitl/test/testenv"
)

// startControlPlane starts the local control plane with hitl's CRDs and
// Flux's (from crds) installed; the end of t stops it.
func startControlPlane(t *testing.T, crds string) (*envtest.Environment, *rest.Config, client.Client) {
	t.Helper()
	env := testenv.New()
	env.CRDDirectoryPaths = append(env.CRDDirectoryPaths, crds)
	cfg, c, err := testenv.Start(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the local control plane: %v", err)
		}
	})
	return env, cfg, c
}

// controllerIdentities are the ServiceAccounts the controllers run as.
// Flux's install binds cluster-admin to kustomize-controller (its
// cluster-reconciler binding) and a narrower role to source-controller;
// both get cluster-admin here, since what is under test is the tenant's
// impersonation, not the controllers' own rights.
const controllerIdentities = `
apiVersion: v1
kind: Namespace
metadata: {name: flux-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: source-controller, namespace: flux-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: kustomize-controller, namespace: flux-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: cluster-reconciler-flux-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
  - {kind: ServiceAccount, name: source-controller, namespace: flux-system}
  - {kind: ServiceAccount, name: kustomize-controller, namespace: flux-system}
`

// serviceAccountKubeconfig writes a kubeconfig under dir that
// authenticates as the ServiceAccount namespace/name with a token of the
// TokenRequest API, as a Pod of that ServiceAccount would, and returns its
// path.
func serviceAccountKubeconfig(ctx context.Context, t *testing.T, cfg *rest.Config, c client.Client, dir, namespace, name string) string {
	t.Helper()
	// The token outlives the test's 20-minute timeout.
	token, _, err := testenv.RequestToken(ctx, c, namespace, name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	data, err := testenv.TokenKubeconfig(cfg, name, token, "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, namespace+"-"+name+".kubeconfig")
	if err := testenv.WriteFileAtomic(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// apply creates the objects of a multi-document YAML manifest.
func apply(ctx context.Context, t *testing.T, c client.Client, manifest string) {
	t.Helper()
	for _, doc := range strings.Split(manifest, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}
