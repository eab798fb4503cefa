package controllers

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func TestEventWriterQueuesWithoutBlockingAndDropsWhenFull(t *testing.T) {
	s := runtime.NewScheme()
	if err := hitlv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	w := NewEventWriter(nil, s, "hitl-controller", 1, 2)
	q := &aQuestion().q
	r := &aReply("r1").r
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
	first, second := <-w.queue, <-w.queue
	if first.Regarding.Kind != "UserQuestion" || first.Regarding.Name != askName || first.Namespace != "agents" ||
		first.Reason != "Continued" || first.Action != "Continue" || first.Note != "closed 5ms after its deadline" ||
		first.ReportingController != "hitl-controller" || !strings.HasPrefix(first.ReportingInstance, "hitl-controller-") ||
		first.EventTime.IsZero() || !strings.HasPrefix(first.Name, askName+".") {
		t.Errorf("first event: %+v", first)
	}
	if second.Regarding.Kind != "QuestionReply" || second.Related == nil || second.Related.Name != askName ||
		second.Type != corev1.EventTypeWarning || len(second.Note) != maxNote {
		t.Errorf("second event: regarding %+v related %+v type %s note of %d bytes", second.Regarding, second.Related, second.Type, len(second.Note))
	}
}
