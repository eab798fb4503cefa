package userquestion

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Retry delays of a question whose reconcile failed: doubling from
// retryBase, never above retryCap.
const (
	retryBase = 5 * time.Millisecond
	retryCap  = 2 * time.Second
)

// retryLimiter paces the retries of failed reconciles. controller-runtime's
// default doubles each question's delay up to 1000 s and lets all failed
// questions together retry at 10 per second: through an API server outage
// every question fails again and again, so that once the API server is
// back a question could wait minutes for its next try, and a burst of
// overdue deadlines would trickle out at 10 per second. Capped at 2 s, and
// with no shared bucket (the client's own rate limit paces the requests),
// every question is looked at again within 2 s of the API server's return.
func retryLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](retryBase, retryCap)
}
