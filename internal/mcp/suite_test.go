package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
	. "github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

// The tests drive the MCP server with the SDK's own client against a real
// kube-apiserver with hitl's admission policies and a running manager; the
// admin client plays the person who answers.
var (
	cluster testenv.Shared
)

func TestMain(m *testing.M) {
	code := m.Run()
	cluster.Stop()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func startCluster(t *testing.T) *testenv.Cluster {
	t.Helper()
	return cluster.Get(t)
}

// env is one test's namespace on the shared cluster.
type env struct {
	t     *testing.T
	g     *WithT
	k     *testenv.Cluster
	admin client.WithWatch
	ns    string
	ctx   context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	k := startCluster(t)
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(20 * time.Second)
	g.SetDefaultEventuallyPollingInterval(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "mcp-"}}
	g.Expect(k.Client.Create(ctx, ns)).To(Succeed())
	return &env{t: t, g: g, k: k, admin: k.Client, ns: ns.Name, ctx: ctx}
}

// session connects the SDK's client, over in-memory transports, to a
// server whose calls act as callers.
func (e *env) session(callers hitlmcp.CallerFunc, o hitlmcp.Options, copts *mcp.ClientOptions) (*mcp.ClientSession, *hitlmcp.Server) {
	e.t.Helper()
	srv := hitlmcp.New(callers, o)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCPServer().Connect(e.ctx, st, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, copts).Connect(e.ctx, ct, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs, srv
}

// adminAs is a caller acting as the cluster admin and asking as agent.
func (e *env) adminAs(agent string) hitlmcp.CallerFunc {
	return hitlmcp.Static(hitlmcp.Caller{Key: "admin", Client: e.admin, Namespace: e.ns, Agent: agent})
}

// call calls a tool and fails the test on a protocol error.
func (e *env) call(cs *mcp.ClientSession, ctx context.Context, tool string, args any) *mcp.CallToolResult {
	e.t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	e.g.Expect(err).NotTo(HaveOccurred(), "calling %s", tool)
	return res
}

// called is a tool call's outcome, for calls run in the background.
type called struct {
	res *mcp.CallToolResult
	err error
}

func (e *env) async(cs *mcp.ClientSession, ctx context.Context, params *mcp.CallToolParams) <-chan called {
	out := make(chan called, 1)
	go func() {
		res, err := cs.CallTool(ctx, params)
		out <- called{res, err}
	}()
	return out
}

// text is a result's text content.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// structured decodes a result's structuredContent into out.
func structured[T any](g *WithT, res *mcp.CallToolResult) T {
	var out T
	g.Expect(res.IsError).To(BeFalse(), "the call failed: %s", text(res))
	data, err := json.Marshal(res.StructuredContent)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(data, &out)).To(Succeed())
	return out
}

// toolError asserts that res is a tool error whose text starts with code
// and names field.
func toolError(g *WithT, res *mcp.CallToolResult, code, field string) {
	g.Expect(res.IsError).To(BeTrue(), "expected a tool error %s, got %s", code, text(res))
	g.Expect(text(res)).To(HavePrefix(code+":"), "the error text")
	if field != "" {
		g.Expect(text(res)).To(ContainSubstring(field), "the error text names the field")
	}
}

// whereArgs is ask_user_question's arguments for one question, where to
// deploy, with timeout (none when empty).
func whereArgs(timeout string) map[string]any {
	args := map[string]any{"questions": []any{map[string]any{
		"id": "env", "question": "Where to deploy?", "header": "Deploy",
		"options": []any{map[string]any{"label": "staging"}, map[string]any{"label": "prod", "description": "the real thing"}},
	}}}
	if timeout != "" {
		args["timeout"] = timeout
	}
	return args
}

// asked waits until agent has exactly one question in the namespace and
// returns it.
func (e *env) asked(agent string) *hitlv1.UserQuestion {
	e.t.Helper()
	var q *hitlv1.UserQuestion
	e.g.Eventually(func() int {
		l := &hitlv1.UserQuestionList{}
		e.g.Expect(e.admin.List(e.ctx, l, client.InNamespace(e.ns), client.MatchingLabels{hitlv1.AgentLabel: agent})).To(Succeed())
		if len(l.Items) == 1 {
			q = &l.Items[0]
		}
		return len(l.Items)
	}).Should(Equal(1))
	return q
}

// state is the question's state as every reader takes it: a question not
// yet written Open (its status waits --open-gather for a reply) is Open.
func (e *env) state(name string) func() hitlv1.QuestionState {
	return func() hitlv1.QuestionState {
		q := &hitlv1.UserQuestion{}
		e.g.Expect(e.admin.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, q)).To(Succeed())
		return q.State()
	}
}

func (e *env) spec(name string) func() hitlv1.UserQuestionSpec {
	return func() hitlv1.UserQuestionSpec {
		q := &hitlv1.UserQuestion{}
		e.g.Expect(e.admin.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, q)).To(Succeed())
		return q.Spec
	}
}

func (e *env) queuedReply(name string) func() string {
	return func() string {
		q := &hitlv1.UserQuestion{}
		e.g.Expect(e.admin.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, q)).To(Succeed())
		if q.Status.QueuedReply != nil {
			return q.Status.QueuedReply.Name
		}
		return ""
	}
}

// answer replies to question as the admin, choosing env.
func (e *env) answer(question, reply, choice string) {
	e.t.Helper()
	e.g.Expect(e.admin.Create(e.ctx, Reply(reply, e.ns, question).Select("env", choice).Obj())).To(Succeed())
}

// serviceAccount creates a ServiceAccount that may create, read and update
// UserQuestions in the namespace, and returns a rest config acting as it.
func (e *env) serviceAccount(name string) *rest.Config {
	e.t.Helper()
	g := e.g
	g.Expect(e.admin.Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}})).To(Succeed())
	g.Expect(e.admin.Create(e.ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{hitlv1.GroupVersion.Group}, Resources: []string{"userquestions"},
			Verbs: []string{"create", "get", "list", "watch", "update"},
		}},
	})).To(Succeed())
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: e.ns, Name: name}},
	}
	g.Expect(e.admin.Create(e.ctx, binding)).To(Succeed())
	// The authorizer learns of the Role and the binding from watches.
	g.Expect(testenv.AwaitBinding(e.ctx, e.admin, e.ns, binding.RoleRef, binding.Subjects, testenv.GrantWait)).To(Succeed())
	token, _, err := testenv.RequestToken(e.ctx, e.admin, e.ns, name, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	return &rest.Config{Host: e.k.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: e.k.Config.CAData}}
}

func (e *env) clientFor(cfg *rest.Config) client.WithWatch {
	e.t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: e.k.Env.Scheme})
	e.g.Expect(err).NotTo(HaveOccurred())
	return c
}
