// Package mcpclient checks that a stock MCP client never loses a question
// to its own request timeout: client.mjs, on the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package.json and package-lock.json)
// with its default request options (a 60-second timeout), asks through the
// hitl-mcp binary and follows the continuation docs/mcp.md documents
// (wait_for_answer while the result says waiting) until a person answers,
// 70 seconds after the ask; then it asks a question typed with an MCP
// elicitation schema, answered at once, and reads its value as a number.
//
// Everything runs as it ships: localcp's control plane with the default
// install's admission, the manager binary as its ServiceAccount, hitl-mcp
// as its ServiceAccount with config/mcp's ClusterRole, the agent as a
// ServiceAccount bound to hitl-agent, and alice, the person, bound to
// hitl-answerer (config/rbac/examples). Admin only sets up and watches.
//
// Run it with `make test-mcp-client` (about 2 minutes; QUICK=1 runs the
// same flow with a 5-second max wait and the answer after 8 seconds),
// which installs the SDK with npm ci (hack/mcpclient.sh). Without node, or
// without the installed SDK, the test skips, so that `go test ./...`
// passes.
package mcpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
	. "github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

const (
	namespace = "agents"
	// agentName is one of the agents config/rbac/examples' hitl-answerer
	// names, so that alice may answer it with the role as shipped.
	agentName = "release-bot"
	callID    = "ts-call-1"
)

// timing is when the person answers, and the server's max wait (zero:
// hitl-mcp's default).
type timing struct {
	answerAfter, maxWait time.Duration
}

func TestTypeScriptClientOutlivesItsTimeout(t *testing.T) {
	node, sdk := clientAssets(t)
	g := NewWithT(t)
	tm := timing{answerAfter: 70 * time.Second}
	if os.Getenv("HITL_MCPCLIENT_QUICK") != "" {
		tm = timing{answerAfter: 8 * time.Second, maxWait: 5 * time.Second}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	w := startWorld(ctx, t, tm.maxWait)
	watched := w.watchQuestions(ctx, t)
	t.Logf("the TypeScript SDK %s asks; alice answers %s after the ask", sdk, tm.answerAfter)

	var stdout, stderr testenv.Output
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = filepath.Join(testenv.Root(), "test", "mcpclient")
	cmd.Env = append(os.Environ(), "HITL_MCP_URL="+w.endpoint, "HITL_MCP_TOKEN="+w.agentToken, "HITL_CALL_ID="+callID)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	g.Expect(cmd.Start()).To(Succeed())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	report := func() string {
		return "client stdout:\n" + stdout.String() + "\nclient stderr:\n" + stderr.String() + "\n" + w.logs.tail()
	}

	q := w.asked(ctx, t, report)
	askedAt := q.WindowStart()
	select {
	case <-time.After(time.Until(askedAt.Add(tm.answerAfter))):
	case err := <-exited:
		t.Fatalf("the client ended before anyone answered: %v\n%s", err, report())
	}
	reply := Reply(q.Name+"-alice", namespace, q.Name).AnsweredBy("alice").Select("env", "prod").Obj()
	g.Expect(w.alice.Create(ctx, reply)).To(Succeed(), "alice answers, as hitl-answerer")
	t.Logf("alice answered %s after the ask", time.Since(askedAt).Round(time.Millisecond))

	// The typed ask that follows, answered as soon as it is asked.
	typed := w.askedCall(ctx, t, callID+"-typed", report)
	g.Expect(typed.Spec.Questions[0].Input).To(Equal(&hitlv1.AnswerInput{Type: hitlv1.InputInteger,
		Minimum: ptr.To(intstr.FromInt32(1)), Maximum: ptr.To(intstr.FromInt32(10))}), "the elicitation schema, as hitl's input")
	g.Expect(w.alice.Create(ctx, Reply(typed.Name+"-alice", namespace, typed.Name).AnsweredBy("alice").Custom("replicas", "3").Obj())).To(Succeed())

	select {
	case err := <-exited:
		g.Expect(err).NotTo(HaveOccurred(), report())
	case <-time.After(time.Minute + tm.maxWait):
		t.Fatalf("the client did not get the answer\n%s", report())
	}
	out := parse(t, stdout.String())
	g.Expect(out.defaultTimeout).To(Equal(60000), "the SDK's default request timeout")
	g.Expect(out.tools).To(ContainElements("ask_user_question", "wait_for_answer", "cancel_question"))

	// The ask returned still waiting before the client's timeout, and
	// the client went on with wait_for_answer until alice's answer came.
	g.Expect(len(out.calls)).To(BeNumerically(">=", 2), report())
	maxWait := tm.maxWait
	if maxWait == 0 {
		maxWait = hitlmcp.DefaultMaxWait
	}
	for i, c := range out.calls {
		t.Logf("%s returned after %s: waiting %t, answers %v", c.Call, time.Duration(c.Ms)*time.Millisecond, c.Result.Waiting, c.Result.Answers)
		g.Expect(c.IsError).To(BeFalse(), "call %d: %s", i, c.Text)
		g.Expect(c.Ms).To(BeNumerically("<", 60000), "call %d returned before the client's request timeout", i)
		last := i == len(out.calls)-1
		if i == 0 {
			g.Expect(c.Call).To(Equal("ask_user_question"))
		} else {
			g.Expect(c.Call).To(Equal("wait_for_answer"))
		}
		g.Expect(c.Result.Question).To(Equal(q.Name))
		g.Expect(c.Result.CallID).To(Equal(callID))
		if !last {
			g.Expect(c.Result.Waiting).To(BeTrue(), "call %d", i)
			g.Expect(time.Duration(c.Ms)*time.Millisecond).To(BeNumerically("~", maxWait, 3*time.Second), "call %d waited the max wait", i)
			g.Expect(c.Text).To(ContainSubstring("call wait_for_answer with"))
		}
	}
	g.Expect(out.done).To(Equal(result{Question: q.Name, CallID: callID, Answers: []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}}))
	// The SDK took the typed results as fitting the tools' output
	// schemas (or the client would have failed), and the value is a
	// number.
	g.Expect(out.typed).To(Equal(typedValue{Question: typed.Name, Value: 3, ValueType: "number"}), report())
	t.Logf("the typed ask returned its value after %s", time.Duration(out.typedMs)*time.Millisecond)

	// Settled by alice's reply, and never cancelled on the way.
	settled := &hitlv1.UserQuestion{}
	g.Expect(w.admin.Get(ctx, client.ObjectKeyFromObject(q), settled)).To(Succeed())
	g.Expect(settled.Status.State).To(Equal(hitlv1.StateSettled))
	g.Expect(settled.Status.Settlement.Reply).To(Equal(reply.Name))
	g.Expect(settled.Status.Settlement.AnsweredBy.Username).To(Equal("alice"))
	seen := watched.states(q.Name)
	g.Expect(seen).NotTo(BeEmpty())
	g.Expect(seen).NotTo(ContainElement(string(hitlv1.StateCancelled)))
	g.Expect(seen).NotTo(ContainElement("cancelling"), "spec.cancelled was never set")
}

