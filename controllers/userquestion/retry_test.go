package userquestion

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Through an outage a question fails many times in a row; its next try
// must still come within retryCap of the API server's return, and a
// success starts it over from retryBase.
func TestRetryLimiterIsCapped(t *testing.T) {
	l := retryLimiter()
	q := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "q"}}
	if d := l.When(q); d != retryBase {
		t.Fatalf("first retry after %s, want %s", d, retryBase)
	}
	for range 100 {
		if d := l.When(q); d > retryCap {
			t.Fatalf("retry after %s, above the cap %s", d, retryCap)
		}
	}
	if d := l.When(q); d != retryCap {
		t.Fatalf("after 100 failures the retry comes after %s, want the cap %s", d, retryCap)
	}
	l.Forget(q)
	if d := l.When(q); d != retryBase {
		t.Fatalf("after a success the first retry comes after %s, want %s", d, retryBase)
	}
	// Other questions are not held back by this one's failures.
	if d := l.When(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "other"}}); d != retryBase {
		t.Fatalf("another question's first retry after %s", d)
	}
}
