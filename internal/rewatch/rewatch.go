// Package rewatch keeps an informer's watch open through an API server
// outage. client-go's Reflector answers every failed list or watch by
// waiting, and each wait doubles (0.8 s, 1.6 s, 3.2 s, ... up to 30 s, with
// up to as much again of jitter) until two minutes pass without one. An API
// server down for three seconds costs it several failed attempts, and a
// second restart within two minutes finds it waiting 6 to 25 s: all that
// time the manager's cache misses the questions created since, and their
// deadlines pass unwritten.
//
// A ListWatch from Wrap sits between the Reflector and the API server.
// While the API server is unreachable or failing (a refused or cut
// connection, a 5xx, a 429, and a 401 or 403 while it starts up again), it
// tries again itself every second at most, so that the Reflector sees no
// failure and never waits. A watch the outage broke is opened again from
// the last version it delivered; when the API server no longer has that
// version (a restarted API server starts its watch cache afresh), it lists
// what is there now and delivers the difference as watch events: each
// listed object as added or modified, each object the Reflector's store
// holds but the list does not as deleted, then a bookmark at the list's
// version, and watches on from there. The Reflector's store ends as it would
// after a list of its own, without the wait.
package rewatch

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/klog/v2"
)

// Patience is how long a list or watch is tried again before its error is
// left to the Reflector (which then waits, and calls again).
const Patience = time.Minute

// NewInformer is a shared informer over lw whose watches outlast API server
// outages; it has the signature of controller-runtime's
// cache.Options.NewInformer.
func NewInformer(lw toolscache.ListerWatcher, example runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	w := Wrap(lw, example)
	inf := toolscache.NewSharedIndexInformer(w, example, resync, indexers)
	w.SetStore(inf.GetStore())
	return inf
}

// ListWatch is a ListerWatcher that keeps its watches open through API
// server outages (see the package comment).
type ListWatch struct {
	inner   toolscache.ListerWatcherWithContext
	example runtime.Object
	// noWatchList is whether inner keeps the Reflector on list-then-watch.
	noWatchList bool
	// retry paces the attempts while the API server fails; patience bounds
	// them.
	retry    wait.Backoff
	patience time.Duration

	mu sync.Mutex
	// store is the informer's: where an object deleted during an outage is
	// found, to be delivered as deleted.
	store toolscache.Store
	// keys are the objects the Reflector's store holds once it has taken
	// in everything delivered so far: the last list's, and every watch
	// event's since.
	keys map[string]struct{}
	// troubled is when the API server last failed, zero once it answered.
	troubled time.Time
	// answered is whether the API server ever answered: until it has, its
	// failures are the caller's to see at once (a wrong address, an API
	// server not started), not an outage to wait out.
	answered bool
}

// Wrap returns a ListWatch over lw. example is an object of the type lw
// lists (its bookmarks are made from it).
func Wrap(lw toolscache.ListerWatcher, example runtime.Object) *ListWatch {
	return &ListWatch{
		inner:       toolscache.ToListerWatcherWithContext(lw),
		example:     example,
		noWatchList: watchlist.DoesClientNotSupportWatchListSemantics(lw),
		retry:       wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: time.Second},
		patience:    Patience,
		keys:        map[string]struct{}{},
	}
}

// SetStore gives the ListWatch the informer's store, where the last state
// of an object deleted during an outage is found. Without one, such an
// object is delivered as deleted with its namespace and name only.
func (l *ListWatch) SetStore(s toolscache.Store) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.store = s
}

// IsWatchListSemanticsUnSupported is the wrapped ListerWatcher's answer.
func (l *ListWatch) IsWatchListSemanticsUnSupported() bool { return l.noWatchList }

