package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// pageData is what the page template shows.
type pageData struct {
	Title     string
	User      string
	Scope     string
	CSRF      string
	Heartbeat int64
	Inactive  int64
	// Root leads from the page's path back to the inbox's root, for the
	// page's relative URLs (static files, events, api): "" on the root
	// page, "../../" on a question's deep link. Relative, so that the
	// inbox works under whatever path prefix its proxy serves it at.
	Root string
	// Focus is set on a question's deep link.
	Focus *focusView
}

// focusView is the question a deep link names.
type focusView struct {
	// Key is the question's key in the page's list (namespace/name),
	// whose card the page opens once its list has it.
	Key string
	// Problem, when set, says why the inbox cannot show it at all; the
	// page then does not look for it.
	Problem string
}

func (s *Server) servePage(w http.ResponseWriter, r *http.Request, p Person) {
	s.writePage(w, r, p, "", nil)
}

// serveQuestionPage serves a question's deep link,
// /q/<namespace>/<name>: the inbox page, authenticated as every other
// route is, which opens that question's card when the person's list has
// it, and otherwise says that it is not open for them (gone, finished, or
// not theirs to see). What the page can show is what the person's own
// list holds, so the link reveals nothing their RBAC hides.
func (s *Server) serveQuestionPage(w http.ResponseWriter, r *http.Request, p Person) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	f := &focusView{Key: ns + "/" + name}
	if !s.namespaceServed(ns) {
		f.Problem = fmt.Sprintf("Question %s/%s cannot be shown: this inbox does not serve namespace %s.", ns, name, ns)
	}
	s.writePage(w, r, p, "../../", f)
}

// writePage writes the inbox page for p.
func (s *Server) writePage(w http.ResponseWriter, r *http.Request, p Person, root string, focus *focusView) {
	agents, _ := s.agents(r)
	scope := "all namespaces"
	if len(s.opts.Namespaces) > 0 {
		scope = "namespace " + strings.Join(s.opts.Namespaces, ", ")
	}
	if len(agents) > 0 {
		scope += " · agents " + strings.Join(agents, ", ")
	}
	var buf bytes.Buffer
	err := s.page.ExecuteTemplate(&buf, "page", pageData{
		Title: s.opts.Title, User: p.Username, Scope: scope, CSRF: s.csrfToken(p),
		Heartbeat: s.opts.Heartbeat.Milliseconds(), Inactive: s.opts.Inactive.Milliseconds(),
		Root: root, Focus: focus,
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// item is one question as the page receives it.
type item struct {
	Key   string `json:"key"`
	DomID string `json:"id"`
	RV    string `json:"rv"`
	State string `json:"state"`
	// Active: the question belongs in the list (Open or Continued).
	Active bool   `json:"active"`
	Order  string `json:"order"`
	// Card is the whole card, sent for active questions; Status is the
	// part of it that changes.
	Card   string `json:"card,omitempty"`
	Status string `json:"status"`
	// Digest is the question's status.specDigest, for a card made before
	// the controller wrote it.
	Digest string `json:"digest,omitempty"`
	// Voted: the person has voted on the governed question; the card
	// offers no second vote.
	Voted bool `json:"voted,omitempty"`
}

// message is one server-sent event's data.
type message struct {
	Type string `json:"type"` // reset, upsert, delete, problem
	// Now is the server's clock (Unix ms), for the page's countdowns.
	Now   int64  `json:"now"`
	CSRF  string `json:"csrf,omitempty"`
	Items []item `json:"items,omitempty"`
	Item  *item  `json:"item,omitempty"`
	Key   string `json:"key,omitempty"`
	// Problem says why the list may be incomplete (e.g. RBAC refuses to
	// list the questions of a namespace).
	Problem string `json:"problem,omitempty"`
}

// change is a question's change as the watches saw it.
type change struct {
	typ watch.EventType
	q   *hitlv1.UserQuestion
}

// serveEvents streams the person's questions: first a reset with every
// question the watches have listed, then each change. The page reconciles
// its list with every reset, so a reconnect (EventSource's own) leaves it
// correct. The watches are the informers of the person's identity, shared
// with their other streams (streams); a person may hold Options.MaxStreams
// streams at once.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, p Person) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	agents, ok := s.agents(r)
	if !ok {
		http.Error(w, "none of the agents asked for is served by this inbox", http.StatusBadRequest)
		return
	}
	if _, err := agentSelector(agents); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c, err := s.opts.Clients(p)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel) // Close ends the streams
	defer stop()

	// The informers hold the questions of every agent the server serves;
	// the page may have asked for fewer.
	shown := func(q *hitlv1.UserQuestion) bool {
		return len(agents) == 0 || slices.Contains(agents, q.Labels[hitlv1.AgentLabel])
	}
	changes := make(chan change, 64)
	handler := toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				send(ctx, changes, watch.Added, obj)
			}
		},
		UpdateFunc: func(_, obj any) { send(ctx, changes, watch.Modified, obj) },
		DeleteFunc: func(obj any) { send(ctx, changes, watch.Deleted, obj) },
	}
	namespaces := s.opts.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	sub, err := s.streams.subscribe(ctx, p, c, namespaces, handler)
	if errors.Is(err, errTooManyStreams) {
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("429 Too Many Requests: %s already has %d live inbox streams open, the most one person may have: "+
			"close other inbox tabs, then reload", p.Username, s.opts.MaxStreams), http.StatusTooManyRequests)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer sub.close()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := &sse{w: w, f: flusher}
	out.retry(2 * time.Second)
	now := time.Now
	locs := locales(r)
	// Until every watch has listed, only problems are worth telling.
	synced := make(chan struct{})
	go func() {
		defer close(synced)
		_ = toolscache.WaitForCacheSync(ctx.Done(), sub.synced)
	}()
	waiting := true
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case msg := <-sub.problems:
			out.send(message{Type: "problem", Now: now().UnixMilli(), Problem: msg})
		case <-synced:
			synced = nil
			if ctx.Err() != nil {
				return
			}
			waiting = false
			reset := message{Type: "reset", Now: now().UnixMilli(), CSRF: s.csrfToken(p), Items: []item{}}
			for _, q := range sub.list() {
				if shown(q) {
					reset.Items = append(reset.Items, s.item(q, p, locs, now()))
				}
			}
			out.send(reset)
		case ch := <-changes:
			if waiting || !shown(ch.q) {
				continue // the reset carries it, or the page did not ask for its agent
			}
			if ch.typ == watch.Deleted {
				out.send(message{Type: "delete", Now: now().UnixMilli(), Key: key(ch.q)})
				continue
			}
			it := s.item(ch.q, p, locs, now())
			out.send(message{Type: "upsert", Now: now().UnixMilli(), Item: &it})
		case <-keepalive.C:
			out.comment("keepalive")
		}
		if out.err != nil {
			return
		}
	}
}

