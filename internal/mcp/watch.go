package mcp

import (
	"context"
	"fmt"
	"reflect"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/internal/follow"
	"github.com/hitl-dev/hitl/internal/rewatch"
)

// The waiting calls of one agent share one watch of its questions: an
// informer (internal/rewatch over a list and watch of the caller's client)
// scoped on the API server by namespace and the hitl.dev/agent label,
// which keeps of each question only what tells whether it left Open (see
// slim), and wakes the calls waiting on a question when it leaves Open, is
// deleted, or is replaced under its name. The list and watch hand the
// whole question that left Open to the calls waiting on it as it arrives,
// before the informer takes it in (see handOver), and a woken call returns
// that, as agent.Wait returns the event's question: the answer costs no
// read of its own between the watch and the call's result. A call woken
// without it (a deleted question, another under its name) reads its
// question (a consistent read) and returns it, or waits on. The informer
// resumes a watch the API server ended from the last version it saw, and
// lists again when that version expired, delivering what changed
// meanwhile: no change is lost across a watch's end. A watch serves every
// call of the same client, namespace and agent, of any Server in the
// process; it stops linger after its last call stopped waiting, or when
// the API server refuses it for good (its waiting calls then fail with the
// refusal).
//
// A call registers before it reads its question, so that a change after
// the read wakes it (and hands it the question), and a change before shows
// in the read; nothing depends on how far the shared watch has got. A
// waiting call holds no goroutine of its own, only an entry in its watch's
// map, which it removes when it returns. The first call of an agent (or
// the first after linger without one) starts the watch and waits for its
// first list; the others find it open.

// linger is how long a watch that no call waits on stays open: a client
// goes on with wait_for_answer as soon as a call returns still waiting,
// and finds the watch open.
var linger = 30 * time.Second

// watches are the process's shared watches.
var watches = &registry{open: map[watchKey]*watcher{}}

// watchKey is what a shared watch serves: the calls that act through one
// client (or, for a client that cannot be a map key, one Caller.Key) as
// one agent in one namespace.
type watchKey struct {
	client    any
	namespace string
	agent     string
}

func keyOf(c *Caller) watchKey {
	var id any = c.Key
	if c.Client != nil && reflect.TypeOf(c.Client).Comparable() {
		id = c.Client
	}
	return watchKey{client: id, namespace: c.Namespace, agent: c.Agent}
}

// registry holds the open watches and their waiting calls; its mutex
// guards every watcher's waiters too.
type registry struct {
	mu   sync.Mutex
	open map[watchKey]*watcher
}

// watcher is one shared watch.
type watcher struct {
	key  watchKey
	stop context.CancelFunc
	// ready is closed once the first list is in, or the watch failed.
	ready     chan struct{}
	readyOnce sync.Once
	// ended is closed once the informer stopped.
	ended chan struct{}

	// Guarded by registry.mu:
	// err is why the watch failed: its first list's error, or a refusal.
	err error
	// waiters are the calls waiting, by question name.
	waiters map[string]map[*waiter]struct{}
	count   int
	// idle stops the watch linger after its last waiter went; gen tells
	// a timer that fired late from the current one.
	idle *time.Timer
	gen  uint64
}

// waiter is one waiting call.
type waiter struct {
	w    *watcher
	name string
	// wake holds one token when the question may have left Open since the
	// waiter last took it: the waiter takes left, or else reads its
	// question again.
	wake chan struct{}
	// left is, guarded by registry.mu, the newest state of the question
	// that the list or watch delivered since the waiter registered, once
	// it left Open; the waiter takes it (take) when woken.
	left *hitlv1.UserQuestion
}

