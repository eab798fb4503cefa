package kubeclient

import (
	"os"
	"path/filepath"
	"testing"
)

func TestNamespaceIsThePodsElseTheKubeconfigContexts(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: agents}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)

	sa := filepath.Join(dir, "namespace")
	if ns, err := namespace(sa); err != nil || ns != "agents" {
		t.Errorf("outside a Pod: namespace %q, %v; want the context's, agents", ns, err)
	}
	if err := os.WriteFile(sa, []byte("team-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ns, err := namespace(sa); err != nil || ns != "team-a" {
		t.Errorf("in a Pod: namespace %q, %v; want the Pod's, team-a", ns, err)
	}
}
