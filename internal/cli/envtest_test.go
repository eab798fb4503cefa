package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/testenv"
)

// The tests that drive kubectl hitl against a real API server share one
// local control plane with hitl's webhooks and controller (test/testenv),
// started by the first test that needs it and stopped by TestMain.
var (
	cluster testenv.Shared

	pluginOnce sync.Once
	pluginDir  string
	pluginErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	cluster.Stop()
	if pluginDir != "" {
		_ = os.RemoveAll(pluginDir)
	}
	os.Exit(code)
}

// startCluster returns the shared local control plane, starting it once.
func startCluster(t *testing.T) *testenv.Cluster {
	t.Helper()
	return cluster.Get(t)
}

// kubeconfig writes a kubeconfig for user (created in the control plane)
// and returns its path.
func kubeconfig(t *testing.T, k *testenv.Cluster, user envtest.User) string {
	t.Helper()
	u, err := k.Env.AddUser(user, k.Config)
	if err != nil {
		t.Fatal(err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// adminKubeconfig is a kubeconfig of a cluster admin.
func adminKubeconfig(t *testing.T, k *testenv.Cluster) string {
	return kubeconfig(t, k, envtest.User{Name: "cli-admin", Groups: []string{"system:masters"}})
}

func newNamespace(t *testing.T, k *testenv.Cluster) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cli-"}}
	if err := k.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// plugin builds cmd/kubectl-hitl, the real binary, once, and returns its path.
func plugin(t *testing.T) string {
	t.Helper()
	pluginOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			pluginErr = fmt.Errorf("building kubectl-hitl needs go on PATH: %w", err)
			return
		}
		if pluginDir, pluginErr = os.MkdirTemp("", "kubectl-hitl-"); pluginErr != nil {
			return
		}
		build := exec.Command(goTool, "build", "-o", filepath.Join(pluginDir, "kubectl-hitl"), "./cmd/kubectl-hitl")
		build.Dir = testenv.Root()
		if out, err := build.CombinedOutput(); err != nil {
			pluginErr = fmt.Errorf("building kubectl-hitl: %v\n%s", err, out)
		}
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	return filepath.Join(pluginDir, "kubectl-hitl")
}

// getQuestion reads a question as the admin.
func getQuestion(t *testing.T, k *testenv.Cluster, ns, name string) (*hitlv1.UserQuestion, error) {
	t.Helper()
	q := &hitlv1.UserQuestion{}
	err := k.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, q)
	return q, err
}

// eventually polls cond every 50 ms until it is true, or fails the test
// after timeout with what describe says.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %s", timeout, describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