// register adds a call waiting on question name of c's agent to the shared
// watch, starting the watch when none is open, and returns once the watch
// has listed. The caller must unregister the waiter.
func (r *registry) register(ctx context.Context, c *Caller, name string) (*waiter, error) {
	key := keyOf(c)
	r.mu.Lock()
	w := r.open[key]
	if w == nil {
		w = r.start(key, c.Client)
	}
	wt := &waiter{w: w, name: name, wake: make(chan struct{}, 1)}
	set := w.waiters[name]
	if set == nil {
		set = map[*waiter]struct{}{}
		w.waiters[name] = set
	}
	set[wt] = struct{}{}
	w.count++
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
		w.gen++
	}
	r.mu.Unlock()
	select {
	case <-w.ready:
	case <-ctx.Done():
		r.unregister(wt)
		return nil, ctx.Err()
	}
	if err := r.failed(wt); err != nil {
		r.unregister(wt)
		return nil, err
	}
	return wt, nil
}

// unregister removes a waiter; the watch stops linger after its last one.
func (r *registry) unregister(wt *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := wt.w
	set, ok := w.waiters[wt.name]
	if _, in := set[wt]; !ok || !in {
		return
	}
	delete(set, wt)
	if len(set) == 0 {
		delete(w.waiters, wt.name)
	}
	if w.count--; w.count > 0 || w.err != nil {
		return
	}
	w.gen++
	gen := w.gen
	w.idle = time.AfterFunc(linger, func() { r.retire(w, gen) })
}

// retire stops a watch nobody waited on since the timer gen was set.
func (r *registry) retire(w *watcher, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.count > 0 || w.gen != gen {
		return
	}
	w.idle = nil
	if r.open[w.key] == w {
		delete(r.open, w.key)
	}
	w.stop()
}

// fail ends a watch the API server refused (or whose first list failed):
// its waiters are woken and find err; later calls start a new watch.
func (r *registry) fail(w *watcher, err error) {
	r.mu.Lock()
	if w.err == nil {
		w.err = err
		if r.open[w.key] == w {
			delete(r.open, w.key)
		}
		if w.idle != nil {
			w.idle.Stop()
			w.idle = nil
		}
		for _, set := range w.waiters {
			for wt := range set {
				wt.poke()
			}
		}
	}
	r.mu.Unlock()
	w.readyOnce.Do(func() { close(w.ready) })
	w.stop()
}

// failed is why the waiter's watch failed, nil while it runs.
func (r *registry) failed(wt *waiter) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return wt.w.err
}

// wakeAll wakes the waiters of question name.
func (r *registry) wakeAll(w *watcher, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for wt := range w.waiters[name] {
		wt.poke()
	}
}

// handOver gives q, the whole question as the list or watch of w
// delivered it, to the calls waiting on it when it left Open, and wakes
// them: they return it without reading it again. Leaving Open is for good,
// so that whatever a call read before, q is no older. Questions still Open
// wake nobody here; a deletion or a replacement wakes through wakeHandler.
func (r *registry) handOver(w *watcher, q *hitlv1.UserQuestion) {
	if !q.LeftOpen() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for wt := range w.waiters[q.Name] {
		wt.left = q
		wt.poke()
	}
}

// take is the question the watch handed the waiter since it last took
// one, nil if none: a copy, as several waiters may hold the same.
func (r *registry) take(wt *waiter) *hitlv1.UserQuestion {
	r.mu.Lock()
	q := wt.left
	wt.left = nil
	r.mu.Unlock()
	if q == nil {
		return nil
	}
	return q.DeepCopy()
}

func (wt *waiter) poke() {
	select {
	case wt.wake <- struct{}{}:
	default:
	}
}

