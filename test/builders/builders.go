// Package builders makes hitl objects for tests, so that a test reads like
// the scenario it checks:
//
//	builders.Question("q", ns).Agent("bot").Ask("env", "Where?", "staging", "prod").Timeout(3*time.Second).Obj()
package builders

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// QuestionBuilder builds a UserQuestion.
type QuestionBuilder struct{ q hitlv1.UserQuestion }

// Question starts a question for agent "bot" with no questions yet.
func Question(name, namespace string) *QuestionBuilder {
	return &QuestionBuilder{q: hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       hitlv1.UserQuestionSpec{Agent: "bot"},
	}}
}

// Agent sets spec.agent.
func (b *QuestionBuilder) Agent(agent string) *QuestionBuilder { b.q.Spec.Agent = agent; return b }

// Label sets a label.
func (b *QuestionBuilder) Label(key, value string) *QuestionBuilder {
	if b.q.Labels == nil {
		b.q.Labels = map[string]string{}
	}
	b.q.Labels[key] = value
	return b
}

// Ask adds a single-select question with the given option labels.
func (b *QuestionBuilder) Ask(id, text string, labels ...string) *QuestionBuilder {
	q := hitlv1.Question{ID: id, Question: text}
	for _, l := range labels {
		q.Options = append(q.Options, hitlv1.QuestionOption{Label: l})
	}
	b.q.Spec.Questions = append(b.q.Spec.Questions, q)
	return b
}

// Multi makes the last question multi-select.
func (b *QuestionBuilder) Multi() *QuestionBuilder { b.last().MultiSelect = true; return b }

// Detail sets the last question's detail.
func (b *QuestionBuilder) Detail(d string) *QuestionBuilder { b.last().Detail = d; return b }

// PlanReview gives the last question a PlanReview intent approving with label.
func (b *QuestionBuilder) PlanReview(approve string) *QuestionBuilder {
	b.last().Intent = &hitlv1.QuestionIntent{Type: hitlv1.IntentPlanReview, PlanReview: &hitlv1.PlanReviewIntent{Approve: approve}}
	return b
}

// Approval gives the last question an Approval intent (always may be empty).
func (b *QuestionBuilder) Approval(approve, reject, always string) *QuestionBuilder {
	b.last().Intent = &hitlv1.QuestionIntent{Type: hitlv1.IntentApproval,
		Approval: &hitlv1.ApprovalIntent{Approve: approve, Reject: reject, Always: always}}
	return b
}

// Timeout sets the foreground window.
func (b *QuestionBuilder) Timeout(d time.Duration) *QuestionBuilder {
	b.q.Spec.Timeout = &metav1.Duration{Duration: d}
	return b
}

// Origin sets spec.origin.
func (b *QuestionBuilder) Origin(o hitlv1.Origin) *QuestionBuilder { b.q.Spec.Origin = o; return b }

// TTL sets spec.ttlSecondsAfterFinished.
func (b *QuestionBuilder) TTL(seconds int32) *QuestionBuilder {
	b.q.Spec.TTLSecondsAfterFinished = &seconds
	return b
}

// Obj returns the built question.
func (b *QuestionBuilder) Obj() *hitlv1.UserQuestion { return b.q.DeepCopy() }

func (b *QuestionBuilder) last() *hitlv1.Question {
	return &b.q.Spec.Questions[len(b.q.Spec.Questions)-1]
}

// ReplyBuilder builds a QuestionReply.
type ReplyBuilder struct{ r hitlv1.QuestionReply }

// Reply starts a reply to the named question with an empty batch, by
// DefaultAnswerer.
func Reply(name, namespace, question string) *ReplyBuilder {
	b := &ReplyBuilder{r: hitlv1.QuestionReply{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       hitlv1.QuestionReplySpec{QuestionRef: hitlv1.QuestionReference{Name: question}},
	}}
	return b.AnsweredBy(DefaultAnswerer)
}

// Select answers question id with the given labels.
func (b *ReplyBuilder) Select(id string, labels ...string) *ReplyBuilder {
	b.r.Spec.Answers = append(b.r.Spec.Answers, hitlv1.AnswerItem{ID: id, Selected: labels})
	return b
}

// Custom answers question id with free text.
func (b *ReplyBuilder) Custom(id, text string) *ReplyBuilder {
	b.r.Spec.Answers = append(b.r.Spec.Answers, hitlv1.AnswerItem{ID: id, Custom: text})
	return b
}

// Skip marks question id as skipped.
func (b *ReplyBuilder) Skip(id string) *ReplyBuilder {
	b.r.Spec.Answers = append(b.r.Spec.Answers, hitlv1.AnswerItem{ID: id})
	return b
}

// AnsweredBy sets spec.answeredBy to an authenticated user, as admission
// stamps it where it runs (and overwrites it: suites with admission
// installed get the creating user instead). Replies are built with
// DefaultAnswerer until this names another.
func (b *ReplyBuilder) AnsweredBy(username string) *ReplyBuilder {
	b.r.Spec.AnsweredBy = &hitlv1.UserInfo{Username: username, Groups: []string{AuthenticatedGroup}}
	return b
}

// Anonymous removes spec.answeredBy, as a reply admitted without hitl's
// admission would lack it.
func (b *ReplyBuilder) Anonymous() *ReplyBuilder {
	b.r.Spec.AnsweredBy = nil
	return b
}

// DefaultAnswerer is the author of a built reply until AnsweredBy names
// another, and AuthenticatedGroup the group every authenticated user is in
// (testenv.GrantAnswering lets it answer every agent).
const (
	DefaultAnswerer    = "answerer"
	AuthenticatedGroup = "system:authenticated"
)

// Obj returns the built reply.
func (b *ReplyBuilder) Obj() *hitlv1.QuestionReply { return b.r.DeepCopy() }
