package eventbudget

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func routineEvent(ns, name, reason string) *eventsv1.Event {
	return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Reason: reason,
		Regarding: corev1.ObjectReference{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}}
}

func TestEventBudgetFoldsOnlyTheRoutineReasonOverEachNamespacesBudget(t *testing.T) {
	clk := clocktesting.NewFakeClock(seen)
	summaries := make(chan *eventSummary, 4)
	b := newEventBudget("Continued", 3, clk, func(s *eventSummary) { summaries <- s })
	fold := func(ns, name, reason string) bool { return b.fold(routineEvent(ns, name, reason)) }

	var folded []string
	for i := range 5 {
		if fold("a", fmt.Sprintf("q%d", i), "Continued") {
			folded = append(folded, fmt.Sprintf("q%d", i))
		}
	}
	if strings.Join(folded, ",") != "q3,q4" {
		t.Fatalf("folded %v, want the two over the budget of 3: q3, q4", folded)
	}
	// Outcomes are never folded, however many; other namespaces have their own budget.
	for i := range 10 {
		if fold("a", fmt.Sprintf("s%d", i), "Settled") {
			t.Fatalf("a Settled event was folded")
		}
	}
	if fold("b", "q0", "Continued") {
		t.Fatal("namespace b's first Continued event was folded: the budget is per namespace")
	}

	select {
	case s := <-summaries:
		t.Fatalf("a summary before its delay: %v", s.names)
	case <-time.After(20 * time.Millisecond):
	}
	clk.Step(summaryDelay)
	var s *eventSummary
	select {
	case s = <-summaries:
	case <-time.After(time.Second):
		t.Fatal("no summary after its delay")
	}
	if s.first.Regarding.Name != "q3" || strings.Join(s.names, ",") != "q3,q4" || len(s.uids) != 2 || s.uids[1] != "a/q4" {
		t.Errorf("summary: first %s, names %v, uids %v", s.first.Regarding.Name, s.names, s.uids)
	}
	note := s.note(3, clk.Now())
	if !strings.HasPrefix(note, "2 windows in this namespace closed unanswered within 5s over the budget of 3 Continued Events a minute") ||
		!strings.HasSuffix(note, ": q3, q4") {
		t.Errorf("note: %s", note)
	}

	// The bucket refills over a minute: 20 s give one event back.
	if !fold("a", "q5", "Continued") {
		t.Fatal("not folded with the budget spent")
	}
	clk.Step(20 * time.Second)
	if fold("a", "q6", "Continued") {
		t.Fatal("folded after a third of a minute refilled a third of the budget of 3")
	}
	if !fold("a", "q7", "Continued") {
		t.Fatal("not folded once the refill was spent")
	}
}

func TestEventSummaryNoteFitsAndCounts(t *testing.T) {
	s := &eventSummary{first: routineEvent("a", "question-0", "Continued"), since: seen}
	for i := range 500 {
		s.names = append(s.names, fmt.Sprintf("question-%d", i))
	}
	note := s.note(60, seenPlus(1.5))
	if len(note) > hitlv1.MaxMessageLength {
		t.Fatalf("note of %d bytes", len(note))
	}
	listed := strings.Count(note, "question-")
	if !strings.HasPrefix(note, "500 windows") || !strings.HasSuffix(note, fmt.Sprintf(" and %d more", 500-listed)) || listed < 20 {
		t.Errorf("%d names listed: %s", listed, note)
	}
}

// The writer with a budget: every outcome event is written, one each;
// the Continued events over the budget come out as one summary, and the
// metric counts what was folded.
func TestEventWriterWritesOutcomesAndSumsUpContinuedOverBudget(t *testing.T) {
	s := runtime.NewScheme()
	if err := eventsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := hitlv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	w := NewWriter(c, s, "hitl-controller", 1, 64)
	w.clock = clk
	w.LimitRoutine("Continued", 2)
	aggregated := testutil.ToFloat64(eventsTotal.WithLabelValues("aggregated"))
	// Events are named after their object and time: one each millisecond.
	eventf := func(regarding, related runtime.Object, eventtype, reason, action, note string) {
		clk.Step(time.Millisecond)
		w.Eventf(regarding, related, eventtype, reason, action, "%s", note)
	}

	var questions []*hitlv1.UserQuestion
	for i := range 6 {
		q := *aQuestion()
		q.Name, q.UID = fmt.Sprintf("q%d", i), types.UID(fmt.Sprintf("uid-%d", i))
		questions = append(questions, &q)
		eventf(&q, nil, corev1.EventTypeNormal, "Continued", "Continue", "closed")
	}
	for _, q := range questions[:3] {
		eventf(q, nil, corev1.EventTypeNormal, "Settled", "Settle", "settled")
	}
	r := *aReply("r1")
	eventf(&r, questions[0], corev1.EventTypeWarning, string(hitlv1.CodeBadAnswer), "Reject", "bad")

	if got := testutil.ToFloat64(eventsTotal.WithLabelValues("aggregated")) - aggregated; got != 4 {
		t.Errorf("aggregated %v events, want the 4 Continued over the budget of 2", got)
	}
	if !w.Pending(questions[5].UID) {
		t.Error("a folded event is not pending before its summary is written")
	}
	clk.Step(summaryDelay)
	// The summary is queued by the fake clock's timer, on a goroutine of
	// its own: a loaded machine may take a while to run it.
	deadline := time.Now().Add(10 * time.Second)
	for len(w.queue) < 2+3+1+1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for len(w.queue) > 0 {
		w.write(context.Background(), <-w.queue)
	}
	for _, q := range questions {
		if w.Pending(q.UID) {
			t.Errorf("%s still pending once everything was written", q.Name)
		}
	}

	var list eventsv1.EventList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	byReason := map[string][]string{}
	var summary *eventsv1.Event
	for i := range list.Items {
		e := &list.Items[i]
		byReason[e.Reason] = append(byReason[e.Reason], e.Regarding.Name)
		if e.Reason == "Continued" && strings.HasPrefix(e.Note, "4 windows") {
			summary = e
		}
	}
	if n := len(byReason["Settled"]); n != 3 {
		t.Errorf("%d Settled events, want 3: outcomes are never folded", n)
	}
	if n := len(byReason[string(hitlv1.CodeBadAnswer)]); n != 1 {
		t.Errorf("%d rejection events, want 1", n)
	}
	if n := len(byReason["Continued"]); n != 3 {
		t.Errorf("Continued events about %v, want q0, q1 and one summary", byReason["Continued"])
	}
	if summary == nil || summary.Regarding.Name != "q2" || !strings.HasSuffix(summary.Note, ": q2, q3, q4, q5") ||
		summary.Namespace != "agents" || summary.Action != "Continue" || summary.Type != corev1.EventTypeNormal {
		t.Errorf("summary: %+v", summary)
	}
}