// start opens the shared watch of key through c; r.mu is held.
func (r *registry) start(key watchKey, c client.WithWatch) *watcher {
	ctx, stop := context.WithCancel(context.Background())
	// The Reflector logs through the context's logger, at debug level:
	// here nowhere (never klog's global logger, which writes to stderr).
	ctx = klog.NewContext(ctx, logr.Discard())
	w := &watcher{key: key, stop: stop, ready: make(chan struct{}), ended: make(chan struct{}), waiters: map[string]map[*waiter]struct{}{}}
	r.open[key] = w

	sel := labels.SelectorFromSet(labels.Set{hitlv1.AgentLabel: key.agent})
	lw := rewatch.Wrap(&questionsLW{c: c, namespace: key.namespace, labels: sel, saw: func(q *hitlv1.UserQuestion) { r.handOver(w, q) }, listed: func(err error) {
		if err != nil {
			// The first list's error is the waiting calls'; a later one
			// the Reflector tries again.
			select {
			case <-w.ready:
			default:
				r.fail(w, fmt.Errorf("following the questions of agent %s in %s: %w", key.agent, key.namespace, validation.FromAPIError(err)))
			}
		}
	}}, &hitlv1.UserQuestion{})
	inf := cache.NewSharedIndexInformerWithOptions(lw, &hitlv1.UserQuestion{}, cache.SharedIndexInformerOptions{
		ObjectDescription: "hitl questions of agent " + key.agent,
	})
	lw.SetStore(inf.GetStore())
	// Neither fails on an informer not yet started.
	_ = inf.SetTransform(slim)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		if ctx.Err() == nil && follow.Refused(err) {
			r.fail(w, fmt.Errorf("following the questions of agent %s in %s: %w", key.agent, key.namespace, validation.FromAPIError(err)))
		}
	})
	reg, err := inf.AddEventHandler(&wakeHandler{r: r, w: w})
	if err != nil {
		// Only an informer that stopped refuses a handler.
		w.err = err
		delete(r.open, key)
		close(w.ready)
		close(w.ended)
		stop()
		return w
	}
	// Its goroutines, and those the informer starts, carry the label
	// watchLabel: a goroutine profile tells them apart.
	pprof.Do(ctx, pprof.Labels(watchLabel, key.namespace+"/"+key.agent), func(ctx context.Context) {
		go func() {
			defer close(w.ended)
			inf.RunWithContext(ctx)
		}()
		go func() {
			select {
			case <-reg.HasSyncedChecker().Done():
				w.readyOnce.Do(func() { close(w.ready) })
			case <-ctx.Done():
			}
		}()
	})
	return w
}

// watchLabel is the profiler label of a shared watch's goroutines; its
// value is the watch's namespace/agent.
const watchLabel = "hitl-mcp-watch"

// wakeHandler wakes the waiters of a question that left Open, went, or was
// replaced under its name. The informer calls it from one goroutine.
type wakeHandler struct {
	r *registry
	w *watcher
}

func (h *wakeHandler) OnAdd(obj any, _ bool) {
	if q, ok := obj.(*hitlv1.UserQuestion); ok && q.LeftOpen() {
		h.r.wakeAll(h.w, q.Name)
	}
}

func (h *wakeHandler) OnUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*hitlv1.UserQuestion)
	q, ok2 := newObj.(*hitlv1.UserQuestion)
	if ok1 && ok2 && (q.LeftOpen() || old.UID != q.UID) {
		h.r.wakeAll(h.w, q.Name)
	}
}

func (h *wakeHandler) OnDelete(obj any) {
	if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = gone.Obj
	}
	if q, ok := obj.(*hitlv1.UserQuestion); ok {
		h.r.wakeAll(h.w, q.Name)
	}
}

// slim is what the shared watch keeps of a question: enough to tell a
// change of its state, or of the object under its name. A woken call reads
// the whole question. It is idempotent, as the informer requires.
func slim(obj any) (any, error) {
	q, ok := obj.(*hitlv1.UserQuestion)
	if !ok {
		return obj, nil
	}
	return &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Namespace: q.Namespace, Name: q.Name, UID: q.UID, ResourceVersion: q.ResourceVersion},
		Status:     hitlv1.UserQuestionStatus{State: q.Status.State},
	}, nil
}

