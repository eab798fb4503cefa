package mcp_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
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
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
	"github.com/hitl-dev/hitl/test/testenv"
)

// httpServer serves the tools over streamable HTTP at /mcp, as cmd/hitl-mcp
// does, reviewing tokens and impersonating as the admin's rest config.
func (e *env) httpServer(o hitlmcp.Options) (string, *hitlmcp.HTTPServer) {
	e.t.Helper()
	h, err := hitlmcp.NewHTTPHandler(hitlmcp.HTTPOptions{Options: o, Config: e.k.Config})
	e.g.Expect(err).NotTo(HaveOccurred())
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := httptest.NewServer(mux)
	e.t.Cleanup(srv.Close)
	return srv.URL + "/mcp", h
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// httpSession connects the SDK's streamable HTTP client with token.
func (e *env) httpSession(endpoint, token string) *mcp.ClientSession {
	e.t.Helper()
	t := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "v0"}, nil).Connect(e.ctx, t, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// mcpToken is a token of the ServiceAccount for audience hitl-mcp.
func (e *env) mcpToken(sa string) string {
	e.t.Helper()
	token, _, err := testenv.RequestAudienceToken(e.ctx, e.admin, e.ns, sa, time.Hour, hitlmcp.DefaultAudience)
	e.g.Expect(err).NotTo(HaveOccurred())
	return token
}

func TestHTTPAskAsServiceAccount(t *testing.T) {
	e := newEnv(t)
	e.serviceAccount("http-bot")
	endpoint, _ := e.httpServer(hitlmcp.Options{})
	cs := e.httpSession(endpoint, e.mcpToken("http-bot"))

	tools, err := cs.ListTools(e.ctx, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(tools.Tools).To(HaveLen(6))

	// Answered in window: the question is the ServiceAccount's, in its namespace.
	done := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("")})
	q := e.asked("http-bot")
	e.g.Expect(q.Spec.Agent).To(Equal("http-bot"))
	e.answer(q.Name, "r1", "prod")
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred())
	e.g.Expect(structured[hitlmcp.AskResult](e.g, got.res).Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}))

	// Pending, a late reply, admitted.
	res := structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "ask_user_question", whereArgs("1s")))
	e.g.Expect(res.Pending).To(BeTrue())
	e.answer(res.Question, "late-1", "staging")
	e.g.Eventually(e.queuedReply(res.Question)).Should(Equal("late-1"))
	queued := structured[hitlmcp.QueuedResult](e.g, e.call(cs, e.ctx, "get_queued_replies", nil))
	e.g.Expect(queued.Replies).To(HaveLen(1))
	admitted := structured[hitlmcp.AdmitResult](e.g, e.call(cs, e.ctx, "admit_reply", map[string]any{"question": res.Question, "reply": "late-1"}))
	e.g.Expect(admitted.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}}))

	// Cancelled through the tool.
	done = e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("")})
	var open string
	e.g.Eventually(func() int {
		list := structured[hitlmcp.ListResult](e.g, e.call(cs, e.ctx, "list_questions", nil))
		if len(list.Active) == 1 {
			open = list.Active[0].Question
		}
		return len(list.Active)
	}).Should(Equal(1))
	structured[hitlmcp.CancelResult](e.g, e.call(cs, e.ctx, "cancel_question", map[string]any{"question": open}))
	e.g.Eventually(done).Should(Receive(&got))
	toolError(e.g, got.res, string(hitlv1.CodeAskAborted), open)
	e.g.Expect(e.state(open)()).To(Equal(hitlv1.StateCancelled))
}

