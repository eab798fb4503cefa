package closer

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// startedCloser returns a closer started with a queue of its own.
func startedCloser(t *testing.T) (*Closer, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	t.Helper()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Millisecond, time.Millisecond))
	t.Cleanup(q.ShutDown)
	c := New(clock.RealClock{}, 4)
	if err := c.Source().Start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	return c, q
}

// next waits for the queue's next item.
func next(t *testing.T, q workqueue.TypedRateLimitingInterface[reconcile.Request]) reconcile.Request {
	t.Helper()
	got := make(chan reconcile.Request, 1)
	go func() {
		req, _ := q.Get()
		q.Done(req)
		got <- req
	}()
	select {
	case req := <-got:
		return req
	case <-time.After(5 * time.Second):
		t.Fatal("nothing came back to the queue")
		return reconcile.Request{}
	}
}

func TestCloserOwnsAQuestionUntilItsCloseIsDoneThenLooksAgain(t *testing.T) {
	c, q := startedCloser(t)
	key := types.NamespacedName{Namespace: "ns", Name: "q"}
	release := make(chan struct{})
	started, err := c.Start(context.Background(), key, func(context.Context) (ctrl.Result, error) {
		<-release
		return ctrl.Result{}, nil
	})
	if !started || err != nil {
		t.Fatalf("start = %v, %v; want a close of its own", started, err)
	}
	if !c.Owns(key) {
		t.Fatal("a question whose close is in flight is not owned by the close")
	}
	if c.Owns(types.NamespacedName{Namespace: "ns", Name: "other"}) {
		t.Fatal("another question is owned")
	}
	close(release)
	// The event noted while it was owned brings it back.
	if got := next(t, q); got.NamespacedName != key {
		t.Fatalf("got %v back, want %v", got, key)
	}
	if c.Owns(key) {
		t.Fatal("the question is still owned after its close")
	}
}

func TestCloserSendsAFailedCloseBackAfterABackoffAndAQuietOneNowhere(t *testing.T) {
	c, q := startedCloser(t)
	failed, quiet := types.NamespacedName{Namespace: "ns", Name: "failed"}, types.NamespacedName{Namespace: "ns", Name: "quiet"}
	if _, err := c.Start(context.Background(), quiet, func(context.Context) (ctrl.Result, error) { return ctrl.Result{}, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(context.Background(), failed, func(context.Context) (ctrl.Result, error) {
		return ctrl.Result{}, errors.New("the API server cut the write off")
	}); err != nil {
		t.Fatal(err)
	}
	if got := next(t, q); got.NamespacedName != failed {
		t.Fatalf("got %v back, want the failed close %v", got, failed)
	}
	if n := q.NumRequeues(reconcile.Request{NamespacedName: failed}); n != 1 {
		t.Fatalf("the failed close was requeued %d times with a backoff, want 1", n)
	}
	time.Sleep(50 * time.Millisecond)
	if q.Len() != 0 {
		t.Fatalf("%d items queued; a close that succeeded with nothing to look at again queues nothing", q.Len())
	}
}

func TestCloserBeforeTheControllerStartsLeavesTheCloseToTheWorker(t *testing.T) {
	ran := false
	started, err := New(clock.RealClock{}, 4).Start(context.Background(), types.NamespacedName{Namespace: "ns", Name: "q"},
		func(context.Context) (ctrl.Result, error) { ran = true; return ctrl.Result{}, nil })
	if started || err != nil || ran {
		t.Fatalf("start = %v, %v (ran %v); want the worker to finish", started, err, ran)
	}
	var none *Closer
	if none.Owns(types.NamespacedName{Name: "q"}) {
		t.Fatal("no closer owns anything")
	}
}
