// Package browser drives the web inbox (internal/inbox, as kubectl hitl inbox
// --web serves it) in real headless Chromium against a real kube-apiserver
// with hitl's admission policies and a running manager. The person is a
// user bound to the shipped hitl-answerer role, the agent a ServiceAccount
// bound to the shipped hitl-agent role; admin only sets up and reads what
// happened. Run it with `make test-browser` (part of `make test-e2e`),
// which installs Debian's chromium when it is missing; HITL_SCREENSHOTS=1
// rewrites the screenshots under docs/images.
package browser

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/inbox"
	"github.com/hitl-dev/hitl/test/testenv"
)

// agentName is the agent of every test's namespace; the shipped
// hitl-answerer role grants answer on it.
const agentName = "release-bot"

var (
	cluster testenv.Shared
	// browser is the Chromium that every test opens its tabs in.
	browser context.Context
)

func TestMain(m *testing.M) {
	path := os.Getenv("CHROMIUM")
	if path == "" {
		var err error
		if path, err = exec.LookPath("chromium"); err != nil {
			fmt.Fprintln(os.Stderr, "test/browser needs Chromium: run `make test-browser`, which installs it, or set CHROMIUM")
			os.Exit(1)
		}
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1100, 1000),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))...)
	var cancelBrowser context.CancelFunc
	browser, cancelBrowser = chromedp.NewContext(alloc)
	if err := chromedp.Do(browser); err != nil {
		fmt.Fprintln(os.Stderr, "starting Chromium:", err)
		os.Exit(1)
	}
	code := m.Run()
	cancelBrowser()
	cancelAlloc()
	cluster.Stop()
	os.Exit(code)
}

// env is one test's namespace, people and inbox.
type env struct {
	t     *testing.T
	g     *WithT
	ctx   context.Context
	k     *testenv.Cluster
	admin client.WithWatch
	ns    string
	// agent asks as the ServiceAccount release-bot, bound to hitl-agent.
	agent client.Client
	// person is the name of the user who answers, bound to hitl-answerer.
	person  string
	pclient client.WithWatch
	pconfig *rest.Config
}

func newEnv(t *testing.T) *env {
	t.Helper()
	k := cluster.Get(t)
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(20 * time.Second)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "inbox-"}}
	g.Expect(k.Client.Create(ctx, ns)).To(Succeed())
	e := &env{t: t, g: g, ctx: ctx, k: k, admin: k.Client, ns: ns.Name}
	e.person = "alice-" + ns.Name
	e.pconfig, e.pclient = e.user(e.person, "hitl_answerer.yaml")
	e.agent = e.agentClient()
	return e
}

// shippedRole reads a ClusterRole of config/rbac/examples and creates it
// once.
func (e *env) shippedRole(file string) *rbacv1.ClusterRole {
	data, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "rbac", "examples", file))
	e.g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	e.g.Expect(yaml.UnmarshalStrict(data, role)).To(Succeed())
	if err := e.admin.Create(e.ctx, role.DeepCopy()); !apierrors.IsAlreadyExists(err) {
		e.g.Expect(err).NotTo(HaveOccurred())
	}
	return role
}

// bind binds the ClusterRole role to subject in the namespace, and waits
// until the API server's authorizer, which learns of bindings from a
// watch, applies it.
func (e *env) bind(role string, subject rbacv1.Subject) {
	b := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: role + "-", Namespace: e.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	}
	e.g.Expect(e.admin.Create(e.ctx, b)).To(Succeed())
	e.g.Expect(testenv.AwaitBinding(e.ctx, e.admin, e.ns, b.RoleRef, b.Subjects, testenv.GrantWait)).To(Succeed())
}

// user creates a user with a client certificate, bound in the namespace to
// the shipped role of file (none when empty).
func (e *env) user(name, file string) (*rest.Config, client.WithWatch) {
	u, err := e.k.Env.AddUser(envtest.User{Name: name}, e.k.Config)
	e.g.Expect(err).NotTo(HaveOccurred())
	if file != "" {
		role := e.shippedRole(file)
		e.bind(role.Name, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name})
	}
	cfg := u.Config()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: hitlv1.NewScheme()})
	e.g.Expect(err).NotTo(HaveOccurred())
	return cfg, c
}

// agentClient is the agent: the ServiceAccount release-bot of the
// namespace, bound to the shipped hitl-agent role.
func (e *env) agentClient() client.Client {
	e.g.Expect(e.admin.Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: agentName}})).To(Succeed())
	role := e.shippedRole("hitl_agent.yaml")
	e.bind(role.Name, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: e.ns, Name: agentName})
	token, _, err := testenv.RequestToken(e.ctx, e.admin, e.ns, agentName, time.Hour)
	e.g.Expect(err).NotTo(HaveOccurred())
	cfg := &rest.Config{Host: e.k.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: e.k.Config.CAData}}
	c, err := client.New(cfg, client.Options{Scheme: hitlv1.NewScheme()})
	e.g.Expect(err).NotTo(HaveOccurred())
	return c
}

// ask creates a question as the agent.
func (e *env) ask(q *hitlv1.UserQuestion) {
	e.t.Helper()
	q.Namespace, q.Spec.Agent = e.ns, agentName
	e.g.Eventually(func() error { return e.agent.Create(e.ctx, q) }).Should(Succeed())
}