func TestHTTPCancelledCall(t *testing.T) {
	e := newEnv(t)
	e.serviceAccount("http-bot")
	endpoint, h := e.httpServer(hitlmcp.Options{})
	cs := e.httpSession(endpoint, e.mcpToken("http-bot"))
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := e.async(cs, ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("")})
	q := e.asked("http-bot")
	username := "system:serviceaccount:" + e.ns + ":http-bot"
	e.g.Eventually(func() int { return h.Waits(username) }).Should(Equal(1))
	cancel()
	e.g.Eventually(done).Should(Receive())
	e.g.Eventually(func() int { return h.Waits(username) }).Should(Equal(0))
	// A cancelled call leaves its question open, to wait_for_answer.
	e.g.Consistently(e.state(q.Name), 500*time.Millisecond).Should(Equal(hitlv1.StateOpen))
	e.answer(q.Name, "r1", "prod")
	res := structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "wait_for_answer", map[string]any{"callID": q.CallID(), "question": q.Name}))
	e.g.Expect(res.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}))
}

// A stopping HTTP server returns its waiting calls still waiting and keeps
// their questions: a session is not the agent's process, and the client
// goes on with wait_for_answer through the next server.
func TestHTTPStopKeepsQuestions(t *testing.T) {
	e := newEnv(t)
	e.serviceAccount("http-bot")
	token := e.mcpToken("http-bot")
	serving, stop := context.WithCancel(e.ctx)
	defer stop()
	endpoint, h := e.httpServer(hitlmcp.Options{Context: serving})
	cs := e.httpSession(endpoint, token)
	done := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("")})
	q := e.asked("http-bot")
	username := "system:serviceaccount:" + e.ns + ":http-bot"
	e.g.Eventually(func() int { return h.Waits(username) }).Should(Equal(1))

	stop()
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred())
	e.g.Expect(structured[hitlmcp.AskResult](e.g, got.res)).To(Equal(hitlmcp.AskResult{Question: q.Name, CallID: q.Name, Waiting: true}))
	h.Wait()
	e.g.Consistently(e.state(q.Name), 300*time.Millisecond).Should(Equal(hitlv1.StateOpen))

	endpoint, _ = e.httpServer(hitlmcp.Options{})
	cs = e.httpSession(endpoint, token)
	e.answer(q.Name, "r1", "staging")
	res := structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "wait_for_answer", map[string]any{"callID": q.Name, "question": q.Name}))
	e.g.Expect(res.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}}))
}

// The server impersonates the ServiceAccount, and the API server gives it
// its groups: a grant to the namespace's ServiceAccounts group applies.
func TestHTTPServiceAccountGroups(t *testing.T) {
	e := newEnv(t)
	g := e.g
	g.Expect(e.admin.Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "grouped"}})).To(Succeed())
	g.Expect(e.admin.Create(e.ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "askers"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{hitlv1.GroupVersion.Group}, Resources: []string{"userquestions"},
			Verbs: []string{"create", "get", "list", "watch", "update"}}},
	})).To(Succeed())
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "askers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "askers"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + e.ns}},
	}
	g.Expect(e.admin.Create(e.ctx, binding)).To(Succeed())
	// The authorizer learns of the Role and the binding from watches.
	g.Expect(testenv.AwaitBinding(e.ctx, e.admin, e.ns, binding.RoleRef, binding.Subjects, testenv.GrantWait)).To(Succeed())
	endpoint, _ := e.httpServer(hitlmcp.Options{})
	cs := e.httpSession(endpoint, e.mcpToken("grouped"))
	res := structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "ask_user_question", whereArgs("1s")))
	e.g.Expect(res.Pending).To(BeTrue())
	e.g.Expect(e.asked("grouped").Spec.Agent).To(Equal("grouped"))
}

// A session with no request in progress for the idle timeout is closed; a
// call that waits longer than that keeps its session.
func TestHTTPIdleSessionExpires(t *testing.T) {
	e := newEnv(t)
	e.serviceAccount("http-bot")
	const idle = 500 * time.Millisecond
	h, err := hitlmcp.NewHTTPHandler(hitlmcp.HTTPOptions{Config: e.k.Config, SessionTimeout: idle})
	e.g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cs := e.httpSession(srv.URL, e.mcpToken("http-bot"))

	res := structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "ask_user_question", whereArgs("1500ms")))
	e.g.Expect(res.Pending).To(BeTrue())
	e.g.Expect(h.Sessions()).To(Equal(1), "the session of a call that waited past the idle timeout")

	// Watched from the server's side: a request would reset the timer.
	e.g.Eventually(h.Sessions, 10*idle).Should(BeZero())
	_, err = cs.ListTools(e.ctx, nil)
	e.g.Expect(err).To(MatchError(mcp.ErrSessionMissing))
}

