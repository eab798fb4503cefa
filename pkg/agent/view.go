package agent

import (
	"context"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// View is the agent's questions as every reader sees them: the ones that
// can still take an answer, and the ones an answer settled. Cancelled
// questions are in neither half.
type View struct {
	// Active are the Open and Continued questions, in ask order.
	Active []PendingQuestion
	// Settled are the settled questions, in settlement order.
	Settled []SettledQuestion
}

// PendingQuestion is a question that can still take an answer.
type PendingQuestion struct {
	// Name is the UserQuestion's name.
	Name string
	// CallID is the id UIs key the question's card by.
	CallID string
	// Questions are the questions of the ask.
	Questions []hitlv1.Question
	// State is Open while the asking call may still return the answer, and
	// Continued once the answer can only arrive as a late reply.
	State hitlv1.QuestionState
	// Approval is, on a governed question, the rule it settles by and the
	// votes counted so far; nil when no approval rule governs it.
	Approval *Approval
}

// SettledQuestion is a question and the batch it settled with: the one that
// arrived inside the window, or the late reply the agent admitted. A
// transcript reads what the person finally answered from here.
type SettledQuestion struct {
	// Name is the UserQuestion's name.
	Name string
	// CallID is the id UIs key the question's card by.
	CallID string
	// Answers is the settled batch.
	Answers []hitlv1.AnswerItem
	// Late is true when the batch came as an admitted late reply.
	Late bool
	// At is when the question was settled.
	At time.Time
	// Approval is, on a governed question, the rule it settled by and the
	// votes that decided it; nil when no approval rule governed it.
	Approval *Approval
}

// Projection reads all the agent's questions, at one resourceVersion, and
// folds them into the active and settled views. Ask order is creation order
// (creationTimestamp, then name); settlement order is status.settlement.at,
// then name. Both timestamps have a resolution of one second.
func (a *Agent) Projection(ctx context.Context) (View, error) {
	l, err := a.list(ctx)
	if err != nil {
		return View{}, err
	}
	return project(l.Items), nil
}

// project folds questions into the two views.
func project(items []hitlv1.UserQuestion) View {
	active, settled := hitlv1.Views(items)
	var v View
	for i := range active {
		q := &active[i]
		v.Active = append(v.Active, PendingQuestion{Name: q.Name, CallID: q.CallID(), Questions: q.Spec.Questions, State: q.State(),
			Approval: ApprovalOf(q)})
	}
	for i := range settled {
		q := &settled[i]
		s := SettledQuestion{Name: q.Name, CallID: q.CallID(), Answers: q.Status.Answers, Approval: ApprovalOf(q)}
		if st := q.Status.Settlement; st != nil {
			s.Late, s.At = st.Late, st.At.Time
		}
		v.Settled = append(v.Settled, s)
	}
	return v
}
