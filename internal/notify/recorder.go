package notify

import (
	"context"
	"encoding/json"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
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

// recordWorkers is how many questions' records are written at once: a
// burst of questions asked together is recorded about as fast as it is
// sent, on a busy API server too.
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