func (e *env) question(name string) *hitlv1.UserQuestion {
	q := &hitlv1.UserQuestion{}
	e.g.Expect(e.admin.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, q)).To(Succeed())
	return q
}

func (e *env) state(name string) func() hitlv1.QuestionState {
	return func() hitlv1.QuestionState { return e.question(name).Status.State }
}

// gate lets a test cut the page's live updates (its event stream) while
// the rest of the inbox works: what a laptop that lost its connection, or
// a proxy that dropped the stream, looks like to the page. It keeps what
// the page posted too.
type gate struct {
	mu      sync.Mutex
	closed  bool
	cancels map[*http.Request]context.CancelFunc
	posted  []string
	next    http.Handler
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		g.mu.Lock()
		g.posted = append(g.posted, r.URL.Path+" "+string(body))
		g.mu.Unlock()
	}
	if r.URL.Path != "/events" {
		g.next.ServeHTTP(w, r)
		return
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		http.Error(w, "cut", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	g.cancels[r] = cancel
	g.mu.Unlock()
	defer func() { g.mu.Lock(); delete(g.cancels, r); g.mu.Unlock(); cancel() }()
	g.next.ServeHTTP(w, r.WithContext(ctx))
}

// cut ends the open event streams and refuses new ones until restore.
func (g *gate) cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for _, cancel := range g.cancels {
		cancel()
	}
}

func (g *gate) restore() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = false
}

// posts are the page's POST requests so far, each its path, a space and
// its body.
func (g *gate) posts() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.posted)
}

// inbox serves the web inbox as kubectl hitl inbox --web does (the
// one-time token, the person's own client) and returns its gate and the
// URL to open.
func (e *env) inbox(o inbox.Options) (*gate, string) {
	e.t.Helper()
	auth, err := inbox.NewTokenAuth(inbox.Person{Username: e.person})
	e.g.Expect(err).NotTo(HaveOccurred())
	o.Auth, o.Clients = auth, inbox.StaticClient(e.pclient)
	if o.Namespaces == nil {
		o.Namespaces = []string{e.ns}
	}
	srv, err := inbox.New(o)
	e.g.Expect(err).NotTo(HaveOccurred())
	gt := &gate{next: srv, cancels: map[*http.Request]context.CancelFunc{}}
	hs := httptest.NewServer(gt)
	e.t.Cleanup(func() { hs.CloseClientConnections(); hs.Close(); srv.Close() })
	return gt, auth.URL(strings.TrimPrefix(hs.URL, "http://"))
}

// tab opens a new tab, optionally asking for locale and the dark scheme.
func (e *env) tab(locale string, dark bool) context.Context {
	e.t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	e.t.Cleanup(cancel)
	e.g.Expect(chromedp.Do(ctx)).To(Succeed())
	if locale != "" {
		_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
		e.g.Expect(err).NotTo(HaveOccurred())
		_, err = chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
			Headers: network.Headers{"Accept-Language": locale}})
		e.g.Expect(err).NotTo(HaveOccurred())
	}
	if dark {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		e.g.Expect(err).NotTo(HaveOccurred())
	}
	return ctx
}

// do runs browser steps with a time limit, failing the test on an error.
func (e *env) do(ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	e.t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	e.g.Expect(chromedp.Do(tctx, steps...)).To(Succeed())
}

// text reads an element's visible text. It waits for the element, then
// reads it in one script, so that a card the page renders again between
// the two (a live update) is read again instead of failing on a node that
// no longer exists.
func (e *env) text(ctx context.Context, sel chromedp.CSS) string {
	e.t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	read := fmt.Sprintf(`(() => { const n = document.querySelector(%q); return n ? n.innerText : null; })()`, string(sel))
	for {
		e.g.Expect(chromedp.Do(tctx, chromedp.WaitVisible(sel))).To(Succeed(), "waiting for %s", sel)
		s, err := chromedp.Run(tctx, chromedp.Evaluate[*string](read))
		e.g.Expect(err).NotTo(HaveOccurred(), "reading %s", sel)
		if s != nil {
			return *s
		}
	}
}

func eval[T any](e *env, ctx context.Context, js string) T {
	e.t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	e.g.Expect(err).NotTo(HaveOccurred(), js)
	return v
}

// card is the CSS selector of a question's card, or of sel inside it.
func card(name string, sel ...string) chromedp.CSS {
	s := fmt.Sprintf(`li.item[data-name=%q]`, name)
	if len(sel) > 0 {
		s += " " + strings.Join(sel, " ")
	}
	return chromedp.CSS(s)
}

// screenshot keeps a picture of a card under docs/images when
// HITL_SCREENSHOTS is set.
func (e *env) screenshot(ctx context.Context, sel chromedp.CSS, name string) {
	e.t.Helper()
	if os.Getenv("HITL_SCREENSHOTS") == "" {
		return
	}
	// Let the countdowns tick once, so the picture shows what people see.
	time.Sleep(1100 * time.Millisecond)
	buf, err := chromedp.Run(ctx, chromedp.Screenshot(sel))
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(os.WriteFile(filepath.Join(testenv.Root(), "docs", "images", name+".png"), buf, 0o644)).To(Succeed())
}