// wait waits until c's question name leaves Open and returns it, as
// agent.Wait does, through the shared watch: a question that is missing,
// another agent's, or deleted (or replaced under its name) while the call
// waits is NOT_ANSWERABLE; an error of the API server, or the end of ctx,
// is returned. It reads the question once, after registering; when the
// watch hands it the question that left Open, it returns that without a
// second read.
func wait(ctx context.Context, c *Caller, name string) (*hitlv1.UserQuestion, error) {
	wt, err := watches.register(ctx, c, name)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting for question %s: %w", name, ctx.Err())
		}
		return nil, err
	}
	defer watches.unregister(wt)
	var uid types.UID
	q, err := get(ctx, c, name)
	for {
		switch {
		case err != nil:
			return nil, err
		case uid != "" && q.UID != uid:
			return nil, missing(c, name)
		case q.LeftOpen():
			return q, nil
		}
		uid = q.UID
		select {
		case <-wt.wake:
			if err := watches.failed(wt); err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for question %s: %w", name, ctx.Err())
		}
		if left := watches.take(wt); left != nil && left.UID == uid && left.Labels[hitlv1.AgentLabel] == c.Agent {
			return left, nil
		}
		q, err = get(ctx, c, name)
	}
}

// missing is the NOT_ANSWERABLE error of a question the agent cannot see,
// as get returns it.
func missing(c *Caller, name string) error {
	return &validation.Error{Code: hitlv1.CodeNotAnswerable, Field: "question",
		Rule: fmt.Sprintf("question %s of agent %s does not exist in namespace %s", name, c.Agent, c.Namespace)}
}

// questionsLW lists and watches the questions of one agent.
type questionsLW struct {
	c         client.WithWatch
	namespace string
	labels    labels.Selector
	// saw gets every question a list or a watch event delivers, as it
	// arrives: it must not block, nor change the question.
	saw func(*hitlv1.UserQuestion)
	// listed gets the result of every list.
	listed func(error)
}

// IsWatchListSemanticsUnSupported keeps the Reflector on list-then-watch:
// the first list is a plain consistent list whose error the waiting calls
// get.
func (lw *questionsLW) IsWatchListSemanticsUnSupported() bool { return true }

func (lw *questionsLW) options(raw metav1.ListOptions) *client.ListOptions {
	// Limit and Continue are the pager's (controller-runtime copies them
	// over Raw's for a list).
	return &client.ListOptions{Namespace: lw.namespace, LabelSelector: lw.labels, Limit: raw.Limit, Continue: raw.Continue, Raw: &raw}
}

func (lw *questionsLW) ListWithContext(ctx context.Context, raw metav1.ListOptions) (runtime.Object, error) {
	if raw.ResourceVersion == "0" {
		// The current state, not whatever version the API server's
		// cache holds.
		raw.ResourceVersion = ""
	}
	l := &hitlv1.UserQuestionList{}
	err := lw.c.List(ctx, l, lw.options(raw))
	lw.listed(err)
	if err != nil {
		return nil, fmt.Errorf("listing questions: %w", err)
	}
	for i := range l.Items {
		lw.saw(&l.Items[i])
	}
	return l, nil
}

func (lw *questionsLW) WatchWithContext(ctx context.Context, raw metav1.ListOptions) (watch.Interface, error) {
	w, err := lw.c.Watch(ctx, &hitlv1.UserQuestionList{}, lw.options(raw))
	if err != nil {
		return nil, err
	}
	s := &sawWatch{inner: w, saw: lw.saw, out: make(chan watch.Event), stop: make(chan struct{})}
	go s.run()
	return s, nil
}

// sawWatch passes a watch's events on, showing each question to saw first.
type sawWatch struct {
	inner watch.Interface
	saw   func(*hitlv1.UserQuestion)
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func (s *sawWatch) Stop()                          { s.once.Do(func() { close(s.stop) }) }
func (s *sawWatch) ResultChan() <-chan watch.Event { return s.out }

func (s *sawWatch) run() {
	defer close(s.out)
	defer s.inner.Stop()
	for {
		select {
		case <-s.stop:
			return
		case ev, ok := <-s.inner.ResultChan():
			if !ok {
				return
			}
			if q, isQ := ev.Object.(*hitlv1.UserQuestion); isQ && ev.Type != watch.Bookmark && ev.Type != watch.Error {
				s.saw(q)
			}
			select {
			case s.out <- ev:
			case <-s.stop:
				return
			}
		}
	}
}

func (lw *questionsLW) List(raw metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), raw)
}

func (lw *questionsLW) Watch(raw metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), raw)
}
