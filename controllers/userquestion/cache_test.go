package userquestion

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func cachedReply(outcome hitlv1.ReplyOutcome) *hitlv1.QuestionReply {
	return &hitlv1.QuestionReply{
		ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "agents",
			Annotations:   map[string]string{lastAppliedAnnotation: `{"kind":"QuestionReply"}`, "team": "infra"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: hitlv1.QuestionReplySpec{QuestionRef: hitlv1.QuestionReference{Name: "q"},
			Answers: []hitlv1.AnswerItem{{ID: "color", Selected: []string{"red"}}}},
		Status: hitlv1.QuestionReplyStatus{Outcome: outcome, Message: "m",
			Conditions: []metav1.Condition{{Type: "Processed", Status: metav1.ConditionTrue}}},
	}
}

func TestTrimForCacheDropsWhatTheControllerNeverReads(t *testing.T) {
	for _, outcome := range []hitlv1.ReplyOutcome{hitlv1.OutcomeApplied, hitlv1.OutcomeAdmitted, hitlv1.OutcomeRejected} {
		out, err := trimForCache(cachedReply(outcome))
		if err != nil {
			t.Fatal(err)
		}
		r := out.(*hitlv1.QuestionReply)
		if r.ManagedFields != nil || r.Annotations[lastAppliedAnnotation] != "" {
			t.Errorf("%s: managedFields %v and last-applied annotation %q kept", outcome, r.ManagedFields, r.Annotations[lastAppliedAnnotation])
		}
		if r.Annotations["team"] != "infra" {
			t.Errorf("%s: other annotations lost: %v", outcome, r.Annotations)
		}
		if r.Spec.Answers != nil || r.Status.Conditions != nil {
			t.Errorf("%s: final reply kept answers %v and conditions %v", outcome, r.Spec.Answers, r.Status.Conditions)
		}
		if r.Status.Outcome != outcome || r.Status.Message != "m" || r.Spec.QuestionRef.Name != "q" {
			t.Errorf("%s: the fields the controller compares were changed: %+v %+v", outcome, r.Spec, r.Status)
		}
	}
}

func TestTrimForCacheKeepsTheAnswersOfRepliesStillInPlay(t *testing.T) {
	for _, outcome := range []hitlv1.ReplyOutcome{"", hitlv1.OutcomeQueued} {
		out, err := trimForCache(cachedReply(outcome))
		if err != nil {
			t.Fatal(err)
		}
		r := out.(*hitlv1.QuestionReply)
		if len(r.Spec.Answers) != 1 || len(r.Status.Conditions) != 1 {
			t.Errorf("outcome %q: answers %v and conditions %v must stay", outcome, r.Spec.Answers, r.Status.Conditions)
		}
	}
}

func TestTrimForCacheKeepsAQuestionsSpecAndStatus(t *testing.T) {
	q := &aQuestion().q
	q.Status.State = hitlv1.StateOpen
	want := q.DeepCopy()
	q.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "agent"}}
	out, err := trimForCache(q)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*hitlv1.UserQuestion)
	if got.ManagedFields != nil || len(got.Spec.Questions) != len(want.Spec.Questions) || got.Status.State != want.Status.State {
		t.Errorf("question trimmed wrongly: %+v", got)
	}
}

func TestOverdueQuestionsGoAheadOfTheInitialList(t *testing.T) {
	queue := priorityqueue.New[reconcile.Request]("overdue-first-test")
	defer queue.ShutDown()
	now := secs(10)
	h := overdueFirst(clocktesting.NewFakeClock(now))
	question := func(name string, state hitlv1.QuestionState, deadline time.Time) *hitlv1.UserQuestion {
		q := aQuestion().timeout(3 * time.Second).q
		q.Name, q.Status.State = name, state
		q.Status.Deadline = &metav1.MicroTime{Time: deadline}
		return &q
	}
	for _, q := range []*hitlv1.UserQuestion{
		question("waiting", hitlv1.StateOpen, secs(20)),
		question("continued", hitlv1.StateContinued, secs(3)),
		question("overdue", hitlv1.StateOpen, secs(3)),
		question("unwritten", "", secs(9)),
	} {
		h.Create(context.Background(), event.CreateEvent{Object: q, IsInInitialList: true}, queue)
	}
	var order []string
	for range 4 {
		req, priority, _ := queue.GetWithPriority()
		order = append(order, fmt.Sprintf("%s:%d", req.Name, priority))
		queue.Done(req)
	}
	got := strings.Join(order, " ")
	if !strings.HasPrefix(got, "overdue:10 unwritten:10 ") || !strings.Contains(got, "waiting:-100") || !strings.Contains(got, "continued:-100") {
		t.Errorf("dequeued %s; want the overdue questions first, at the scheduled priority, and the others at the initial list's", got)
	}
}

func TestATimedQuestionGoesAheadAtItsDeadlineBeforeItsFirstLook(t *testing.T) {
	queue := priorityqueue.New[reconcile.Request]("at-deadline-test")
	defer queue.ShutDown()
	clk := clocktesting.NewFakeClock(secs(10))
	h := overdueFirst(clk)
	// New questions, their status not yet written: one timed, due at 12 s,
	// and others the API server is slow to let the workers write.
	timed := aQuestion().timeout(2 * time.Second).q
	timed.Name, timed.CreationTimestamp = "timed", metav1.NewTime(secs(10))
	h.Create(context.Background(), event.CreateEvent{Object: &timed}, queue)
	for i := range 3 {
		q := aQuestion().q
		q.Name = fmt.Sprintf("blocking-%d", i)
		h.Create(context.Background(), event.CreateEvent{Object: &q}, queue)
	}
	// A worker takes the timed question's first look, the others wait.
	req, _, _ := queue.GetWithPriority()
	if req.Name != "timed" {
		t.Fatalf("first %s, want timed (created first)", req.Name)
	}
	queue.Done(req)
	clk.Step(time.Second)
	if clk.HasWaiters() == false {
		t.Fatal("nothing waits for the deadline")
	}
	clk.Step(time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for queue.Len() < 4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	req, priority, _ := queue.GetWithPriority()
	if req.Name != "timed" || priority != scheduledPriority {
		t.Fatalf("at its deadline, dequeued %s at priority %d; want timed at %d, ahead of the others", req.Name, priority, scheduledPriority)
	}
}