func TestHTTPRefusesBadTokens(t *testing.T) {
	e := newEnv(t)
	e.serviceAccount("http-bot")
	endpoint, _ := e.httpServer(hitlmcp.Options{})
	sa := &corev1.ServiceAccount{}
	e.g.Expect(e.admin.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "http-bot"}, sa)).To(Succeed())
	apiAudience, _, err := testenv.RequestToken(e.ctx, e.admin, e.ns, "http-bot", time.Hour)
	e.g.Expect(err).NotTo(HaveOccurred())
	other, _, err := testenv.RequestAudienceToken(e.ctx, e.admin, e.ns, "http-bot", time.Hour, "other-service")
	e.g.Expect(err).NotTo(HaveOccurred())

	status := func(header string) int { return e.status(endpoint, header) }
	// The positive controls: a hitl-mcp token, and one signed here like
	// the API server signs them, both accepted.
	e.g.Expect(status("Bearer " + e.mcpToken("http-bot"))).To(Equal(http.StatusOK))
	e.g.Expect(status("Bearer " + e.signToken(sa, time.Now().Add(time.Hour)))).To(Equal(http.StatusOK))

	for name, header := range map[string]string{
		"no token":                  "",
		"not bearer":                "Basic aGk6dGhlcmU=",
		"garbage":                   "Bearer not-a-token",
		"the API server's audience": "Bearer " + apiAudience,
		"another audience":          "Bearer " + other,
		"expired":                   "Bearer " + e.signToken(sa, time.Now().Add(-time.Minute)),
	} {
		e.g.Expect(status(header)).To(Equal(http.StatusUnauthorized), name)
	}

	// The SDK's client is refused too.
	t2 := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{other, http.DefaultTransport}}, MaxRetries: -1}
	_, err = mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "v0"}, nil).Connect(e.ctx, t2, nil)
	e.g.Expect(err).To(HaveOccurred())
}