// List implements toolscache.ListerWatcher.
func (l *ListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

// Watch implements toolscache.ListerWatcher.
func (l *ListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

// ListWithContext lists through the API server's failures, and notes what
// the Reflector's store will hold.
func (l *ListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	var list runtime.Object
	if err := l.retrying(ctx, func() (err error) { list, err = l.inner.ListWithContext(ctx, opts); return err }); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if opts.Continue == "" {
		// A new list replaces the store; its later pages add to it.
		clear(l.keys)
	}
	for _, it := range items {
		if key, err := toolscache.MetaNamespaceKeyFunc(it); err == nil {
			l.keys[key] = struct{}{}
		}
	}
	return list, nil
}

// WatchWithContext opens a watch through the API server's failures; the
// watch it returns resumes itself when an outage breaks it.
func (l *ListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if initial {
		// A stream that starts with every object replaces the store.
		l.mu.Lock()
		clear(l.keys)
		l.mu.Unlock()
	}
	w, err := l.open(ctx, opts)
	if err != nil && (initial || !gone(err)) {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &stream{l: l, ctx: sctx, cancel: cancel, out: make(chan watch.Event), opts: opts, rv: opts.ResourceVersion, initial: initial}
	// A version the API server no longer has (w is nil): the stream starts
	// with the difference from what it has now.
	go s.run(w)
	return s, nil
}

// open opens a watch through the API server's failures.
func (l *ListWatch) open(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	var w watch.Interface
	err := l.retrying(ctx, func() (err error) { w, err = l.inner.WatchWithContext(ctx, opts); return err })
	return w, err
}

// retrying calls call until it succeeds, fails for good, ctx ends, or the
// API server has failed for longer than the patience.
func (l *ListWatch) retrying(ctx context.Context, call func() error) error {
	b := l.retry
	for {
		err := call()
		if err == nil {
			l.answer()
			return nil
		}
		if ctx.Err() != nil || !l.failing(err) {
			return err
		}
		klog.FromContext(ctx).V(4).Info("The API server failed; trying again", "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(b.Step()):
		}
	}
}

// failing reports whether err is the API server failing (or starting up
// again after failing) within the patience, after it once answered, and
// notes when the failure began.
func (l *ListWatch) failing(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.answered {
		return false
	}
	now := time.Now()
	switch {
	case unavailable(err):
		if l.troubled.IsZero() {
			l.troubled = now
		}
	case (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) && !l.troubled.IsZero():
		// An API server that just came back refuses everyone until it has
		// read its authorization rules.
	default:
		return false
	}
	return now.Sub(l.troubled) < l.patience
}

func (l *ListWatch) answer() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.troubled, l.answered = time.Time{}, true
}

// unavailable reports whether err says the API server is out of reach or
// failing, rather than refusing the request.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || gone(err) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == 429 || code >= 500
	}
	// Not an answer of the API server: the connection failed.
	return true
}

// gone reports whether err says the API server no longer has the version
// a watch asked for.
func gone(err error) bool { return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) }

// eventKey is the store key of an event that changes the Reflector's
// store; ok is false for any other event.
func eventKey(ev watch.Event) (key string, ok bool) {
	if ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted {
		return "", false
	}
	key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(ev.Object)
	return key, err == nil
}

// note records what a delivered event (of type t, for the object under
// key) leaves in the Reflector's store.
func (l *ListWatch) note(t watch.EventType, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t == watch.Deleted {
		delete(l.keys, key)
	} else {
		l.keys[key] = struct{}{}
	}
}

// held returns the keys the Reflector's store holds, and a function giving
// the object the informer's store has under a key (shared: not to be
// changed), when it has one.
func (l *ListWatch) held() (map[string]struct{}, func(key string) (runtime.Object, bool)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make(map[string]struct{}, len(l.keys))
	for k := range l.keys {
		keys[k] = struct{}{}
	}
	store := l.store
	return keys, func(key string) (runtime.Object, bool) {
		if store == nil {
			return nil, false
		}
		obj, ok, err := store.GetByKey(key)
		if err != nil || !ok {
			return nil, false
		}
		o, isObject := obj.(runtime.Object)
		return o, isObject
	}
}

// lastState is what is delivered as deleted for key: a copy of the
// store's object (the informer's transform may change what it is given),
// or one with its namespace and name only when the store has none yet.
func (l *ListWatch) lastState(key string, stored func(string) (runtime.Object, bool)) runtime.Object {
	if o, ok := stored(key); ok {
		return o.DeepCopyObject()
	}
	o := l.example.DeepCopyObject()
	if m, err := meta.Accessor(o); err == nil {
		ns, name, _ := toolscache.SplitMetaNamespaceKey(key)
		m.SetNamespace(ns)
		m.SetName(name)
	}
	return o
}

// stream is a watch that resumes itself after an outage.
type stream struct {
	l      *ListWatch
	ctx    context.Context
	cancel context.CancelFunc
	out    chan watch.Event
	opts   metav1.ListOptions
	// rv is the version of the last event delivered.
	rv string
	// initial is whether the stream still delivers the objects a watch
	// asked to start with (a Reflector's watch-list): an outage then ends
	// it, and the Reflector starts over.
	initial bool
}

func (s *stream) Stop()                          { s.cancel() }
func (s *stream) ResultChan() <-chan watch.Event { return s.out }

// end is how forwarding one watch ended.
type end int

const (
	// closed: a watch-list ended before its initial events did; the
	// Reflector starts over.
	closed end = iota
	// broken: an outage broke it, or it ended; it is opened again from rv.
	broken
	// expired: the API server no longer has rv; the stream lists.
	expired
	// stopped: the Reflector stopped it, or a failure was delivered to it.
	stopped
)

