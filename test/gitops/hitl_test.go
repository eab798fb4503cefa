package gitops

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hitl-dev/hitl/test/testenv"
)

// agents is the namespace where the agents ask and the tenants' reply
// files land, shared as docs/tenancy.md sets one up.
const agents = "agents"

// agentsManifest sets the agents' namespace up with the roles hitl ships
// (config/rbac/examples): release-bot and office-bot ask as their
// ServiceAccounts, bound to hitl-agent; alice, a person, is bound to
// hitl-answerer, which answers release-bot and office-bot.
const agentsManifest = `
apiVersion: v1
kind: Namespace
metadata: {name: agents}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: release-bot, namespace: agents}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: office-bot, namespace: agents}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: agents-hitl-agent, namespace: agents}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hitl-agent}
subjects:
  - {kind: ServiceAccount, name: release-bot, namespace: agents}
  - {kind: ServiceAccount, name: office-bot, namespace: agents}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-hitl-answerer, namespace: agents}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hitl-answerer}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
`

// buildHitl builds the manager and kubectl-hitl of this tree into a
// directory of t's, in the background, and returns a function that waits
// for the build and returns the directory.
func buildHitl(t *testing.T) func() string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/manager", "./cmd/kubectl-hitl")
	cmd.Dir = testenv.Root()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil { // the set-up failed before it waited
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return func() string {
		t.Helper()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("building the manager and kubectl-hitl: %v\n%s", err, out.String())
		}
		return dir
	}
}

// installHitl installs hitl as config/default does (the admission
// policies, the manager's RBAC), creates the ClusterRoles of
// config/rbac/examples as `kubectl apply -f` would, and runs the manager
// binary of bin as its ServiceAccount, with leader election as it ships.
func installHitl(ctx context.Context, t *testing.T, w *world) {
	t.Helper()
	install, err := testenv.DefaultInstall()
	if err != nil {
		t.Fatal(err)
	}
	if err := install.InstallManagerRBAC(ctx, w.admin); err != nil {
		t.Fatal(err)
	}
	if err := testenv.InstallAdmission(ctx, w.admin, testenv.Policies, 0); err != nil {
		t.Fatal(err)
	}
	installExampleRoles(ctx, t, w.admin)
	ns, name := install.ManagerServiceAccount()
	if err := testenv.AwaitGrant(ctx, w.admin, "", rbacv1.Subject{Kind: "ServiceAccount", Namespace: ns, Name: name},
		[]rbacv1.PolicyRule{{APIGroups: []string{"hitl.dev"}, Resources: []string{"userquestions", "questionreplies"}, Verbs: []string{"list", "watch"}}},
		testenv.GrantWait); err != nil {
		t.Fatal(err)
	}
	startManager(t, w.bin, serviceAccountKubeconfig(ctx, t, w.cfg, w.admin, t.TempDir(), ns, name), ns)
}

// installExampleRoles creates every ClusterRole of config/rbac/examples.
func installExampleRoles(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.Root(), "config", "rbac", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("config/rbac/examples: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			role := &rbacv1.ClusterRole{}
			if err := d.Decode(role); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if err := c.Create(ctx, role); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
		}
	}
}

// startManager runs the manager binary of bin with kubeconfig and waits
// until it leads and its controller has started its workers. Its log goes
// to a file that the test prints when it fails; the end of t stops it.
func startManager(t *testing.T, bin, kubeconfig, namespace string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "manager.log")
	logs, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "manager"), "--kubeconfig", kubeconfig,
		"--leader-elect", "--leader-election-namespace", namespace,
		"--metrics-bind-address=0", "--health-probe-bind-address="+freePort(t))
	cmd.Stdout = logs
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		once := false
		for s.Scan() {
			_, _ = logs.WriteString(s.Text() + "\n")
			if !once && strings.Contains(s.Text(), "Starting workers") {
				once = true
				close(started)
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		stopProcess(t, "the manager", cmd, exited)
		_ = logs.Close()
		if t.Failed() {
			printLog(t, "the manager", logPath)
		}
	})
	select {
	case <-started:
	case <-exited:
		t.Fatalf("the manager exited before it started its workers (log %s)", logPath)
	case <-time.After(time.Minute):
		t.Fatalf("the manager did not start its workers within a minute (log %s)", logPath)
	}
}

// setUpAgents creates the agents' namespace (agentsManifest), waits until
// the authorizer knows its bindings, and writes alice's kubeconfig (a
// client certificate) under dir.
func setUpAgents(ctx context.Context, t *testing.T, w *world, dir string) {
	t.Helper()
	apply(ctx, t, w.admin, agentsManifest)
	for _, b := range []string{"agents-hitl-agent", "alice-hitl-answerer"} {
		binding := &rbacv1.RoleBinding{}
		if err := w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: b}, binding); err != nil {
			t.Fatal(err)
		}
		if err := testenv.AwaitBinding(ctx, w.admin, agents, binding.RoleRef, binding.Subjects, testenv.GrantWait); err != nil {
			t.Fatal(err)
		}
	}
	user, err := w.env.AddUser(envtest.User{Name: "alice"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	w.alice = filepath.Join(dir, "alice.kubeconfig")
	if err := testenv.WriteFileAtomic(w.alice, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// agentClient is a client that acts as the agent's ServiceAccount, with a
// token of the TokenRequest API, as the agent's Pod would.
func agentClient(ctx context.Context, t *testing.T, w *world, agent string) client.WithWatch {
	t.Helper()
	token, _, err := testenv.RequestToken(ctx, w.admin, agents, agent, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: w.cfg.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: w.cfg.CAData}}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// aliceHitl runs `kubectl hitl` as alice in the agents' namespace, in
// dir, and returns what it printed. Without kubectl it runs the plugin
// itself, which is all kubectl would do.
func (w *world) aliceHitl(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	args = append([]string{"hitl", "-n", agents}, args...)
	cmd := exec.Command("kubectl", args...)
	if _, err := exec.LookPath("kubectl"); err != nil {
		cmd = exec.Command(filepath.Join(w.bin, "kubectl-hitl"), args[1:]...)
	}
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+w.alice, "PATH="+w.bin+string(filepath.ListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	t.Logf("[alice] $ kubectl %s\n%s", strings.Join(args, " "), out)
	return string(out), err
}

// shippedRole reads a ClusterRole of config/rbac/examples.
func shippedRole(t *testing.T, file string) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "rbac", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := utilyaml.Unmarshal(data, role); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return role
}
