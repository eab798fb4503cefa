package inbox

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	. "github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

// The stream tests run against a real API server (no manager: they only
// list and watch questions), started by the first test that needs it.
var (
	apiOnce  sync.Once
	apiEnv   *envtest.Environment
	apiCfg   *rest.Config
	apiAdmin client.Client
	apiErr   error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if apiEnv != nil {
		_ = apiEnv.Stop()
	}
	os.Exit(code)
}

func apiServer(t *testing.T) (*rest.Config, client.Client) {
	t.Helper()
	apiOnce.Do(func() {
		apiEnv = testenv.New()
		apiCfg, apiAdmin, apiErr = testenv.Start(apiEnv)
	})
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	return apiCfg, apiAdmin
}

// watches counts the watches of questions that the API server is asked
// for, by the user each impersonates.
type watches struct {
	mu    sync.Mutex
	open  map[string]int
	total map[string]int
}

func (w *watches) get(user string) (open, total int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.open[user], w.total[user]
}

func (w *watches) RoundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") != "true" || !strings.HasSuffix(req.URL.Path, "/userquestions") {
		return next.RoundTrip(req)
	}
	user := req.Header.Get("Impersonate-User")
	res, err := next.RoundTrip(req)
	if err != nil || res.StatusCode != http.StatusOK {
		return res, err
	}
	w.mu.Lock()
	w.open[user]++
	w.total[user]++
	w.mu.Unlock()
	res.Body = &closeOnce{ReadCloser: res.Body, done: func() { w.mu.Lock(); w.open[user]--; w.mu.Unlock() }}
	return res, nil
}

type closeOnce struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (c *closeOnce) Close() error {
	c.once.Do(c.done)
	return c.ReadCloser.Close()
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// streamEnv is an in-cluster inbox (ProxyAuth, impersonation) over a fresh
// namespace whose questions the named people may read.
type streamEnv struct {
	t       *testing.T
	g       *WithT
	ctx     context.Context
	admin   client.Client
	ns      string
	watches *watches
	srv     *Server
	url     string
}

const streamSecret = "0123456789abcdef0123"

func newStreamEnv(t *testing.T, maxStreams int, people ...string) *streamEnv {
	cfg, admin := apiServer(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "inbox-streams-"}}
	g.Expect(admin.Create(ctx, ns)).To(Succeed())
	e := &streamEnv{t: t, g: g, ctx: ctx, admin: admin, ns: ns.Name, watches: &watches{open: map[string]int{}, total: map[string]int{}}}

	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "question-reader", Namespace: e.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{hitlv1.GroupVersion.Group}, Resources: []string{"userquestions"}, Verbs: []string{"get", "list", "watch"}}}}
	g.Expect(admin.Create(ctx, role)).To(Succeed())
	for _, p := range people {
		e.grant(p)
	}

	counted := rest.CopyConfig(cfg)
	counted.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) { return e.watches.RoundTrip(next, r) })
	})
	srv, err := New(Options{
		Auth: &ProxyAuth{Secret: []byte(streamSecret)}, Clients: ImpersonatingClients(counted),
		Namespaces: []string{e.ns}, MaxStreams: maxStreams,
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(srv.opts.Auth.(*ProxyAuth).Check()).To(Succeed())
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close(); srv.Close() })
	e.srv, e.url = srv, hs.URL
	return e
}

// grant lets person read the namespace's questions, and waits until the
// authorizer knows it.
func (e *streamEnv) grant(person string) {
	subject := rbacv1.Subject{Kind: rbacv1.UserKind, Name: person}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "question-reader"}
	e.g.Expect(e.admin.Create(e.ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: person, Namespace: e.ns},
		RoleRef: ref, Subjects: []rbacv1.Subject{subject}})).To(Succeed())
	e.g.Expect(testenv.AwaitBinding(e.ctx, e.admin, e.ns, ref, []rbacv1.Subject{subject}, testenv.GrantWait)).To(Succeed())
}

