package eventbudget

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func TestEventWriterQueuesWithoutBlockingAndDropsWhenFull(t *testing.T) {
	s := runtime.NewScheme()
	if err := hitlv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(nil, s, "hitl-controller", 1, 2)
	q := aQuestion()
	r := aReply("r1")
	dropped := testutil.ToFloat64(eventsTotal.WithLabelValues("dropped"))

	w.Eventf(q, nil, corev1.EventTypeNormal, "Continued", "Continue", "closed %s after its deadline", "5ms")
	w.Eventf(r, q, corev1.EventTypeWarning, string(hitlv1.CodeBadAnswer), "Reject", "%s", strings.Repeat("x", 2000))
	w.Eventf(q, nil, corev1.EventTypeNormal, "Settled", "Settle", "one too many") // the queue holds two

	if got := testutil.ToFloat64(eventsTotal.WithLabelValues("dropped")) - dropped; got != 1 {
		t.Errorf("dropped %v events, want 1", got)
	}
	if len(w.queue) != 2 {
		t.Fatalf("queued %d events, want 2", len(w.queue))
	}
	first, second := (<-w.queue).event, (<-w.queue).event
	if first.Regarding.Kind != "UserQuestion" || first.Regarding.Name != askName || first.Namespace != "agents" ||
		first.Reason != "Continued" || first.Action != "Continue" || first.Note != "closed 5ms after its deadline" ||
		first.ReportingController != "hitl-controller" || !strings.HasPrefix(first.ReportingInstance, "hitl-controller-") ||
		first.EventTime.IsZero() || !strings.HasPrefix(first.Name, askName+".") {
		t.Errorf("first event: %+v", first)
	}
	if second.Regarding.Kind != "QuestionReply" || second.Related == nil || second.Related.Name != askName ||
		second.Type != corev1.EventTypeWarning || len(second.Note) != hitlv1.MaxMessageLength {
		t.Errorf("second event: regarding %+v related %+v type %s note of %d bytes", second.Regarding, second.Related, second.Type, len(second.Note))
	}
}

func TestEventWriterHoldsEventsBackWhileBusyForAtMostTwoSeconds(t *testing.T) {
	s := runtime.NewScheme()
	if err := eventsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := hitlv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	var busy atomic.Bool
	busy.Store(true)
	w := NewWriter(c, s, "hitl-controller", 1, 4)
	w.DeferWhile(busy.Load)
	written := func() int {
		var list eventsv1.EventList
		if err := c.List(context.Background(), &list); err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}

	w.Eventf(aQuestion(), nil, corev1.EventTypeNormal, "Continued", "Continue", "fresh")
	done := make(chan struct{})
	go func() { w.write(context.Background(), <-w.queue); close(done) }()
	time.Sleep(100 * time.Millisecond)
	if n := written(); n != 0 {
		t.Fatalf("%d events written while busy, want them held back", n)
	}
	busy.Store(false)
	// Nothing polls busy: the writer looks again when it is woken.
	select {
	case <-done:
		t.Fatal("the writer noticed busy change without being woken: it polls")
	case <-time.After(100 * time.Millisecond):
	}
	w.Wake()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("the event was not written once the writer was woken and no longer busy")
	}
	if n := written(); n != 1 {
		t.Fatalf("%d events written, want 1", n)
	}

	// An event already held back for two seconds is written even while busy.
	busy.Store(true)
	q := *aQuestion()
	q.Name = "other"
	w.Eventf(&q, nil, corev1.EventTypeNormal, "Continued", "Continue", "old")
	e := <-w.queue
	e.event.EventTime = metav1.NewMicroTime(time.Now().Add(-maxEventDelay))
	w.write(context.Background(), e)
	if n := written(); n != 2 {
		t.Fatalf("%d events written, want the overdue one written too", n)
	}
}
