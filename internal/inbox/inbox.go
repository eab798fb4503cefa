// Package inbox is hitl's web inbox: the answerer in a browser. It lists,
// live, the questions a person may answer (server-sent events fed by
// watches), renders each as a card faithful to its intent, holds a claim on
// a timed question while its card is open and the person is active, and
// sends the person's answers as a QuestionReply, showing its outcome.
//
// The same server runs two ways: locally (kubectl hitl inbox --web), acting
// with the kubeconfig's identity behind a one-time token (TokenAuth), and in
// the cluster (cmd/hitl-inbox) behind an authenticating proxy, acting as
// the person the proxy names through impersonation (ProxyAuth,
// ImpersonatingClients). Every call to the API server is made as the
// person, so RBAC and hitl's admission rules apply to them and answeredBy
// is theirs.
package inbox

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

//go:embed templates/*.html static/*
var assets embed.FS

// ClientFunc returns the client that acts as a person.
type ClientFunc func(Person) (client.WithWatch, error)

// Options configure a Server.
type Options struct {
	// Auth tells who sends each request (required).
	Auth Authenticator
	// Clients returns the client acting as a person (required).
	Clients ClientFunc
	// Namespaces are the namespaces whose questions are listed; none means
	// every namespace (the person must be allowed to list cluster-wide).
	Namespaces []string
	// Agents are the agents whose questions are listed; none means all.
	// A page's ?agent=a,b narrows them further.
	Agents []string
	// ClaimDuration is the duration of the claims the server holds
	// for open cards; zero means 30s. The claim is renewed every third of it.
	ClaimDuration time.Duration
	// ClaimIdle releases a claim whose page has not said for this long
	// that its card is still open and its person active (the tab was
	// closed, the laptop slept); zero means 45s.
	ClaimIdle time.Duration
	// ReplyTimeout bounds how long a reply waits for the controller's
	// outcome before the page is told it was sent but not yet decided;
	// zero means 30s.
	ReplyTimeout time.Duration
	// Heartbeat is how often the page reports that a card with a claim is
	// still open and its person active; zero means 10s. The page stops
	// reporting after Inactive without keyboard, pointer or focus activity.
	Heartbeat time.Duration
	// Inactive is how long without activity the page still counts its
	// person as active; zero means 2 minutes.
	Inactive time.Duration
	// MaxStreams bounds the live event streams (open pages) of one
	// person; one more is answered 429. Zero means 8. A person's streams
	// share their watches, one per namespace.
	MaxStreams int
	// Title names the inbox in the page's title and heading.
	Title string
	// Log receives the server's log lines.
	Log logr.Logger
}

