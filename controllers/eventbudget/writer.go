package eventbudget

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Defaults of an Writer.
const (
	// Workers is how many events are written at once. Few: an event
	// tells people what happened, the status write that goes with it is
	// what agents wait for, and the status writes should have the API
	// server first.
	Workers = 4
	// Queue is how many events may wait to be written; more are
	// dropped and counted (hitl_events_total{result="dropped"}).
	Queue = 8192
	// maxEventDelay is how long an event may wait for the status writes of
	// a burst of transitions (see Writer.DeferWhile).
	maxEventDelay = 2 * time.Second
	// eventAttempts is how often an event write is tried.
	eventAttempts = 3
)

// Writer records events.k8s.io Events with a fixed number of writers
// and a bounded queue. client-go's recorder writes each event from its own
// goroutine and keeps every event for several minutes to detect series:
// under a burst of transitions (a thousand deadlines falling due at once)
// that is a thousand event writes racing the status writes, and memory
// that grows with the burst. hitl's events are one per transition of each
// object, so they never form series, and nothing needs to be kept once
// written; the routine ones of a burst are folded into one per namespace
// (LimitRoutine). It is a manager Runnable; events recorded before it
// starts wait in the queue.
type Writer struct {
	client     client.Client
	scheme     *runtime.Scheme
	controller string
	instance   string
	workers    int
	queue      chan queuedEvent
	busy       func() bool
	clock      clock.WithDelayedExecution
	// budget folds the routine events over their namespace's budget; nil
	// means no limit.
	budget *eventBudget

	mu sync.Mutex
	// pending counts, per regarded object, the events queued and not yet
	// written (or given up on).
	pending map[types.UID]int
	// wake is closed, and replaced, when what busy reports may have
	// changed (Wake): the writers holding events back look again.
	wake chan struct{}
}

// queuedEvent is an event to write and, for a summary, the uids of the
// objects whose events it folds.
type queuedEvent struct {
	event  *eventsv1.Event
	folded []types.UID
}

// Pending reports whether an event about the object with this uid is still
// waiting to be written. The controller deletes an expired question only
// once its events are out, so that what users read about it is complete.
func (w *Writer) Pending(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending[uid] > 0
}

// LimitRoutine gives the events of this reason a budget of perMinute per
// namespace, refilled over a minute; over it they are folded into one
// summary event per namespace, written five seconds after the first of them
// (counted in hitl_events_total{result="aggregated"}). Events of other
// reasons are never limited. Zero or less means no limit. Call it before
// the writer starts.
func (w *Writer) LimitRoutine(reason string, perMinute int) {
	if perMinute <= 0 {
		w.budget = nil
		return
	}
	w.budget = newEventBudget(reason, perMinute, w.clock, w.summarize)
}

// summarize queues the summary of the events folded in one namespace.
func (w *Writer) summarize(s *eventSummary) {
	now := w.clock.Now()
	e := s.first.DeepCopy()
	e.Name = fmt.Sprintf("%s.%x", e.Regarding.Name, now.UnixNano())
	e.EventTime = metav1.NewMicroTime(now)
	e.Note = hitlv1.TruncateMessage(s.note(w.budget.perMinute, now))
	w.enqueue(queuedEvent{event: e, folded: s.uids})
}

// enqueue queues an event whose objects are already tracked, or drops it
// when the queue is full.
func (w *Writer) enqueue(q queuedEvent) {
	select {
	case w.queue <- q:
		eventsQueued.Inc()
	default:
		w.untrack(q)
		eventsTotal.WithLabelValues("dropped").Inc()
	}
}

// untrack ends the tracking of what a queued event is about.
func (w *Writer) untrack(q queuedEvent) {
	if q.folded == nil {
		w.track(q.event.Regarding.UID, -1)
		return
	}
	for _, uid := range q.folded {
		w.track(uid, -1)
	}
}

func (w *Writer) track(uid types.UID, delta int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.pending[uid] + delta; n > 0 {
		w.pending[uid] = n
	} else {
		delete(w.pending, uid)
	}
}

// DeferWhile makes the writer hold events back while busy reports true,
// each for at most two seconds after it was recorded: through a burst of
// transitions the status writes, which agents wait for, have the API
// server, and the events follow. busy is asked again whenever Wake is
// called (and at the two seconds), never on a timer, so whatever makes it
// change must call Wake. Call it before the writer starts.
func (w *Writer) DeferWhile(busy func() bool) { w.busy = busy }

