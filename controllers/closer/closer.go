// Package closer closes windows off the controller's workers: a worker
// decides that a question's window closes and hands the slow part (the
// claims read that confirms it, the status write) to a close of its own,
// bounded by close slots that grow while the API server is slow.
package closer

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// MaxClosesInFlight bounds the windows being closed at once. A close waits
// on the API server twice (the claims read it shares, then its status
// write), and under load each wait takes hundreds of milliseconds: a close
// held a worker through both, so 16 workers closed at most a few dozen
// windows a second while a spread of 10,000 over a minute falls due at 167.
// The closes now run off the workers, as many at once as closeSlots
// allows, which starts at the workers' count and grows up to this bound
// while closes wait for a slot: a burst of thousands never opens thousands
// of requests at once, and a worker that finds every slot taken waits for
// one, which keeps the queue's order (due windows first).
const MaxClosesInFlight = 256

// Closer closes windows off the workers: a worker decides that a window
// closes (from the cache, in microseconds) and hands the rest (the claims
// read that confirms it, the status write, the replies' outcomes) to a
// close of its own, then takes the next question. While a question's
// close is in flight the close owns it: its other events are noted, not
// acted on, and the question is looked at again when the close is done.
type Closer struct {
	slots *closeSlots

	mu sync.Mutex
	// ctx and queue are the controller's, set when it starts; before
	// that, closes run on the worker.
	ctx   context.Context
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	// busy holds the questions whose close is in flight, and whether an
	// event came for one meanwhile.
	busy map[types.NamespacedName]bool
}

// New returns a closer whose closes in flight start at minimum and
// grow up to MaxClosesInFlight while closes wait for a slot.
func New(clk clock.PassiveClock, minimum int) *Closer {
	registerMetrics()
	return &Closer{slots: newCloseSlots(clk, minimum, MaxClosesInFlight), busy: map[types.NamespacedName]bool{}}
}

// Source hands the closer the controller's queue and context when the
// controller starts (after it wins the leader election).
func (c *Closer) Source() source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.ctx, c.queue = ctx, q
		return nil
	})
}

// Owns reports whether a close of key is in flight, and if so notes that
// the question needs another look once it is done.
func (c *Closer) Owns(key types.NamespacedName) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.busy[key]; ok {
		c.busy[key] = true
		return true
	}
	return false
}

// Start runs finish for key in a close of its own once a slot is free,
// and returns false when the controller has not started, or the closer
// was not set up (the caller finishes on the worker). When finish
// returns, the question goes back to the queue as a reconcile's result
// would: after its error's backoff, at its RequeueAfter, and at once if an
// event came for it meanwhile.
func (c *Closer) Start(reqCtx context.Context, key types.NamespacedName, finish func(context.Context) (ctrl.Result, error)) (bool, error) {
	if c == nil {
		return false, nil
	}
	c.mu.Lock()
	ctx, q := c.ctx, c.queue
	c.mu.Unlock()
	if q == nil {
		return false, nil
	}
	handed := time.Now()
	if err := c.slots.acquire(reqCtx); err != nil {
		return true, err
	}
	c.gauge()
	c.mu.Lock()
	c.busy[key] = false
	c.mu.Unlock()
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(reqCtx))
	go func() {
		res, err := finish(ctx)
		closeSeconds.Observe(time.Since(handed).Seconds())
		c.slots.release()
		c.gauge()
		c.mu.Lock()
		again := c.busy[key]
		delete(c.busy, key)
		c.mu.Unlock()
		c.requeue(ctx, q, reconcile.Request{NamespacedName: key}, res, err, again)
	}()
	return true, nil
}

// gauge sets the gauges of the closes in flight and of their bound.
func (c *Closer) gauge() {
	limit, inFlight := c.slots.bound()
	closesInFlight.Set(float64(inFlight))
	closeSlotsBound.Set(float64(limit))
}

// requeue puts a question back in the queue after its close, as the
// controller does with a reconcile's result.
func (c *Closer) requeue(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request, res ctrl.Result, err error, again bool) {
	if ctx.Err() != nil {
		return
	}
	switch {
	case err != nil:
		ctrl.LoggerFrom(ctx).Error(err, "Closing a window failed; it is tried again")
		closeErrors.Inc()
		q.AddRateLimited(req)
		return
	case res.RequeueAfter > 0:
		q.Forget(req)
		if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok && res.Priority != nil {
			pq.AddWithOpts(priorityqueue.AddOpts{After: res.RequeueAfter, Priority: res.Priority}, req)
		} else {
			q.AddAfter(req, res.RequeueAfter)
		}
	default:
		q.Forget(req)
	}
	if again {
		q.Add(req)
	}
}
