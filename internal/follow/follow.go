// Package follow is how hitl's SDKs follow UserQuestions: a client-go
// informer (a Reflector over a ListWatch of the controller-runtime client)
// scoped on the server by namespace, label selector and, optionally, one
// name. The Reflector lists, watches from the list's resourceVersion,
// resumes a watch the API server closed from the last version it saw, and
// lists again when that version expired; through an API server outage,
// rewatch tries again every second and resumes the watch itself. Nothing
// polls. The agent and the answerer SDKs both follow questions through it.
package follow

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/rewatch"
)

// Event is a change to a followed question.
type Event struct {
	// Type is watch.Added, watch.Modified or watch.Deleted.
	Type watch.EventType
	// Question is the question as of the change; for Deleted, the last
	// state known of it. The receiver owns it.
	Question *hitlv1.UserQuestion
}

// Options say which questions to follow. The API server applies every one
// of them: nothing is filtered on the client.
type Options struct {
	Client    client.WithWatch
	Namespace string
	// Labels selects the questions, e.g. by hitl.dev/agent.
	Labels labels.Selector
	// Name, when set, follows that one question.
	Name string
	// StopOnRefusal ends the stream when the API server refuses a list or
	// a watch for good (403, 401, 404, ...): Err then says why. Otherwise
	// every error is retried, with the Reflector's backoff.
	StopOnRefusal bool
}

// Stream is one started follow.
type Stream struct {
	// Initial is the first list, in the API server's order.
	Initial []*hitlv1.UserQuestion

	events chan Event
	stop   context.CancelFunc

	mu  sync.Mutex
	err error
}

// Start lists the questions o selects and returns them as Initial, then
// follows them: every later change arrives on Events, in order, until ctx
// ends (or, with StopOnRefusal, the API server refuses). A question seen
// again by a list after an expired watch is sent only when it changed;
// one that went meanwhile is sent as Deleted; one deleted and created again
// under its name as Deleted then Added. The first list's error is Start's.
func Start(ctx context.Context, o Options) (*Stream, error) {
	runCtx, stop := context.WithCancel(ctx)
	// The Reflector logs through the context's logger, at debug level, as
	// a library should: the caller's logger when ctx carries one, and
	// nothing otherwise (never klog's or controller-runtime's global one,
	// which would write to a command's terminal).
	runCtx = klog.NewContext(runCtx, logr.FromContextOrDiscard(ctx).V(1))
	s := &Stream{events: make(chan Event), stop: stop}

	first := make(chan error, 1)
	var once sync.Once
	// Its watch outlasts API server outages (see rewatch): an agent waiting
	// for its answer hears of it as soon as the API server is back.
	lw := rewatch.Wrap(&listWatch{o: o, listed: func(err error) { once.Do(func() { first <- err }) }}, &hitlv1.UserQuestion{})
	inf := cache.NewSharedIndexInformerWithOptions(lw, &hitlv1.UserQuestion{}, cache.SharedIndexInformerOptions{
		ObjectDescription: "hitl questions",
	})
	lw.SetStore(inf.GetStore())
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		if ctx.Err() == nil && o.StopOnRefusal && Refused(err) {
			s.fail(err)
		}
	}); err != nil {
		stop()
		return nil, err
	}
	reg, err := inf.AddEventHandler(&handler{ctx: runCtx, s: s})
	if err != nil {
		stop()
		return nil, err
	}

	ended := make(chan struct{})
	go func() {
		defer close(ended)
		inf.RunWithContext(runCtx)
	}()
	go func() {
		<-ended
		close(s.events)
	}()

	select {
	case <-reg.HasSyncedChecker().Done():
		return s, nil
	case err := <-first:
		if err == nil {
			// The list arrived; its items reach the handler before the
			// registration reports synced.
			select {
			case <-reg.HasSyncedChecker().Done():
				return s, nil
			case <-runCtx.Done():
			}
		}
		stop()
		<-ended
		if err == nil {
			err = s.Err()
		}
		if err == nil {
			err = ctx.Err()
		}
		return nil, err
	case <-runCtx.Done():
		<-ended
		if err := s.Err(); err != nil {
			return nil, err
		}
		return nil, ctx.Err()
	}
}