// revoke takes the grant back, and waits until the authorizer refuses.
func (e *streamEnv) revoke(person string) {
	e.g.Expect(e.admin.Delete(e.ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: person, Namespace: e.ns}})).To(Succeed())
	e.g.Eventually(func() bool {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: person,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: e.ns, Group: hitlv1.GroupVersion.Group, Resource: "userquestions", Verb: "list"}}}
		e.g.Expect(e.admin.Create(e.ctx, review)).To(Succeed())
		return review.Status.Allowed
	}).WithTimeout(testenv.GrantWait).Should(BeFalse())
}

func (e *streamEnv) ask(name, agent string) {
	e.g.Expect(e.admin.Create(e.ctx, Question(name, e.ns).Agent(agent).Label(hitlv1.AgentLabel, agent).
		Ask("env", "Where?", "staging", "production").Obj())).To(Succeed())
}

// stream is an open event stream of the inbox, as a page reads it.
type stream struct {
	status int
	body   string
	msgs   chan message
	close  context.CancelFunc
}

// open opens the event stream of person (through the proxy) at query.
func (e *streamEnv) open(person, query string) *stream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/events"+query, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("X-Hitl-Proxy-Secret", streamSecret)
	req.Header.Set("X-Forwarded-User", person)
	res, err := http.DefaultClient.Do(req)
	e.g.Expect(err).NotTo(HaveOccurred())
	s := &stream{status: res.StatusCode, msgs: make(chan message, 64), close: cancel}
	e.t.Cleanup(cancel)
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		s.body = string(b)
		return s
	}
	go func() {
		defer res.Body.Close()
		defer close(s.msgs)
		lines := bufio.NewScanner(res.Body)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			data, ok := strings.CutPrefix(lines.Text(), "data: ")
			if !ok {
				continue
			}
			var m message
			if json.Unmarshal([]byte(data), &m) == nil {
				s.msgs <- m
			}
		}
	}()
	return s
}

// next is the stream's next message.
func (e *streamEnv) next(s *stream) message {
	e.t.Helper()
	select {
	case m, ok := <-s.msgs:
		e.g.Expect(ok).To(BeTrue(), "the stream ended")
		return m
	case <-time.After(30 * time.Second):
		e.t.Fatal("no message on the stream in 30s")
	}
	return message{}
}

func keys(m message) []string {
	var out []string
	for _, it := range m.Items {
		out = append(out, it.Key)
	}
	return out
}