// item renders a question for the page.
func (s *Server) item(q *hitlv1.UserQuestion, p Person, locs []string, now time.Time) item {
	c := newCard(q, p, locs, now)
	it := item{Key: c.Key, DomID: c.DomID, RV: q.ResourceVersion, State: c.Status.State, Active: active(q), Order: c.Order,
		Digest: c.Digest, Voted: c.Status.Votes != nil && c.Status.Votes.Mine != nil}
	var buf bytes.Buffer
	if it.Active {
		if err := s.page.ExecuteTemplate(&buf, "card", c); err != nil {
			s.opts.Log.Error(err, "Rendering a card", "question", it.Key)
		}
		it.Card = buf.String()
		buf.Reset()
	}
	if err := s.page.ExecuteTemplate(&buf, "status", c.Status); err != nil {
		s.opts.Log.Error(err, "Rendering a card's status", "question", it.Key)
	}
	it.Status = buf.String()
	return it
}

func send(ctx context.Context, ch chan<- change, typ watch.EventType, obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	q, ok := obj.(*hitlv1.UserQuestion)
	if !ok {
		return
	}
	select {
	case ch <- change{typ: typ, q: q}:
	case <-ctx.Done():
	}
}

// agentSelector selects the questions of agents, or of every agent.
func agentSelector(agents []string) (labels.Selector, error) {
	op, values := selection.In, agents
	if len(agents) == 0 {
		op, values = selection.Exists, nil
	}
	req, err := labels.NewRequirement(hitlv1.AgentLabel, op, values)
	if err != nil {
		return nil, fmt.Errorf("selecting the questions of agents %v: %w", agents, err)
	}
	return labels.NewSelector().Add(*req), nil
}

// sse writes server-sent events.
type sse struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	f   http.Flusher
	err error
}

func (e *sse) send(m message) {
	data, err := json.Marshal(m)
	if err != nil {
		e.err = err
		return
	}
	e.write("data: " + string(data) + "\n\n")
}

func (e *sse) comment(c string)          { e.write(": " + c + "\n\n") }
func (e *sse) retry(after time.Duration) { e.write(fmt.Sprintf("retry: %d\n\n", after.Milliseconds())) }

func (e *sse) write(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return
	}
	if _, err := fmt.Fprint(e.w, s); err != nil {
		e.err = err
		return
	}
	e.f.Flush()
}