// signToken signs a ServiceAccount token for audience hitl-mcp that
// expires at exp, with the local API server's signing key, as the
// TokenRequest API would (which never mints one that is already expired).
func (e *env) signToken(sa *corev1.ServiceAccount, exp time.Time) string {
	e.t.Helper()
	apiServer := e.k.Env.ControlPlane.APIServer
	data, err := os.ReadFile(filepath.Join(apiServer.CertDir, "sa-signer.key"))
	e.g.Expect(err).NotTo(HaveOccurred())
	block, _ := pem.Decode(data)
	e.g.Expect(block).NotTo(BeNil())
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if k, errRSA := x509.ParsePKCS1PrivateKey(block.Bytes); errRSA == nil {
			key, err = k, nil
		} else if k, errEC := x509.ParseECPrivateKey(block.Bytes); errEC == nil {
			key, err = k, nil
		}
	}
	e.g.Expect(err).NotTo(HaveOccurred())
	enc := func(v any) string {
		b, err := json.Marshal(v)
		e.g.Expect(err).NotTo(HaveOccurred())
		return base64.RawURLEncoding.EncodeToString(b)
	}
	iat := exp.Add(-2 * time.Hour).Unix()
	claims := map[string]any{
		"iss": apiServer.SecureServing.URL("https", "/").String(),
		"aud": []string{hitlmcp.DefaultAudience},
		"sub": "system:serviceaccount:" + sa.Namespace + ":" + sa.Name,
		"iat": iat, "nbf": iat, "exp": exp.Unix(),
		"kubernetes.io": map[string]any{
			"namespace":      sa.Namespace,
			"serviceaccount": map[string]any{"name": sa.Name, "uid": string(sa.UID)},
		},
	}
	var alg string
	switch key.(type) {
	case *rsa.PrivateKey:
		alg = "RS256"
	case *ecdsa.PrivateKey:
		alg = "ES256"
	default:
		e.t.Fatalf("the signing key is a %T", key)
	}
	signing := enc(map[string]string{"alg": alg, "typ": "JWT"}) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signing))
	var sig []byte
	switch k := key.(type) {
	case *rsa.PrivateKey:
		sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
		e.g.Expect(err).NotTo(HaveOccurred())
	case *ecdsa.PrivateKey:
		// JWS wants r and s, each padded to the curve's size (RFC 7518 3.4).
		r, s, err := ecdsa.Sign(rand.Reader, k, sum[:])
		e.g.Expect(err).NotTo(HaveOccurred())
		size := (k.Curve.Params().BitSize + 7) / 8
		sig = make([]byte, 2*size)
		r.FillBytes(sig[:size])
		s.FillBytes(sig[size:])
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// TestHTTPWithShippedRBAC runs the server as a ServiceAccount with no more
// than config/mcp grants it: reviewing tokens and impersonating
// ServiceAccounts is enough to serve an ask.
func TestHTTPWithShippedRBAC(t *testing.T) {
	e := newEnv(t)
	g := e.g
	data, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "mcp", "server", "role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if regexp.MustCompile(`(?m)^kind: ClusterRole$`).MatchString(doc) {
			g.Expect(yaml.UnmarshalStrict([]byte(doc), role)).To(Succeed())
		}
	}
	g.Expect(role.Rules).NotTo(BeEmpty(), "the ClusterRole of config/mcp/server/role.yaml")
	role.Name = "mcp-" + e.ns
	g.Expect(e.admin.Create(e.ctx, role)).To(Succeed())
	t.Cleanup(func() { _ = e.admin.Delete(context.Background(), role) })
	g.Expect(e.admin.Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "mcp-server"}})).To(Succeed())
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mcp-" + e.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: e.ns, Name: "mcp-server"}},
	}
	g.Expect(e.admin.Create(e.ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = e.admin.Delete(context.Background(), binding) })
	// The authorizer learns of the ClusterRole and the binding from watches.
	g.Expect(testenv.AwaitBinding(e.ctx, e.admin, "", binding.RoleRef, binding.Subjects, testenv.GrantWait)).To(Succeed())
	token, _, err := testenv.RequestToken(e.ctx, e.admin, e.ns, "mcp-server", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	serverConfig := &rest.Config{Host: e.k.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: e.k.Config.CAData}}

	e.serviceAccount("http-bot")
	h, err := hitlmcp.NewHTTPHandler(hitlmcp.HTTPOptions{Config: serverConfig})
	g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cs := e.httpSession(srv.URL, e.mcpToken("http-bot"))
	done := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("")})
	q := e.asked("http-bot")
	e.answer(q.Name, "r1", "prod")
	var got called
	g.Eventually(done).Should(Receive(&got))
	g.Expect(got.err).NotTo(HaveOccurred())
	g.Expect(structured[hitlmcp.AskResult](g, got.res).Answers).To(HaveLen(1))
	g.Expect(q.Spec.Agent).To(Equal("http-bot"))
	// The question records the calling ServiceAccount, UID included: the
	// server impersonates both.
	sa := &corev1.ServiceAccount{}
	g.Expect(e.admin.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "http-bot"}, sa)).To(Succeed())
	g.Expect(q.Spec.AskedBy).NotTo(BeNil())
	g.Expect(q.Spec.AskedBy.Username).To(Equal("system:serviceaccount:" + e.ns + ":http-bot"))
	g.Expect(q.Spec.AskedBy.UID).To(Equal(string(sa.UID)))
	g.Expect(q.Spec.AskedBy.Groups).To(ContainElement("system:serviceaccounts:" + e.ns))
}
