package notify

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Writing the record of what was sent (the hitl.dev/notified annotation)
// happens off the channels' queues: a delivery only queues its question,
// and a few workers patch the questions queued. A channel's next
// notification does not wait for the API server, the queue holds each
// question once however many of its notifications went out meanwhile (one
// patch for all of them), and one question's writes are never concurrent
// (a workqueue hands a key to one worker at a time), each carrying
// everything sent so far.

// While questions keep arriving, the notifier's writes about what it sent
// wait: a delivery's record (a patch of its question, checked by the
// admission policies and sent to every watcher of the questions) and its
// NotificationSent Event tell no one waiting anything new, and during a
// burst of questions asked at once they compete with the creates of the
// next questions and with the watch that brings those to the notifier,
// delaying their Asked notifications: in the bench's burst of 1,000
// questions on two cores they were 2,000 requests, and with them switched
// off (an experiment) the API server's watch of the questions lagged a
// third to a half as much at p99. So a delivery's record is held back
// until no new question has come for recordQuiet, or until it has waited
// recordHoldMax, which bounds what a crash may send again; a stopping
// notifier releases them all before it writes what is queued. Out of a
// burst nothing waits. The Events wait for their question's record and
// are emitted by the record writers after each write, so that a burst's
// go at the writers' pace: emitted all at once, each written by a
// goroutine of its own, a thousand of them opened connections to the API
// server by the dozen and took the notifier's peak RSS past 120 MiB.

// recordQuiet is how long no new question must come before the records
// held back are written: longer than the gaps between the questions of a
// burst, even on a busy API server whose watch delivers them in clumps.
const recordQuiet = time.Second

// recordHoldMax is the longest a delivery's record is held back while
// questions keep arriving: what a crash may send again, at most, beyond
// what is being written.
const recordHoldMax = 10 * time.Second

// recordWorkers is how many questions' records are written at once: the
// records held back during a burst of questions are written within
// seconds of its end, on a busy API server too.
const recordWorkers = 16

// recordAttempts is how many times a record's write is tried before it is
// left to the next notification of the question (or to a restart, which
// sends again what was not recorded).
const recordAttempts = 5

// recordFlush is how long a stopping notifier goes on writing the records
// of what it sent, so that the replica that takes over does not send it
// again.
const recordFlush = 5 * time.Second

// recordTimeout bounds one write.
const recordTimeout = 10 * time.Second

// recordKey names a question whose record is due: its key, and its UID so
// that the write never lands on another question created under the name.
type recordKey struct {
	types.NamespacedName
	UID types.UID
}

func newRecordQueue() workqueue.TypedRateLimitingInterface[recordKey] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[recordKey](100*time.Millisecond, 5*time.Second),
		workqueue.TypedRateLimitingQueueConfig[recordKey]{Name: "hitl-notify-record"})
}

// writeRecords writes the records of the questions queued until the queue
// is shut down; ctx is not ended by the notifier's stop, so that the
// records of a stopping notifier are written (stopRecords).
func (n *Notifier) writeRecords(ctx context.Context) {
	for {
		k, shutdown := n.records.Get()
		if shutdown {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, recordTimeout)
		err := n.record(wctx, k.NamespacedName, k.UID)
		cancel()
		n.emitSent(k)
		switch {
		case err == nil:
			n.records.Forget(k)
		case n.records.NumRequeues(k) < recordAttempts-1:
			n.records.AddRateLimited(k)
		default:
			n.records.Forget(k)
			n.log.Error(err, "Cannot record notifications on their question; a restart may send them again", "question", k.NamespacedName)
		}
		n.records.Done(k)
	}
}

// stopRecords lets the writers finish the records queued, for at most
// recordFlush, and stops them.
func (n *Notifier) stopRecords() {
	drained := make(chan struct{})
	go func() {
		n.records.ShutDownWithDrain()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(recordFlush):
		n.records.ShutDown()
	}
}

// record writes what was sent about the question key (of UID uid) to its
// annotation: what it records already and everything this process sent.
func (n *Notifier) record(ctx context.Context, key types.NamespacedName, uid types.UID) error {
	n.mu.Lock()
	var r Record
	if ns := n.namespaces[key.Namespace]; ns != nil && ns.questions[key.Name] != nil && ns.questions[key.Name].UID == uid {
		r = n.recordLocked(ns.questions[key.Name])
		if RecordOf(ns.questions[key.Name]).Equal(r) {
			r = nil // nothing new
		}
	} else {
		r = n.sent[uid].Clone()
	}
	n.mu.Unlock()
	if len(r) == 0 {
		return nil
	}
	// The UID makes the patch fail rather than annotate another question
	// created under the same name.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": uid, "annotations": map[string]string{hitlv1.NotifiedAnnotation: r.String()},
	}})
	if err != nil {
		return err
	}
	q := &hitlv1.UserQuestion{}
	q.Namespace, q.Name = key.Namespace, key.Name
	err = n.client.Patch(ctx, q, client.RawPatch(types.MergePatchType, patch))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // the question is gone, or another one has its name
	}
	return err
}