// Wake tells the writers holding events back that busy may have changed.
func (w *Writer) Wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.wake)
	w.wake = make(chan struct{})
}

// holdBack waits while busy reports true, for at most maxEventDelay after
// e was recorded, or until ctx ends.
func (w *Writer) holdBack(ctx context.Context, e *eventsv1.Event) {
	if w.busy == nil {
		return
	}
	left := maxEventDelay - w.clock.Since(e.EventTime.Time)
	if left <= 0 {
		return
	}
	deadline := time.NewTimer(left)
	defer deadline.Stop()
	for {
		// The channel is taken before busy is asked, so that a Wake
		// between the two is not missed.
		w.mu.Lock()
		wake := w.wake
		w.mu.Unlock()
		if !w.busy() {
			return
		}
		select {
		case <-wake:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// NewWriter returns a writer that reports events as controller,
// writing with c.
func NewWriter(c client.Client, scheme *runtime.Scheme, controller string, workers, queue int) *Writer {
	registerMetrics()
	host, _ := os.Hostname()
	return &Writer{client: c, scheme: scheme, controller: controller, instance: controller + "-" + host,
		workers: workers, queue: make(chan queuedEvent, queue), clock: clock.RealClock{}, pending: map[types.UID]int{}, wake: make(chan struct{})}
}

var _ events.EventRecorder = (*Writer)(nil)

// Eventf queues an event about regarding (and related, which may be nil),
// or folds it into its namespace's summary when it is routine and over the
// budget. It never blocks: when the queue is full the event is dropped.
func (w *Writer) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	log := ctrl.Log.WithName("events")
	ref, err := reference.GetReference(w.scheme, regarding)
	if err != nil {
		log.Error(err, "Cannot refer to the object of an event", "reason", reason)
		eventsTotal.WithLabelValues("failed").Inc()
		return
	}
	var relatedRef *corev1.ObjectReference
	if related != nil {
		if relatedRef, err = reference.GetReference(w.scheme, related); err != nil {
			relatedRef = nil
		}
	}
	now := w.clock.Now()
	message := hitlv1.TruncateMessage(fmt.Sprintf(note, args...))
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	e := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: w.controller,
		ReportingInstance:   w.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             relatedRef,
		Note:                message,
		Type:                eventtype,
	}
	w.track(ref.UID, 1)
	if w.budget.fold(e) {
		// Pending until its summary is written.
		eventsTotal.WithLabelValues("aggregated").Inc()
		return
	}
	w.enqueue(queuedEvent{event: e})
}

// Start writes queued events until ctx ends, then for up to two seconds
// more what is still queued.
func (w *Writer) Start(ctx context.Context) error {
	done := make(chan struct{})
	for range w.workers {
		go func() {
			defer func() { done <- struct{}{} }()
			w.work(ctx)
		}()
	}
	<-ctx.Done()
	w.budget.flushAll()
	drain, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for range w.workers {
		<-done
	}
	for drain.Err() == nil {
		select {
		case q := <-w.queue:
			w.write(drain, q)
		default:
			return nil
		}
	}
	return nil
}

// NeedLeaderElection is false: events are recorded only by the controller,
// which runs only when elected, and they must be written while it is.
func (w *Writer) NeedLeaderElection() bool { return false }

func (w *Writer) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case q := <-w.queue:
			w.write(ctx, q)
		}
	}
}

func (w *Writer) write(ctx context.Context, q queuedEvent) {
	defer eventsQueued.Dec()
	defer w.untrack(q)
	e := q.event
	w.holdBack(ctx, e)
	var err error
	for attempt := range eventAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		err = w.client.Create(ctx, e.DeepCopy())
		if err == nil || apierrors.IsAlreadyExists(err) {
			eventsTotal.WithLabelValues("written").Inc()
			return
		}
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || ctx.Err() != nil {
			break // the namespace is gone or terminating, or the event can never be written
		}
	}
	eventsTotal.WithLabelValues("failed").Inc()
	ctrl.Log.WithName("events").Error(err, "Could not write an event", "regarding", e.Regarding.Name, "reason", e.Reason)
}
