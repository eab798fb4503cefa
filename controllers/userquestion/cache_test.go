package userquestion

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
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

// The cache keeps no question text, only what replies are checked
// against: a decision on a cached question is the decision on the
// question as the API server holds it.
func TestTrimForCacheDropsAQuestionsTextAndKeepsWhatRepliesAreCheckedAgainst(t *testing.T) {
	full := func() *hitlv1.UserQuestion {
		q := aQuestion().asks("plan", "yes", "no").planReview("yes").asks("ok", "allow", "deny").approval("allow", "deny").q.DeepCopy()
		for i := range q.Spec.Questions {
			qq := &q.Spec.Questions[i]
			qq.Header, qq.Detail = "Header "+qq.ID, strings.Repeat("detail ", 1000)
			qq.Options[0].Description = "the first"
		}
		q.Spec.Questions[0].MultiSelect = true
		q.Spec.Questions[2].Intent.Approval.Subject = &hitlv1.ApprovalSubject{}
		q.Spec.Questions[2].Intent.Approval.Display = &hitlv1.ApprovalDisplay{Question: hitlv1.LocalizedText{"en": "May I?"}}
		return q
	}
	out, err := trimForCache(full())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*hitlv1.UserQuestion)
	want := full()
	for i, qq := range got.Spec.Questions {
		w := want.Spec.Questions[i]
		if qq.Question != "" || qq.Detail != "" || qq.Header != "" || qq.Options[0].Description != "" {
			t.Errorf("question %s keeps its text: %+v", qq.ID, qq)
		}
		if qq.ID != w.ID || qq.MultiSelect != w.MultiSelect || len(qq.Options) != len(w.Options) || qq.Options[1].Label != w.Options[1].Label {
			t.Errorf("question %s lost what replies are checked against: %+v, want %+v", qq.ID, qq, w)
		}
		if (qq.Intent == nil) != (w.Intent == nil) || (qq.Intent != nil && qq.Intent.Type != w.Intent.Type) {
			t.Errorf("question %s lost its intent: %+v", qq.ID, qq.Intent)
		}
	}
	if a := got.Spec.Questions[2].Intent.Approval; a.Subject != nil || a.Display != nil || a.Approve != "allow" || a.Reject != "deny" {
		t.Errorf("the approval keeps its subject or display, or lost its labels: %+v", a)
	}
	if p := got.Spec.Questions[1].Intent.PlanReview; p == nil || p.Approve != "yes" {
		t.Errorf("the plan review lost its label: %+v", p)
	}

	for _, answers := range [][]hitlv1.AnswerItem{
		{{ID: "color", Selected: []string{"red", "blue"}}, {ID: "plan", Selected: []string{"yes"}}, {ID: "ok", Selected: []string{"allow"}}},
		{{ID: "color", Selected: []string{"purple"}}, {ID: "plan", Selected: []string{"yes"}}, {ID: "ok", Selected: []string{"allow"}}},
		{{ID: "color", Selected: []string{"red"}}, {ID: "plan", Selected: []string{"yes"}}, {ID: "ok", Custom: "sure"}},
	} {
		r := aReply("r1").created(secs(1)).r
		r.Spec.Answers = answers
		decide := func(q *hitlv1.UserQuestion) Decision {
			return Decide(Inputs{Question: q, Replies: []hitlv1.QuestionReply{*r.DeepCopy()}, Now: secs(1)})
		}
		if a, b := decide(full()), decide(got.DeepCopy()); !equality.Semantic.DeepEqual(a, b) {
			t.Errorf("answers %s: the cached question decides\n%s\nthe stored one\n%s", dump(answers), dump(b), dump(a))
		}
	}
}

func TestTrimForCacheDropsTheLabelsOfAnAdoptedFinalReplyOnly(t *testing.T) {
	labelled := func(outcome hitlv1.ReplyOutcome, owned bool) *hitlv1.QuestionReply {
		r := cachedReply(outcome)
		r.Labels = map[string]string{hitlv1.AgentLabel: "bot", hitlv1.QuestionLabel: "q"}
		if owned {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: hitlv1.GroupVersion.String(), Kind: "UserQuestion", Name: "q", UID: "u"}}
		}
		return r
	}
	for _, c := range []struct {
		outcome hitlv1.ReplyOutcome
		owned   bool
		trimmed bool
	}{
		{hitlv1.OutcomeApplied, true, true},
		{hitlv1.OutcomeRejected, true, true},
		{hitlv1.OutcomeAdmitted, true, true},
		{hitlv1.OutcomeApplied, false, false},
		{hitlv1.OutcomeQueued, true, false},
		{"", true, false},
	} {
		out, err := trimForCache(labelled(c.outcome, c.owned))
		if err != nil {
			t.Fatal(err)
		}
		r := out.(*hitlv1.QuestionReply)
		if got := labelsTrimmed(r); got != c.trimmed {
			t.Errorf("outcome %q, owned %v: labels trimmed %v, want %v (labels %v)", c.outcome, c.owned, got, c.trimmed, r.Labels)
		}
		if !c.trimmed && len(r.Labels) != 2 {
			t.Errorf("outcome %q, owned %v: labels %v, want both kept", c.outcome, c.owned, r.Labels)
		}
		if c.trimmed && !labelsTrimmed(r.DeepCopy()) {
			t.Errorf("outcome %q: a deep copy of the cached reply no longer tells its labels were trimmed", c.outcome)
		}
		// The index of replies by question leaves out exactly the
		// replies whose labels were trimmed: final and adopted.
		keys, err := replyQuestionKey(r)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{r.Namespace + "/" + r.Spec.QuestionRef.Name}
		if c.trimmed {
			want = nil
		}
		if !slices.Equal(keys, want) {
			t.Errorf("outcome %q, owned %v: indexed under %q, want %q", c.outcome, c.owned, keys, want)
		}
	}
	// A reply labelled for another question than it names keeps its labels.
	r := labelled(hitlv1.OutcomeRejected, true)
	r.Labels[hitlv1.QuestionLabel] = "other"
	if out, _ := trimForCache(r); labelsTrimmed(out.(*hitlv1.QuestionReply)) {
		t.Errorf("labels trimmed of a reply whose question label names another question")
	}
	// No labels at all is not "trimmed".
	if out, _ := trimForCache(cachedReply(hitlv1.OutcomeApplied)); labelsTrimmed(out.(*hitlv1.QuestionReply)) {
		t.Errorf("a reply without labels taken for one whose labels were trimmed")
	}
}