// sentEvent is a NotificationSent Event to emit once its question's
// record was written.
type sentEvent struct {
	// regarding is the question as the Event names it, taken when it was
	// sent.
	regarding runtime.Object
	event     hitlv1.NotificationEvent
	channel   string
}

// holdBack is the records held back while questions keep arriving, in
// the order each question's first held delivery was made, with when it
// was made. It is guarded by the Notifier's mu.
type holdBack struct {
	quiet, most time.Duration
	// lastArrival is when the last question new to the notifier came.
	lastArrival time.Time
	order       []recordKey
	since       map[recordKey]time.Time
	// closed: the notifier stops, and holds nothing back any more.
	closed bool
}

func newHoldBack(quiet, most time.Duration) *holdBack {
	return &holdBack{quiet: quiet, most: most, since: map[recordKey]time.Time{}}
}

// arrived notes that a question new to the notifier came at now.
func (h *holdBack) arrived(now time.Time) {
	if now.After(h.lastArrival) {
		h.lastArrival = now
	}
}

// add holds back the record of k, of a delivery made at now. It returns
// false when nothing is held back (out of a burst, or stopping): the
// caller queues the record itself. first says that nothing was held
// before, so the releaser has no time to wake at yet.
func (h *holdBack) add(k recordKey, now time.Time) (held, first bool) {
	if h.closed || now.Sub(h.lastArrival) >= h.quiet {
		return false, false
	}
	first = len(h.order) == 0
	if _, ok := h.since[k]; !ok {
		h.since[k] = now
		h.order = append(h.order, k)
	}
	return true, first
}

// release lets go, at now, of every record held once questions stopped
// arriving for the quiet period (or when all is set), otherwise of those
// held the longest time allowed (most); next is when to look again (zero
// with nothing held).
func (h *holdBack) release(now time.Time, all bool) (out []recordKey, next time.Time) {
	if all || now.Sub(h.lastArrival) >= h.quiet {
		out = h.order
		h.order, h.since = nil, map[recordKey]time.Time{}
		return out, time.Time{}
	}
	for len(h.order) > 0 && now.Sub(h.since[h.order[0]]) >= h.most {
		out = append(out, h.order[0])
		delete(h.since, h.order[0])
		h.order[0] = recordKey{}
		h.order = h.order[1:]
	}
	if len(h.order) == 0 {
		return out, time.Time{}
	}
	next = h.lastArrival.Add(h.quiet)
	if oldest := h.since[h.order[0]].Add(h.most); oldest.Before(next) {
		next = oldest
	}
	return out, next
}

// close releases every record held and holds nothing back from now on.
func (h *holdBack) close() []recordKey {
	h.closed = true
	out, _ := h.release(time.Time{}, true)
	return out
}

// sentLocked notes the delivery just made of ev about the question of k:
// its Event waits for the record, which goes at once out of a burst and is
// held back in one. n.mu is held; false when the caller is to queue the
// record.
func (n *Notifier) sentLocked(k recordKey, ev sentEvent) (held bool) {
	n.unsent[k] = append(n.unsent[k], ev)
	held, first := n.hold.add(k, n.opts.Clock.Now())
	if first {
		select {
		case n.holdWake <- struct{}{}:
		default:
		}
	}
	return held
}

// releaseHeld queues the records held back as the lull or recordHoldMax
// allows, until ctx ends.
func (n *Notifier) releaseHeld(ctx context.Context) {
	for {
		n.mu.Lock()
		now := n.opts.Clock.Now()
		out, next := n.hold.release(now, false)
		n.mu.Unlock()
		for _, k := range out {
			n.records.Add(k)
		}
		var timer clock.Timer
		var wake <-chan time.Time
		if !next.IsZero() {
			timer = n.opts.Clock.NewTimer(next.Sub(now))
			wake = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-n.holdWake:
		case <-wake:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// emitSent emits the NotificationSent Events of the question of k not
// emitted yet; the record writers call it after each write.
func (n *Notifier) emitSent(k recordKey) {
	n.mu.Lock()
	evs := n.unsent[k]
	delete(n.unsent, k)
	n.mu.Unlock()
	for _, ev := range evs {
		n.events.Eventf(ev.regarding, nil, corev1.EventTypeNormal, "NotificationSent", "Notify", "%s notification sent to channel %s", ev.event, ev.channel)
	}
}
