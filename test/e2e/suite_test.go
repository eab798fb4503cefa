// Package e2e drives the real binaries (localcp, the manager, kubectl and
// kubectl hitl, and a small Go agent built on pkg/agent) through every path
// of the specification's diagram, with admission as the default install sets
// it up (admission policies, no webhook), and through an outage of the
// manager. Run it with `make test-e2e`.
//
// Every actor runs with the identity and the role the project ships: the
// manager as its ServiceAccount with config/rbac (localcp installs it), the
// agents as a ServiceAccount of their namespace bound to hitl-agent, the
// people as users bound to hitl-answerer (config/rbac/examples), each with
// its own kubeconfig. Admin only sets up (namespaces, RBAC) and reads what
// happened for the assertions.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hitl-dev/hitl/test/testenv"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "hitl end-to-end suite")
}

var (
	binDir  string
	workDir string
	localcp *exec.Cmd
	install testenv.Install

	// adminClient sets up namespaces and RBAC; it acts as admin.
	adminClient client.Client

	// admin sets up and reads for assertions; manager is the manager's
	// kubeconfig (its ServiceAccount's token); alice and bob are people,
	// users with client certificates and no rights until a spec binds them;
	// platform is the platform team, which writes ApprovalPolicies.
	admin, manager, alice, bob, platform actor
)

// The agent of every spec's namespace: a ServiceAccount named after the
// agent, so that it asks as itself.
const agentName = "bot"

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	binDir = os.Getenv("HITL_BIN")
	if binDir == "" {
		binDir = filepath.Join(testenv.Root(), "bin")
	}
	for _, b := range []string{"manager", "kubectl-hitl", "localcp"} {
		_, err := os.Stat(filepath.Join(binDir, b))
		Expect(err).NotTo(HaveOccurred(), "run `make build` first (or `make test-e2e`)")
	}
	workDir = GinkgoT().TempDir()
	admin = actor{"admin", filepath.Join(workDir, "kubeconfig")}
	manager = actor{"manager", filepath.Join(workDir, "kubeconfig-manager")}
	alice = actor{"alice", filepath.Join(workDir, "kubeconfig-alice")}
	bob = actor{"bob", filepath.Join(workDir, "kubeconfig-bob")}
	platform = actor{"platform", filepath.Join(workDir, "kubeconfig-platform")}
	var err error
	install, err = testenv.DefaultInstall()
	Expect(err).NotTo(HaveOccurred())

	build := exec.Command("go", "build", "-o", filepath.Join(workDir, "agent"), "./test/e2e/agent")
	build.Dir = testenv.Root()
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))

	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		Expect(os.Setenv("KUBEBUILDER_ASSETS", filepath.Join(testenv.Root(), "bin", "k8s"))).To(Succeed())
	}
	// localcp brings up the control plane, admission and the manager's
	// RBAC and kubeconfig; the suite runs the manager itself, to stop it.
	localcp = exec.Command(filepath.Join(binDir, "localcp"), "--write-kubeconfig", admin.kubeconfig, "--users", "alice,bob,platform",
		"--manager", "")
	stdout, err := localcp.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	localcp.Stderr = GinkgoWriter
	Expect(localcp.Start()).To(Succeed())
	ready := make(chan struct{})
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			fmt.Fprintln(GinkgoWriter, s.Text())
			if dir, ok := strings.CutPrefix(s.Text(), "etcd stores its data in "); ok {
				etcdDataDir = dir
			}
			if strings.Contains(s.Text(), "Press Ctrl-C to stop") {
				close(ready)
			}
		}
	}()
	Eventually(ready, "90s").Should(BeClosed(), "the local control plane did not come up")

	cfg, err := clientcmd.BuildConfigFromFlags("", admin.kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	adminClient, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	// The example roles, as a cluster operator would apply them.
	applied := admin.kubectl("apply", "-f", filepath.Join(testenv.Root(), "config", "rbac", "examples"))
	Expect(applied.code).To(BeZero(), applied.stderr)
	waitAllowed(install.ManagerUsername(), authorizationv1.ResourceAttributes{Group: "hitl.dev", Resource: "userquestions", Verb: "list"})
	startManager()
})