// Server is the web inbox's HTTP handler.
type Server struct {
	opts    Options
	mux     *http.ServeMux
	page    *template.Template
	csrfKey []byte
	claims  *claimTable
	streams *streams
	// ctx bounds what outlives a request (claims); Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns a Server; Close releases the claims it still holds and ends
// its event streams.
func New(o Options) (*Server, error) {
	if o.Auth == nil || o.Clients == nil {
		return nil, errors.New("inbox: Auth and Clients are required")
	}
	o.ClaimDuration = orDuration(o.ClaimDuration, 30*time.Second)
	o.ClaimIdle = orDuration(o.ClaimIdle, 45*time.Second)
	o.ReplyTimeout = orDuration(o.ReplyTimeout, 30*time.Second)
	o.Heartbeat = orDuration(o.Heartbeat, 10*time.Second)
	o.Inactive = orDuration(o.Inactive, 2*time.Minute)
	if o.MaxStreams <= 0 {
		o.MaxStreams = 8
	}
	if o.Title == "" {
		o.Title = "hitl inbox"
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	page, err := template.New("").Funcs(funcs).ParseFS(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	served, err := agentSelector(o.Agents)
	if err != nil {
		return nil, err
	}
	key, err := randomString(32)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{opts: o, page: page, csrfKey: []byte(key), ctx: ctx, cancel: cancel}
	s.claims = newClaimTable(ctx, o.ClaimIdle, o.Log)
	s.streams = newStreams(ctx, o.MaxStreams, served, o.Log)
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", s.authenticated(s.servePage))
	// A question's deep link, which every notification carries
	// (hitlv1.InboxQuestionPath): the same page, opening that card.
	mux.Handle("GET "+hitlv1.InboxQuestionPrefix+"{namespace}/{name}", s.authenticated(s.serveQuestionPage))
	mux.Handle("GET /static/", s.authenticated(func(w http.ResponseWriter, r *http.Request, _ Person) {
		w.Header().Set("Cache-Control", "no-cache")
		http.StripPrefix("/static/", http.FileServerFS(static)).ServeHTTP(w, r)
	}))
	mux.Handle("GET /events", s.authenticated(s.serveEvents))
	mux.Handle("POST /api/reply", s.authenticated(s.posted(s.serveReply)))
	mux.Handle("POST /api/claim", s.authenticated(s.posted(s.serveClaim)))
	mux.Handle("POST /api/claim/heartbeat", s.authenticated(s.posted(s.serveHeartbeat)))
	mux.Handle("POST /api/claim/release", s.authenticated(s.posted(s.serveRelease)))
	mux.Handle("POST /api/withdraw", s.authenticated(s.posted(s.serveWithdraw)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	s.mux = mux
	return s, nil
}

// Close releases every claim the server holds and stops what it runs: its
// event streams and their watches.
func (s *Server) Close() {
	s.claims.releaseAll()
	s.cancel()
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// No script but the inbox's own file, no inline script or style, no
	// framing, and nothing loaded from elsewhere: images are the inbox's
	// own or inline (an Approval subject's icon, iconURL).
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// The first URL carries the token: never send it on.
	h.Set("Referrer-Policy", "no-referrer")
	s.mux.ServeHTTP(w, r)
}

type personHandler func(http.ResponseWriter, *http.Request, Person)

func (s *Server) authenticated(h personHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.opts.Auth.Authenticate(w, r)
		if !ok {
			return
		}
		h(w, r, p)
	})
}

// csrfHeader carries the page's CSRF token on every POST.
const csrfHeader = "X-Hitl-Csrf"

// csrfToken is the token of a person's pages: an HMAC of who they are under
// the server's key, so that another site, which cannot read the page,
// cannot forge it.
func (s *Server) csrfToken(p Person) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte(p.key()))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// posted guards a POST against cross-site requests: it must carry the
// page's CSRF token, be JSON (which a cross-site form cannot send without
// a CORS preflight the server never grants), and not be marked cross-site
// by the browser.
func (s *Server) posted(h personHandler) personHandler {
	return func(w http.ResponseWriter, r *http.Request, p Person) {
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
			writeProblem(w, http.StatusForbidden, "", "CSRF: a cross-site request ("+site+") is refused")
			return
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			writeProblem(w, http.StatusUnsupportedMediaType, "", "the request body must be application/json")
			return
		}
		token := r.Header.Get(csrfHeader)
		if token == "" || !hmac.Equal([]byte(token), []byte(s.csrfToken(p))) {
			writeProblem(w, http.StatusForbidden, "", "CSRF: the request lacks the page's token or it is stale: reload the page")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		h(w, r, p)
	}
}

// agents are the agents a page lists: the server's, narrowed by the
// page's ?agent=a,b; none means all. ok is false when the page asks only
// for agents the server does not serve.
func (s *Server) agents(r *http.Request) (agents []string, ok bool) {
	var asked []string
	for _, v := range r.URL.Query()["agent"] {
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				asked = append(asked, a)
			}
		}
	}
	if len(s.opts.Agents) == 0 {
		return asked, true
	}
	if len(asked) == 0 {
		return s.opts.Agents, true
	}
	var out []string
	for _, a := range asked {
		if slices.Contains(s.opts.Agents, a) {
			out = append(out, a)
		}
	}
	return out, len(out) > 0
}

// namespaceServed reports whether the server lists questions of ns.
func (s *Server) namespaceServed(ns string) bool {
	return len(s.opts.Namespaces) == 0 || slices.Contains(s.opts.Namespaces, ns)
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