// clientAssets finds node and the SDK that hack/mcpclient.sh installed, and
// skips t without them.
func clientAssets(t *testing.T) (node, sdkVersion string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("no node: %v (install Node.js 20 or later, then run `make test-mcp-client`)", err)
	}
	data, err := os.ReadFile(filepath.Join(testenv.Root(), "test", "mcpclient", "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	if err != nil {
		t.Skipf("no TypeScript SDK: %v (run `make test-mcp-client`, which installs it with hack/mcpclient.sh)", err)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(data, &pkg); err != nil {
		t.Fatal(err)
	}
	return node, pkg.Version
}

// world is the control plane, the manager and hitl-mcp, set up for the
// agent and alice.
type world struct {
	admin client.WithWatch
	// alice acts as alice, bound to hitl-answerer in the namespace.
	alice      client.Client
	endpoint   string
	agentToken string
	logs       *logs
}

// startWorld builds localcp, the manager and hitl-mcp, and runs them as
// they ship, hitl-mcp with --max-wait when maxWait is not zero.
func startWorld(ctx context.Context, t *testing.T, maxWait time.Duration) *world {
	t.Helper()
	g := NewWithT(t)
	// The clients' own logs (controller-runtime's) are not wanted here.
	logf.SetLogger(logr.Discard())
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Setenv("KUBEBUILDER_ASSETS", filepath.Join(testenv.Root(), "bin", "k8s"))
	}
	bin, dir := t.TempDir(), t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+"/", "./hack/localcp", "./cmd/manager", "./cmd/hitl-mcp")
	build.Dir = testenv.Root()
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	w := &world{logs: &logs{}}
	// localcp runs the control plane and, as its ServiceAccount, the
	// manager, whose log says when its workers run.
	started := w.run(t, "localcp", "Starting workers", filepath.Join(bin, "localcp"), "--write-kubeconfig", filepath.Join(dir, "kubeconfig"),
		"--users", "alice", "--manager", filepath.Join(bin, "manager"), "--kube-controller-manager", "")
	select {
	case <-started:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the control plane and the manager did not come up\n%s", w.logs.tail())
	}
	w.admin = clientFor(t, filepath.Join(dir, "kubeconfig"))
	w.alice = clientFor(t, filepath.Join(dir, "kubeconfig-alice"))

	g.Expect(w.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
	g.Expect(w.admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: agentName}})).To(Succeed())
	agentRole := w.clusterRole(ctx, t, "config/rbac/examples/hitl_agent.yaml", "")
	answererRole := w.clusterRole(ctx, t, "config/rbac/examples/hitl_answerer.yaml", "")
	w.bind(ctx, t, namespace, agentRole, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: agentName})
	w.bind(ctx, t, namespace, answererRole, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"})

	// hitl-mcp's ServiceAccount and ClusterRole, named as config/mcp
	// installs them.
	install, err := testenv.DefaultInstall()
	g.Expect(err).NotTo(HaveOccurred())
	server := install.NamePrefix + "mcp"
	g.Expect(w.admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: server}})).To(Succeed())
	mcpRole := w.clusterRole(ctx, t, "config/mcp/server/role.yaml", install.NamePrefix)
	w.bind(ctx, t, "", mcpRole, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: install.Namespace, Name: server})
	token, _, err := testenv.RequestToken(ctx, w.admin, install.Namespace, server, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	data, err := testenv.TokenKubeconfig(cfg, "system:serviceaccount:"+install.Namespace+":"+server, token, "")
	g.Expect(err).NotTo(HaveOccurred())
	serverKubeconfig := filepath.Join(dir, "kubeconfig-mcp")
	g.Expect(os.WriteFile(serverKubeconfig, data, 0o600)).To(Succeed())

	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())
	args := []string{"--kubeconfig", serverKubeconfig, "--bind-address", addr}
	if maxWait != 0 {
		args = append(args, "--max-wait", maxWait.String())
	}
	w.run(t, "hitl-mcp", "", filepath.Join(bin, "hitl-mcp"), args...)
	g.Eventually(func() int {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).Should(Equal(http.StatusOK), w.logs.tail)
	w.endpoint = "http://" + addr + "/mcp"
	w.agentToken, _, err = testenv.RequestAudienceToken(ctx, w.admin, namespace, agentName, time.Hour, hitlmcp.DefaultAudience)
	g.Expect(err).NotTo(HaveOccurred())
	return w
}