var _ = AfterSuite(func() {
	stopManager()
	if localcp != nil && localcp.Process != nil {
		_ = localcp.Process.Signal(syscall.SIGTERM)
		_ = localcp.Wait()
	}
})

// managerProc is the running manager binary, and managerExited is closed
// when it exits. managerLog keeps everything every manager of the suite
// wrote to its log; etcdDataDir is where the control plane's etcd keeps
// its data.
var (
	managerLog  syncBuffer
	etcdDataDir string

	managerProc   *exec.Cmd
	managerExited chan struct{}
)

// startManager runs the manager binary as localcp would, as its
// ServiceAccount, and waits until its controller has synced its cache and
// started its workers.
func startManager() {
	GinkgoHelper()
	managerProc = exec.Command(filepath.Join(binDir, "manager"), "--kubeconfig", manager.kubeconfig,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--claim-fence-namespace", install.Namespace)
	stderr, err := managerProc.StderrPipe()
	Expect(err).NotTo(HaveOccurred())
	managerProc.Stdout = GinkgoWriter
	Expect(managerProc.Start()).To(Succeed())
	started, exited := make(chan struct{}), make(chan struct{})
	managerExited = exited
	go func() {
		defer close(exited)
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			fmt.Fprintln(GinkgoWriter, "[manager]", s.Text())
			managerLog.Write(append(s.Bytes(), '\n'))
			if strings.Contains(s.Text(), "Starting workers") {
				close(started)
			}
		}
		_ = managerProc.Wait()
	}()
	Eventually(started, "60s").Should(BeClosed(), "the manager did not start its workers")
}

// stopManager stops the manager (SIGTERM, then SIGKILL after 15 s) and
// waits until it has exited.
func stopManager() {
	GinkgoHelper()
	if managerProc == nil || managerProc.Process == nil {
		return
	}
	_ = managerProc.Process.Signal(syscall.SIGTERM)
	select {
	case <-managerExited:
	case <-time.After(15 * time.Second):
		_ = managerProc.Process.Kill()
		<-managerExited
	}
	managerProc = nil
}

// syncBuffer is a buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// actor is an identity the suite runs commands as, with its own kubeconfig.
type actor struct {
	name, kubeconfig string
}

// run is the result of a command.
type run struct {
	stdout, stderr string
	code           int
}

// command runs a command as a with the suite's bin directory on PATH.
func (a actor) command(ctx context.Context, stdin string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+a.kubeconfig, "PATH="+binDir+":"+os.Getenv("PATH"))
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	return cmd
}