// Events delivers the changes after Initial. It is closed when the stream
// ends.
func (s *Stream) Events() <-chan Event { return s.events }

// Err is why the stream ended before its context did: the API server's
// refusal. It is nil while the stream runs and when its context ended.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Stop ends the stream.
func (s *Stream) Stop() { s.stop() }

func (s *Stream) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.stop()
}

// Refused reports whether the API server refused a request for good,
// rather than being unreachable, overloaded, failing, or past the
// resourceVersion asked for (which the Reflector handles by listing again).
func Refused(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	return !(apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err))
}

// handler turns the informer's notifications into Events. The informer
// calls it from one goroutine, in order, with a buffer of its own in front,
// so blocking on the receiver holds nothing else up.
type handler struct {
	ctx context.Context
	s   *Stream
}

func (h *handler) OnAdd(obj any, initial bool) {
	q, ok := obj.(*hitlv1.UserQuestion)
	if !ok {
		return
	}
	if initial {
		h.s.Initial = append(h.s.Initial, q.DeepCopy())
		return
	}
	h.send(watch.Added, q)
}

func (h *handler) OnUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*hitlv1.UserQuestion)
	q, ok2 := newObj.(*hitlv1.UserQuestion)
	switch {
	case !ok1 || !ok2:
	case old.UID != q.UID:
		// Deleted and created again under its name while no watch saw it.
		if h.send(watch.Deleted, old) {
			h.send(watch.Added, q)
		}
	case old.ResourceVersion != q.ResourceVersion:
		h.send(watch.Modified, q)
	}
	// The same version again: a list after an expired watch saw it
	// unchanged.
}

func (h *handler) OnDelete(obj any) {
	if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = gone.Obj
	}
	if q, ok := obj.(*hitlv1.UserQuestion); ok {
		h.send(watch.Deleted, q)
	}
}

// send delivers one event; it reports false when the stream ended first.
func (h *handler) send(t watch.EventType, q *hitlv1.UserQuestion) bool {
	select {
	case h.s.events <- Event{Type: t, Question: q.DeepCopy()}:
		return true
	case <-h.ctx.Done():
		return false
	}
}

// listWatch lists and watches the selected questions with the
// controller-runtime client.
type listWatch struct {
	o Options
	// listed gets the result of every list; Start takes the first.
	listed func(error)
}

// IsWatchListSemanticsUnSupported keeps the Reflector on list-then-watch:
// the first list is a plain consistent list whose error Start returns, and
// tests' watch fakes need not stream initial events.
func (lw *listWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (lw *listWatch) options(raw metav1.ListOptions) *client.ListOptions {
	// Limit and Continue are the pager's (controller-runtime copies them
	// over Raw's for a list).
	o := &client.ListOptions{Namespace: lw.o.Namespace, LabelSelector: lw.o.Labels, Limit: raw.Limit, Continue: raw.Continue, Raw: &raw}
	if lw.o.Name != "" {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", lw.o.Name)
	}
	return o
}

func (lw *listWatch) ListWithContext(ctx context.Context, raw metav1.ListOptions) (runtime.Object, error) {
	if raw.ResourceVersion == "0" {
		// The Reflector's first list may be served from any version the
		// API server's cache holds; a question created just before would
		// then be missing. Read the current state instead.
		raw.ResourceVersion = ""
	}
	l := &hitlv1.UserQuestionList{}
	err := lw.o.Client.List(ctx, l, lw.options(raw))
	lw.listed(err)
	if err != nil {
		return nil, fmt.Errorf("listing questions: %w", err)
	}
	return l, nil
}

func (lw *listWatch) WatchWithContext(ctx context.Context, raw metav1.ListOptions) (watch.Interface, error) {
	return lw.o.Client.Watch(ctx, &hitlv1.UserQuestionList{}, lw.options(raw))
}

func (lw *listWatch) List(raw metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), raw)
}

func (lw *listWatch) Watch(raw metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), raw)
}