func (s *stream) run(w watch.Interface) {
	defer close(s.out)
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	for {
		if w == nil {
			var err error
			if w, err = s.resync(); err != nil {
				if !gone(err) {
					s.fail(err)
					return
				}
				continue
			}
		}
		switch s.forward(w) {
		case closed, stopped:
			return
		case expired:
			w.Stop()
			w = nil
		case broken:
			w.Stop()
			var err error
			if w, err = s.l.open(s.ctx, s.resume()); err != nil && !gone(err) {
				s.fail(err)
				return
			}
			if w != nil {
				klog.FromContext(s.ctx).V(2).Info("Resumed a watch an outage broke", "resourceVersion", s.rv)
			}
		}
	}
}

// forward delivers w's events until it ends.
func (s *stream) forward(w watch.Interface) end {
	for {
		select {
		case <-s.ctx.Done():
			return stopped
		case ev, ok := <-w.ResultChan():
			if !ok {
				if s.initial {
					return closed
				}
				// The API server ended the watch (its timeout), or the
				// connection dropped without a word (an API server
				// killed): either way it is opened again from rv, here,
				// where an outage is waited out a second at a time.
				return broken
			}
			if ev.Type == watch.Error && !s.initial {
				err := apierrors.FromObject(ev.Object)
				switch {
				case gone(err):
					return expired
				case unavailable(err):
					s.l.failing(err)
					return broken
				}
			}
			if !s.deliver(ev) {
				return stopped
			}
			if ev.Type == watch.Error {
				return stopped
			}
		}
	}
}

// deliver passes ev on to the Reflector. What it notes of the event is
// read before: once delivered, the object belongs to the informer, whose
// transform may change it.
func (s *stream) deliver(ev watch.Event) bool {
	var (
		rv, key               string
		hasMeta, keyed, ended bool
	)
	if ev.Type != watch.Error {
		if m, err := meta.Accessor(ev.Object); err == nil {
			hasMeta, rv = true, m.GetResourceVersion()
			ended = ev.Type == watch.Bookmark && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
		}
		key, keyed = eventKey(ev)
	}
	select {
	case <-s.ctx.Done():
		return false
	case s.out <- ev:
	}
	if keyed {
		s.l.note(ev.Type, key)
	}
	if ev.Type == watch.Error {
		return true
	}
	if hasMeta {
		s.rv = rv
		if ended {
			s.initial = false
		}
	}
	return true
}

// fail delivers err to the Reflector, which ends the watch and waits.
func (s *stream) fail(err error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	s.deliver(watch.Event{Type: watch.Error, Object: &st})
}

// resume is the options of a watch that continues from rv.
func (s *stream) resume() metav1.ListOptions {
	o := s.opts
	o.ResourceVersion = s.rv
	o.SendInitialEvents = nil
	o.ResourceVersionMatch = ""
	return o
}

// resync lists what the API server holds now, delivers the difference
// from what the Reflector's store holds, and opens a watch from the list.
func (s *stream) resync() (watch.Interface, error) {
	opts := metav1.ListOptions{LabelSelector: s.opts.LabelSelector, FieldSelector: s.opts.FieldSelector}
	var list runtime.Object
	if err := s.l.retrying(s.ctx, func() (err error) { list, err = s.l.inner.ListWithContext(s.ctx, opts); return err }); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	held, stored := s.l.held()
	unchanged := 0
	for _, it := range items {
		key, err := toolscache.MetaNamespaceKeyFunc(it)
		if err != nil {
			continue
		}
		typ := watch.Added
		if _, ok := held[key]; ok {
			typ = watch.Modified
			delete(held, key)
			if same(stored, key, it) {
				// Nothing to tell the informer: no update for every
				// object after every outage.
				unchanged++
				continue
			}
		}
		if !s.deliver(watch.Event{Type: typ, Object: it}) {
			return nil, s.ctx.Err()
		}
	}
	for key := range held {
		if !s.deliver(watch.Event{Type: watch.Deleted, Object: s.l.lastState(key, stored)}) {
			return nil, s.ctx.Err()
		}
	}
	mark := s.l.example.DeepCopyObject()
	m, err := meta.Accessor(mark)
	if err != nil {
		return nil, err
	}
	m.SetResourceVersion(lm.GetResourceVersion())
	if !s.deliver(watch.Event{Type: watch.Bookmark, Object: mark}) {
		return nil, s.ctx.Err()
	}
	klog.FromContext(s.ctx).V(2).Info("Listed again after an outage", "objects", len(items), "unchanged", unchanged, "gone", len(held), "resourceVersion", s.rv)
	return s.l.open(s.ctx, s.resume())
}

// same reports whether the store already has obj's version under key.
func same(stored func(string) (runtime.Object, bool), key string, obj runtime.Object) bool {
	o, ok := stored(key)
	if !ok {
		return false
	}
	a, err1 := meta.Accessor(o)
	b, err2 := meta.Accessor(obj)
	return err1 == nil && err2 == nil && a.GetUID() == b.GetUID() && a.GetResourceVersion() == b.GetResourceVersion()
}