func (a actor) exe(stdin, name string, args ...string) run {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := a.command(ctx, stdin, name, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := run{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else {
		Expect(err).NotTo(HaveOccurred())
	}
	fmt.Fprintf(GinkgoWriter, "[%s] $ %s %s\n%s%s(exit %d)\n", a.name, name, strings.Join(args, " "), r.stdout, r.stderr, r.code)
	return r
}

func (a actor) kubectl(args ...string) run { GinkgoHelper(); return a.exe("", "kubectl", args...) }
func (a actor) hitl(args ...string) run {
	GinkgoHelper()
	return a.exe("", "kubectl", append([]string{"hitl"}, args...)...)
}

// background starts a command as a and returns a function that waits for it.
func (a actor) background(name string, args ...string) (*exec.Cmd, func() run) {
	GinkgoHelper()
	cmd := a.command(context.Background(), "", name, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	Expect(cmd.Start()).To(Succeed())
	return cmd, func() run {
		err := cmd.Wait()
		r := run{stdout: out.String(), stderr: errOut.String()}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			r.code = exit.ExitCode()
		}
		fmt.Fprintf(GinkgoWriter, "[%s] $ %s %s (background)\n%s%s(exit %d)\n", a.name, name, strings.Join(args, " "), r.stdout, r.stderr, r.code)
		return r
	}
}

var nsCount int

// newNamespace creates a namespace and, as admin, its actors' RBAC: the
// agent's ServiceAccount bound to hitl-agent, and alice bound to
// hitl-answerer with verb answer on the agent's questions. It returns the
// namespace and the agent, with a kubeconfig holding a token of its
// ServiceAccount from the TokenRequest API.
func newNamespace() (string, actor) {
	GinkgoHelper()
	ctx := context.Background()
	nsCount++
	ns := fmt.Sprintf("e2e-%d-%d", GinkgoParallelProcess(), nsCount)
	Expect(adminClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Expect(adminClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: agentName, Namespace: ns}})).To(Succeed())
	bind(ns, "ClusterRole", "hitl-agent", rbacv1.Subject{Kind: "ServiceAccount", Name: agentName, Namespace: ns})
	Expect(adminClient.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "answer-" + agentName, Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"hitl.dev"}, Resources: []string{"agents"}, Verbs: []string{"answer"}, ResourceNames: []string{agentName}}},
	})).To(Succeed())
	grantAnswering(ns, alice, "hitl-answerer")

	token, _, err := testenv.RequestToken(ctx, adminClient, ns, agentName, time.Hour)
	Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.BuildConfigFromFlags("", admin.kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	data, err := testenv.TokenKubeconfig(cfg, agentName, token, "")
	Expect(err).NotTo(HaveOccurred())
	agent := actor{"system:serviceaccount:" + ns + ":" + agentName, filepath.Join(workDir, "kubeconfig-"+ns+"-"+agentName)}
	Expect(os.WriteFile(agent.kubeconfig, data, 0o600)).To(Succeed())

	waitAllowed(agent.name, authorizationv1.ResourceAttributes{Namespace: ns, Group: "hitl.dev", Resource: "userquestions", Verb: "create"})
	return ns, agent
}

// grantAnswering binds clusterRole (hitl-answerer or a variant) to a person
// in ns, with verb answer on the agent's questions.
func grantAnswering(ns string, person actor, clusterRole string) {
	GinkgoHelper()
	user := rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: person.name}
	bind(ns, "ClusterRole", clusterRole, user)
	bind(ns, "Role", "answer-"+agentName, user)
	waitAllowed(person.name, authorizationv1.ResourceAttributes{Namespace: ns, Group: "hitl.dev", Resource: "agents", Name: agentName, Verb: "answer"})
	waitAllowed(person.name, authorizationv1.ResourceAttributes{Namespace: ns, Group: "hitl.dev", Resource: "userquestions", Verb: "list"})
}

func bind(ns, kind, role string, subject rbacv1.Subject) {
	GinkgoHelper()
	Expect(adminClient.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(subject.Name) + "-" + role, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   []rbacv1.Subject{subject},
	})).To(Succeed())
}

// allowed asks the API server whether user may do what ra describes.
func allowed(user string, ra authorizationv1.ResourceAttributes) func() bool {
	return func() bool {
		GinkgoHelper()
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &ra}}
		Expect(adminClient.Create(context.Background(), review)).To(Succeed())
		return review.Status.Allowed
	}
}

// waitAllowed waits until the API server's RBAC authorizer, which learns
// of new roles and bindings from a watch, allows what ra describes.
func waitAllowed(user string, ra authorizationv1.ResourceAttributes) {
	GinkgoHelper()
	Eventually(allowed(user, ra)).Should(BeTrue(), "%s may not %s %s", user, ra.Verb, ra.Resource)
}

func jsonpath(ns, resource, path string) func() string {
	return func() string { return admin.kubectl("-n", ns, "get", resource, "-o", "jsonpath="+path).stdout }
}

func writeFile(name, content string) string {
	GinkgoHelper()
	p := filepath.Join(workDir, name)
	Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	return p
}