// run starts a process whose output goes to w.logs, stopped (SIGTERM,
// then SIGKILL after 30 s) when t ends; the channel is closed when a line
// of its output holds ready.
func (w *world) run(t *testing.T, name, ready, path string, args ...string) <-chan struct{} {
	t.Helper()
	cmd := exec.Command(path, args...)
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	seen := make(chan struct{})
	go func() {
		s := bufio.NewScanner(r)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		var once sync.Once
		for s.Scan() {
			w.logs.add(name, s.Text())
			if ready != "" && strings.Contains(s.Text(), ready) {
				once.Do(func() { close(seen) })
			}
		}
	}()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return seen
}

func clientFor(t *testing.T, kubeconfig string) client.WithWatch {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clusterRole creates the ClusterRole of a file of the repository, its
// name prefixed with prefix, and returns a reference to it.
func (w *world) clusterRole(ctx context.Context, t *testing.T, path, prefix string) rbacv1.RoleRef {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.Root(), path))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if meta.Kind == "ClusterRole" {
			if err := yaml.UnmarshalStrict([]byte(doc), role); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
	}
	if len(role.Rules) == 0 {
		t.Fatalf("%s holds no ClusterRole", path)
	}
	role.Name = prefix + role.Name
	if err := w.admin.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}
}

// bind binds role to subject in ns (cluster-wide when ns is empty) and
// waits until the authorizer knows it.
func (w *world) bind(ctx context.Context, t *testing.T, ns string, role rbacv1.RoleRef, subject rbacv1.Subject) {
	t.Helper()
	meta := metav1.ObjectMeta{Namespace: ns, Name: role.Name}
	var err error
	if ns == "" {
		err = w.admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: role, Subjects: []rbacv1.Subject{subject}})
	} else {
		err = w.admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: role, Subjects: []rbacv1.Subject{subject}})
	}
	if err == nil {
		err = testenv.AwaitBinding(ctx, w.admin, ns, role, []rbacv1.Subject{subject}, testenv.GrantWait)
	}
	if err != nil {
		t.Fatalf("binding %s to %s: %v", role.Name, subject.Name, err)
	}
}

