package validation

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Fluent builders, so that a test case reads like the scenario it checks:
//
//	question("q1").options("a", "b").multi()
//	approvalQuestion("ok", "approve", "reject", "always")
//	answer("q1").sel("a").custom("x")

// qb builds a Question.
type qb struct{ q hitlv1.Question }

func question(id string) *qb {
	return &qb{q: hitlv1.Question{ID: id, Question: "What about " + id + "?"}}
}

// approvalQuestion is a valid Approval question: its options are exactly
// approve, reject and (when not empty) always.
func approvalQuestion(id, approve, reject, always string) *qb {
	labels := []string{approve, reject}
	if always != "" {
		labels = append(labels, always)
	}
	return question(id).options(labels...).approval(approve, reject, always)
}

// planQuestion is a valid PlanReview question.
func planQuestion(id, approve string, others ...string) *qb {
	return question(id).options(append([]string{approve}, others...)...).detail("# Plan\n1. do it").planReview(approve)
}

func (b *qb) options(labels ...string) *qb {
	b.q.Options = nil
	for _, l := range labels {
		b.q.Options = append(b.q.Options, hitlv1.QuestionOption{Label: l})
	}
	return b
}

func (b *qb) multi() *qb { b.q.MultiSelect = true; return b }

func (b *qb) detail(s string) *qb { b.q.Detail = s; return b }

func (b *qb) intent(in *hitlv1.QuestionIntent) *qb { b.q.Intent = in; return b }

func (b *qb) planReview(approve string) *qb {
	return b.intent(&hitlv1.QuestionIntent{
		Type:       hitlv1.IntentPlanReview,
		PlanReview: &hitlv1.PlanReviewIntent{Approve: approve},
	})
}

func (b *qb) approval(approve, reject, always string) *qb {
	return b.intent(&hitlv1.QuestionIntent{
		Type:     hitlv1.IntentApproval,
		Approval: &hitlv1.ApprovalIntent{Approve: approve, Reject: reject, Always: always},
	})
}

// display sets the Approval intent's display (the question must have one).
func (b *qb) display(d *hitlv1.ApprovalDisplay) *qb { b.q.Intent.Approval.Display = d; return b }

// with applies an arbitrary edit, for the odd case no builder method covers.
func (b *qb) with(edit func(q *hitlv1.Question)) *qb { edit(&b.q); return b }

func (b *qb) obj() hitlv1.Question { return b.q }

func questions(bs ...*qb) []hitlv1.Question {
	out := make([]hitlv1.Question, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.obj())
	}
	return out
}

// ab builds an AnswerItem; answer(id) alone is a skip.
type ab struct{ a hitlv1.AnswerItem }

func answer(id string) *ab { return &ab{a: hitlv1.AnswerItem{ID: id}} }

func (b *ab) sel(labels ...string) *ab { b.a.Selected = append(b.a.Selected, labels...); return b }

func (b *ab) custom(s string) *ab { b.a.Custom = s; return b }

func (b *ab) obj() hitlv1.AnswerItem { return b.a }

func batch(bs ...*ab) []hitlv1.AnswerItem {
	out := make([]hitlv1.AnswerItem, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.obj())
	}
	return out
}

// askb builds a UserQuestionSpec.
type askb struct{ s hitlv1.UserQuestionSpec }

func ask(qs ...*qb) *askb {
	b := &askb{s: hitlv1.UserQuestionSpec{Agent: "coder"}}
	if len(qs) > 0 {
		b.s.Questions = questions(qs...)
	}
	return b
}

func (b *askb) origin(o hitlv1.Origin) *askb { b.s.Origin = o; return b }

func (b *askb) timeout(d time.Duration) *askb { b.s.Timeout = &metav1.Duration{Duration: d}; return b }

func (b *askb) obj() *hitlv1.UserQuestionSpec { return &b.s }

// en is a LocalizedText with an English entry and any further pairs.
func en(text string, more ...string) hitlv1.LocalizedText {
	lt := hitlv1.LocalizedText{"en": text}
	for i := 0; i+1 < len(more); i += 2 {
		lt[more[i]] = more[i+1]
	}
	return lt
}

// failure is what a failing case expects.
type failure struct {
	code     hitlv1.ErrorCode
	question string // the expected Error.QuestionID ("" for ask- or batch-wide rules)
	fragment string // a distinctive part of the rule
	field    string // when set, the expected Error.Field
}

// checkErr asserts that err is nil when want is nil, and otherwise that it
// is an *Error with the wanted code, question id, field and message.
func checkErr(t *testing.T, err error, want *failure) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("want no error, got %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("want %s (%q), got no error", want.code, want.fragment)
	}
	if got := CodeOf(err); got != want.code {
		t.Errorf("CodeOf = %q, want %q (err: %v)", got, want.code, err)
	}
	if !IsCode(err, want.code) {
		t.Errorf("IsCode(err, %q) = false", want.code)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err %T is not an *Error", err)
	}
	if e.QuestionID != want.question {
		t.Errorf("QuestionID = %q, want %q (err: %v)", e.QuestionID, want.question, err)
	}
	if want.field != "" && e.Field != want.field {
		t.Errorf("Field = %q, want %q", e.Field, want.field)
	}
	msg := err.Error()
	if prefix := string(want.code) + ": "; !strings.HasPrefix(msg, prefix) {
		t.Errorf("message %q does not start with %q", msg, prefix)
	}
	if want.question != "" && !strings.Contains(msg, "question "+want.question+": ") {
		t.Errorf("message %q does not name question %q", msg, want.question)
	}
	if !strings.Contains(msg, want.fragment) {
		t.Errorf("message %q does not contain %q", msg, want.fragment)
	}
}