func TestTheStreamsOfOnePersonShareOneWatch(t *testing.T) {
	e := newStreamEnv(t, 2, "alice", "bob")
	e.ask("deploy", "bot")
	e.ask("rotate", "other")
	informers := func() int { n, _ := e.srv.streams.count(); return n }

	first := e.open("alice", "")
	e.g.Expect(first.status).To(Equal(http.StatusOK))
	reset := e.next(first)
	e.g.Expect(reset.Type).To(Equal("reset"))
	e.g.Expect(keys(reset)).To(ConsistOf(e.ns+"/deploy", e.ns+"/rotate"))
	e.g.Eventually(func() int { open, _ := e.watches.get("alice"); return open }).Should(Equal(1))
	_, watched := e.watches.get("alice")

	// A second page of alice's, for one agent only, joins her watch.
	second := e.open("alice", "?agent=bot")
	e.g.Expect(second.status).To(Equal(http.StatusOK))
	reset = e.next(second)
	e.g.Expect(reset.Type).To(Equal("reset"))
	e.g.Expect(keys(reset)).To(ConsistOf(e.ns + "/deploy"))
	open, total := e.watches.get("alice")
	e.g.Expect(open).To(Equal(1), "alice's two streams share one watch")
	e.g.Expect(total).To(Equal(watched), "the second stream opened no watch")
	e.g.Expect(informers()).To(Equal(1))

	// A third is over the cap.
	third := e.open("alice", "")
	e.g.Expect(third.status).To(Equal(http.StatusTooManyRequests))
	e.g.Expect(third.body).To(ContainSubstring("alice already has 2 live inbox streams open, the most one person may have"))

	// bob reads as himself: his own watch, never alice's.
	bobs := e.open("bob", "")
	e.g.Expect(bobs.status).To(Equal(http.StatusOK), "the cap is per person")
	e.g.Expect(e.next(bobs).Type).To(Equal("reset"))
	e.g.Eventually(func() int { open, _ := e.watches.get("bob"); return open }).Should(Equal(1))
	e.g.Expect(informers()).To(Equal(2))

	// Changes reach each stream of the shared watch, narrowed to its agents.
	e.ask("restart", "other")
	e.ask("migrate", "bot")
	for _, want := range []string{"restart", "migrate"} {
		m := e.next(first)
		e.g.Expect(m.Type).To(Equal("upsert"))
		e.g.Expect(m.Item.Key).To(Equal(e.ns + "/" + want))
	}
	m := e.next(second)
	e.g.Expect(m.Type).To(Equal("upsert"))
	e.g.Expect(m.Item.Key).To(Equal(e.ns+"/migrate"), "the page asked for bot's questions only")

	// The last of alice's streams to close stops her watch.
	first.close()
	e.g.Eventually(func() int { _, n := e.srv.streams.count(); return n }).Should(Equal(2))
	open, _ = e.watches.get("alice")
	e.g.Expect(open).To(Equal(1), "one stream of alice's still reads her watch")
	second.close()
	e.g.Eventually(func() int { open, _ := e.watches.get("alice"); return open }).Should(BeZero())
	e.g.Eventually(informers).Should(Equal(1))

	// Closing the server ends the streams and stops their watches.
	e.srv.Close()
	e.g.Eventually(bobs.msgs).Should(BeClosed())
	e.g.Eventually(func() int { open, _ := e.watches.get("bob"); return open }).Should(BeZero())
	e.g.Eventually(informers).Should(BeZero())
}

func TestAStreamJoinsAWatchOnlyWhileItsPersonMayList(t *testing.T) {
	e := newStreamEnv(t, 8, "carol")
	e.ask("deploy", "bot")
	first := e.open("carol", "")
	reset := e.next(first)
	e.g.Expect(reset.Type).To(Equal("reset"))
	e.g.Expect(keys(reset)).To(ConsistOf(e.ns + "/deploy"))

	// Her rights go; her open page keeps its watch until it expires, as
	// any watch does, but a new page must not be served from it.
	e.revoke("carol")
	second := e.open("carol", "")
	e.g.Expect(second.status).To(Equal(http.StatusOK))
	m := e.next(second)
	e.g.Expect(m.Type).To(Equal("problem"), "no reset from the watch carol could read before")
	e.g.Expect(m.Problem).To(ContainSubstring("cannot watch the questions of namespace " + e.ns))
	e.g.Expect(m.Problem).To(ContainSubstring("forbidden"))
	n, _ := e.srv.streams.count()
	e.g.Expect(n).To(Equal(2), "the new page started a watch of its own")

	// Her rights come back: the new page lists, and later pages join it.
	e.grant("carol")
	e.g.Eventually(func() string {
		for {
			select {
			case m := <-second.msgs:
				if m.Type == "reset" {
					return strings.Join(keys(m), ",")
				}
			default:
				return ""
			}
		}
	}).WithTimeout(time.Minute).Should(Equal(e.ns + "/deploy"))
	third := e.open("carol", "")
	e.g.Expect(e.next(third).Type).To(Equal("reset"))
	n, _ = e.srv.streams.count()
	e.g.Expect(n).To(Equal(2), "the third page joined the second's watch")

	for _, s := range []*stream{first, second, third} {
		s.close()
	}
	e.g.Eventually(func() int { n, _ := e.srv.streams.count(); return n }).Should(BeZero())
	e.g.Eventually(func() int { open, _ := e.watches.get("carol"); return open }).Should(BeZero())
}