// asked waits until the agent's question of callID exists.
func (w *world) asked(ctx context.Context, t *testing.T, report func() string) *hitlv1.UserQuestion {
	t.Helper()
	return w.askedCall(ctx, t, callID, report)
}

// askedCall waits until the agent's question of id exists.
func (w *world) askedCall(ctx context.Context, t *testing.T, id string, report func() string) *hitlv1.UserQuestion {
	t.Helper()
	var q *hitlv1.UserQuestion
	NewWithT(t).Eventually(func() bool {
		l := &hitlv1.UserQuestionList{}
		if err := w.admin.List(ctx, l, client.InNamespace(namespace), client.MatchingLabels{hitlv1.AgentLabel: agentName}); err != nil {
			return false
		}
		for i := range l.Items {
			if l.Items[i].CallID() == id {
				q = &l.Items[i]
			}
		}
		return q != nil
	}).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).Should(BeTrue(), report)
	return q
}

// history is every state the namespace's questions were seen in, by name;
// "cancelling" stands for spec.cancelled.
type history struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (h *history) states(name string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen[name]...)
}

// watchQuestions records the states of the namespace's questions from now
// on, until ctx ends.
func (w *world) watchQuestions(ctx context.Context, t *testing.T) *history {
	t.Helper()
	wi, err := w.admin.Watch(ctx, &hitlv1.UserQuestionList{}, client.InNamespace(namespace))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wi.Stop)
	h := &history{seen: map[string][]string{}}
	go func() {
		for ev := range wi.ResultChan() {
			q, ok := ev.Object.(*hitlv1.UserQuestion)
			if !ok || ev.Type == watch.Error {
				continue
			}
			h.mu.Lock()
			h.seen[q.Name] = append(h.seen[q.Name], string(q.State()))
			if q.Spec.Cancelled {
				h.seen[q.Name] = append(h.seen[q.Name], "cancelling")
			}
			h.mu.Unlock()
		}
	}()
	return h
}

// result is the part of a tool's structured result the test reads.
type result struct {
	Question string              `json:"question"`
	CallID   string              `json:"callID"`
	Waiting  bool                `json:"waiting"`
	Pending  bool                `json:"pending"`
	Answers  []hitlv1.AnswerItem `json:"answers"`
}

// call is a line client.mjs prints for each tool call.
type call struct {
	Call    string `json:"call"`
	Ms      int64  `json:"ms"`
	IsError bool   `json:"isError"`
	Result  result `json:"result"`
	Text    string `json:"text"`
}

// typedValue is the line client.mjs prints last: the typed ask's value.
type typedValue struct {
	Question  string  `json:"question"`
	Value     float64 `json:"value"`
	ValueType string  `json:"valueType"`
}

// output is what client.mjs printed.
type output struct {
	defaultTimeout int
	tools          []string
	calls          []call
	done           result
	typed          typedValue
	typedMs        int64
}

func parse(t *testing.T, stdout string) output {
	t.Helper()
	var out output
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var l struct {
			DefaultTimeoutMs int      `json:"defaultTimeoutMs"`
			Tools            []string `json:"tools"`
			Call             string   `json:"call"`
			Done             bool     `json:"done"`
			TypedCall        string   `json:"typedCall"`
			Typed            bool     `json:"typed"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("client line %q: %v", line, err)
		}
		var err error
		switch {
		case l.DefaultTimeoutMs != 0:
			out.defaultTimeout = l.DefaultTimeoutMs
		case l.Tools != nil:
			out.tools = l.Tools
		case l.Call != "":
			var c call
			err = json.Unmarshal([]byte(line), &c)
			out.calls = append(out.calls, c)
		case l.Done:
			err = json.Unmarshal([]byte(line), &out.done)
		case l.Typed:
			err = json.Unmarshal([]byte(line), &out.typed)
		case l.TypedCall != "":
			// The typed ask's calls: the SDK checked their results.
			var c call
			err = json.Unmarshal([]byte(line), &c)
			out.typedMs += c.Ms
		}
		if err != nil {
			t.Fatalf("client line %q: %v", line, err)
		}
	}
	return out
}

// logs keeps the processes' output for a failing test's report.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) add(name, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, "["+name+"] "+line)
}

// tail is the last lines of output.
func (l *logs) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := max(0, len(l.lines)-60)
	return "last process output:\n" + strings.Join(l.lines[from:], "\n")
}
