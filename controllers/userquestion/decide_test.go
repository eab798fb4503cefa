package userquestion

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// asked is when the question under test was created. Scenario times are
// written as seconds after it: secs(3) is three seconds after the ask.
var asked = time.Date(2030, time.March, 4, 12, 0, 0, 0, time.UTC)

func secs(n float64) time.Time { return asked.Add(time.Duration(n * float64(time.Second))) }

// askName is the name of the question under test.
const askName = "deploy-plan"

// uqBuilder builds the UserQuestion under test:
//
//	aQuestion().timeout(3 * time.Second).ttl(10)
type uqBuilder struct{ q hitlv1.UserQuestion }

// aQuestion is a new, blocking ask of one single-select question, "color",
// with the options red, green and blue.
func aQuestion() *uqBuilder {
	b := &uqBuilder{q: hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: askName, UID: askUID, Generation: 1, CreationTimestamp: metav1.NewTime(asked)},
		Spec:       hitlv1.UserQuestionSpec{Agent: "coder"},
	}}
	return b.asks("color", "red", "green", "blue")
}

// askUID is the UID of the question under test.
const askUID types.UID = "uid-" + askName

// asks adds a single-select question to the ask.
func (b *uqBuilder) asks(id string, options ...string) *uqBuilder {
	q := hitlv1.Question{ID: id, Question: "Which " + id + "?"}
	for _, o := range options {
		q.Options = append(q.Options, hitlv1.QuestionOption{Label: o})
	}
	b.q.Spec.Questions = append(b.q.Spec.Questions, q)
	return b
}

func (b *uqBuilder) timeout(d time.Duration) *uqBuilder {
	b.q.Spec.Timeout = &metav1.Duration{Duration: d}
	return b
}

// askedAt is the precise time the client recorded for the ask.
func (b *uqBuilder) askedAt(t time.Time) *uqBuilder {
	at := metav1.NewMicroTime(t)
	b.q.Spec.AskedAt = &at
	return b
}

func (b *uqBuilder) ttl(seconds int32) *uqBuilder {
	b.q.Spec.TTLSecondsAfterFinished = &seconds
	return b
}

func (b *uqBuilder) cancelled() *uqBuilder { b.q.Spec.Cancelled = true; return b }

// askedBy records who asked, as admission stamps it.
func (b *uqBuilder) askedBy(u *hitlv1.UserInfo) *uqBuilder { b.q.Spec.AskedBy = u; return b }

// approval gives the last question an Approval intent.
func (b *uqBuilder) approval(approve, reject string) *uqBuilder {
	b.last().Intent = &hitlv1.QuestionIntent{Type: hitlv1.IntentApproval,
		Approval: &hitlv1.ApprovalIntent{Approve: approve, Reject: reject}}
	return b
}

// planReview gives the last question a PlanReview intent.
func (b *uqBuilder) planReview(approve string) *uqBuilder {
	b.last().Intent = &hitlv1.QuestionIntent{Type: hitlv1.IntentPlanReview, PlanReview: &hitlv1.PlanReviewIntent{Approve: approve}}
	b.last().Detail = "1. " + approve
	return b
}

func (b *uqBuilder) last() *hitlv1.Question { return &b.q.Spec.Questions[len(b.q.Spec.Questions)-1] }

// qrBuilder builds a QuestionReply to the question under test:
//
//	aReply("r1").created(secs(1)).selects("color", "red").by("bob")
type qrBuilder struct{ r hitlv1.QuestionReply }

// aReply is a reply from alice, created with the question, with no answers
// yet. Its UID is "uid-<name>".
func aReply(name string) *qrBuilder {
	return &qrBuilder{r: hitlv1.QuestionReply{
		ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: name, UID: replyUID(name), Generation: 1, CreationTimestamp: metav1.NewTime(asked)},
		Spec: hitlv1.QuestionReplySpec{
			QuestionRef: hitlv1.QuestionReference{Name: askName},
			AnsweredBy:  &hitlv1.UserInfo{Username: "alice"},
		},
	}}
}

func (b *qrBuilder) created(t time.Time) *qrBuilder {
	b.r.CreationTimestamp = metav1.NewTime(t)
	return b
}

func (b *qrBuilder) selects(id string, labels ...string) *qrBuilder {
	b.r.Spec.Answers = append(b.r.Spec.Answers, hitlv1.AnswerItem{ID: id, Selected: labels})
	return b
}

func (b *qrBuilder) by(username string) *qrBuilder {
	b.r.Spec.AnsweredBy = &hitlv1.UserInfo{Username: username}
	return b
}

// byUser sets the whole stamped identity of the author.
func (b *qrBuilder) byUser(u *hitlv1.UserInfo) *qrBuilder { b.r.Spec.AnsweredBy = u; return b }

// uid gives the reply another UID than aReply's: a reply re-created under
// the same name.
func (b *qrBuilder) uid(uid types.UID) *qrBuilder { b.r.UID = uid; return b }

// answersUID sets spec.questionRef.uid.
func (b *qrBuilder) answersUID(uid types.UID) *qrBuilder { b.r.Spec.QuestionRef.UID = uid; return b }

// ownedBy gives the reply an owner reference to the question of that name
// and UID, as admission or the controller adopt a reply.
func (b *qrBuilder) ownedBy(name string, uid types.UID) *qrBuilder {
	b.r.OwnerReferences = append(b.r.OwnerReferences, metav1.OwnerReference{
		APIVersion: hitlv1.GroupVersion.String(), Kind: "UserQuestion", Name: name, UID: uid})
	return b
}

// replyUID is the UID aReply gives a reply.
func replyUID(name string) types.UID { return types.UID("uid-" + name) }

// scene is the world Decide looks at: the question, its replies in creation
// order, its claims and the time. Earlier reconciles are played with
// reconciled, so that every status and outcome a case starts from is one the
// controller really wrote:
//
//	given(aQuestion().timeout(3 * time.Second)).at(secs(3)).reconciled(). // Continued
//		plus(aReply("r1").created(secs(10)).selects("color", "red")).at(secs(11))
type scene struct {
	question *hitlv1.UserQuestion
	replies  []hitlv1.QuestionReply
	claims   []Claim
	held     time.Time
	now      time.Time
	refused  map[string]Refusal
}

func given(q *uqBuilder, replies ...*qrBuilder) *scene {
	s := &scene{question: q.q.DeepCopy(), now: asked}
	return s.plus(replies...)
}

// at moves the clock.
func (s *scene) at(t time.Time) *scene { s.now = t; return s }

// plus adds replies; they are created after those already there.
func (s *scene) plus(replies ...*qrBuilder) *scene {
	for _, r := range replies {
		s.replies = append(s.replies, *r.r.DeepCopy())
	}
	return s
}

func (s *scene) claimed(claims ...Claim) *scene { s.claims = claims; return s }

func (s *scene) heldUntil(t time.Time) *scene { s.held = t; return s }

// refuses says what Reconcile learned of a reply's author: code, with a
// message naming the reply.
func (s *scene) refuses(reply string, code hitlv1.ErrorCode) *scene {
	if s.refused == nil {
		s.refused = map[string]Refusal{}
	}
	s.refused[reply] = Refusal{Code: code, Message: string(code) + ": refused " + reply}
	return s
}

// agentAdmits and agentCancels are the agent's spec writes.
func (s *scene) agentAdmits(reply string) *scene {
	s.question.Spec.AdmittedReply = reply
	s.question.Generation++
	return s
}

func (s *scene) agentCancels() *scene {
	s.question.Spec.Cancelled = true
	s.question.Generation++
	return s
}

// edit changes the question in a way no agent may (the CRD forbids it), to
// show what Decide does not depend on.
func (s *scene) edit(f func(q *hitlv1.UserQuestion)) *scene {
	f(s.question)
	s.question.Generation++
	return s
}

// deleting marks a reply as being deleted; gone removes it.
func (s *scene) deleting(reply string) *scene {
	for i := range s.replies {
		if s.replies[i].Name == reply {
			at := metav1.NewTime(s.now)
			s.replies[i].DeletionTimestamp = &at
		}
	}
	return s
}

func (s *scene) gone(reply string) *scene {
	kept := s.replies[:0]
	for _, r := range s.replies {
		if r.Name != reply {
			kept = append(kept, r)
		}
	}
	s.replies = kept
	return s
}

// reconciled decides at the scene's time and writes the decision the way
// Reconcile does: the question's status, then the replies' outcomes.
func (s *scene) reconciled() *scene { return s.write(true) }

// crashedAfterQuestionWrite decides and writes only the question's status,
// as a controller that died before writing the replies' outcomes.
func (s *scene) crashedAfterQuestionWrite() *scene { return s.write(false) }

func (s *scene) write(replies bool) *scene {
	in := s.inputs()
	d := Decide(in)
	s.question, s.replies = written(in, d, replies)
	return s
}

func (s *scene) inputs() Inputs {
	in := Inputs{Question: s.question.DeepCopy(), Claims: append([]Claim(nil), s.claims...), HeldUntil: s.held, Now: s.now, Refused: s.refused}
	for i := range s.replies {
		in.Replies = append(in.Replies, *s.replies[i].DeepCopy())
	}
	return in
}

// written is the world after a decision on in has been written.
func written(in Inputs, d Decision, replies bool) (*hitlv1.UserQuestion, []hitlv1.QuestionReply) {
	q := in.Question.DeepCopy()
	q.Status = *d.Status.DeepCopy()
	var rs []hitlv1.QuestionReply
	for i := range in.Replies {
		r := in.Replies[i].DeepCopy()
		for _, c := range d.Replies {
			if replies && c.Name == r.Name {
				r.Status.Outcome, r.Status.Reason, r.Status.Message = c.Outcome, c.Reason, c.Message
				if c.Source != nil {
					r.Status.Source = c.Source
				}
				setReplyConditions(&r.Status, r.Generation, in.Now)
			}
		}
		rs = append(rs, *r)
	}
	return q, rs
}

// decideWant is the decision a case expects. Every field is checked: a zero
// value means "none".
type decideWant struct {
	state       hitlv1.QuestionState
	transition  hitlv1.QuestionState
	deadline    time.Time
	continuedAt time.Time
	claims      []hitlv1.ClaimHolder
	claimCount  int32
	answers     []hitlv1.AnswerItem
	settlement  *hitlv1.Settlement
	queued      *hitlv1.QueuedReply
	changes     []replyWant
	requeue     time.Duration
	expired     bool
	// unchanged: the status is exactly the one the question had.
	unchanged bool
}

// closed is the final, healthy outcome of a reply whose question was
// finished or gone: Closed, NOT_ANSWERABLE.
func closed(reply string, says ...string) replyWant {
	return replyWant{name: reply, outcome: hitlv1.OutcomeClosed, reason: hitlv1.CodeNotAnswerable, says: says}
}

// closedAlone is Closed for what the reply is (made for a question that is
// gone), or on a question read finished: it needs no fence.
func closedAlone(reply string, says ...string) replyWant {
	w := closed(reply, says...)
	w.alone = true
	return w
}

// replyWant is an expected ReplyChange; its message must contain each of
// says. alone: the outcome follows from the reply and the question's spec
// alone, and needs no fencing status write.
type replyWant struct {
	name    string
	outcome hitlv1.ReplyOutcome
	reason  hitlv1.ErrorCode
	says    []string
	alone   bool
}

func TestDecide(t *testing.T) {
	const s = time.Second
	red := []hitlv1.AnswerItem{{ID: "color", Selected: []string{"red"}}}
	green := []hitlv1.AnswerItem{{ID: "color", Selected: []string{"green"}}}
	alice := &hitlv1.UserInfo{Username: "alice"}
	bob := &hitlv1.UserInfo{Username: "bob"}
	settled := func(reply string, by *hitlv1.UserInfo, late bool, at time.Time) *hitlv1.Settlement {
		return &hitlv1.Settlement{Reply: reply, ReplyUID: replyUID(reply), AnsweredBy: by, Late: late, At: metav1.NewMicroTime(at)}
	}
	queued := func(reply string, answers []hitlv1.AnswerItem, by *hitlv1.UserInfo, at time.Time) *hitlv1.QueuedReply {
		return &hitlv1.QueuedReply{Name: reply, UID: replyUID(reply), Answers: answers, AnsweredBy: by, QueuedAt: metav1.NewMicroTime(at)}
	}
	applied := func(reply string) replyWant {
		return replyWant{name: reply, outcome: hitlv1.OutcomeApplied, says: []string{"question " + askName}}
	}
	queuedOutcome := func(reply string) replyWant {
		return replyWant{name: reply, outcome: hitlv1.OutcomeQueued, says: []string{"question " + askName}}
	}
	admitted := func(reply string) replyWant {
		return replyWant{name: reply, outcome: hitlv1.OutcomeAdmitted, says: []string{"question " + askName}}
	}
	rejected := func(reply string, code hitlv1.ErrorCode, says ...string) replyWant {
		return replyWant{name: reply, outcome: hitlv1.OutcomeRejected, reason: code, says: says}
	}
	// refused is a rejection for what the reply is, whatever the
	// question's state: it needs no fencing status write.
	refused := func(reply string, code hitlv1.ErrorCode, says ...string) replyWant {
		return replyWant{name: reply, outcome: hitlv1.OutcomeRejected, reason: code, says: says, alone: true}
	}
	claim := func(name string, expires time.Time) Claim {
		return Claim{Name: name, Holder: "inbox/" + name, ExpiresAt: expires}
	}
	holder := func(name string) hitlv1.ClaimHolder {
		return hitlv1.ClaimHolder{Name: name, Holder: "inbox/" + name}
	}

	timed := func() *uqBuilder { return aQuestion().timeout(3 * s) }
	// continued is a timed question whose window closed unanswered at 3s.
	continued := func() *scene { return given(timed()).at(secs(3)).reconciled() }
	// withQueued is continued with r1 (red, from alice) queued at 10s.
	withQueued := func() *scene {
		return continued().plus(aReply("r1").created(secs(10)).selects("color", "red")).at(secs(10)).reconciled()
	}
	// admittedLate is withQueued after the agent admitted r1 at 30s.
	admittedLate := func() *scene { return withQueued().agentAdmits("r1").at(secs(30)).reconciled() }
	// settledByR1 is a blocking question settled by r1 (red, from alice) at 2s.
	settledByR1 := func(q *uqBuilder) *scene {
		return given(q, aReply("r1").created(secs(2)).selects("color", "red")).at(secs(2)).reconciled()
	}

	cases := []struct {
		name string
		in   *scene
		want decideWant
	}{
		// 1. A new blocking question.
		{
			name: "a new blocking question is open with nothing scheduled",
			in:   given(aQuestion()).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen},
		},
		{
			name: "an open blocking question stays open however long it waits",
			in:   given(aQuestion()).at(secs(1)).reconciled().at(secs(86400)),
			want: decideWant{state: hitlv1.StateOpen},
		},

		// 2. Timed questions and their deadline.
		{
			name: "a new timed question is open and looked at again exactly at its deadline",
			in:   given(timed()).at(secs(1.25)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(3), requeue: 1750 * time.Millisecond},
		},
		{
			name: "the window runs from the client's precise asked-at time when it lies in the creation second",
			in:   given(timed().askedAt(secs(0.75))).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(3.75), requeue: 2750 * time.Millisecond},
		},
		{
			name: "an asked-at time at the creation second's start is accepted",
			in:   given(timed().askedAt(secs(0))).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(3), requeue: 2 * s},
		},
		{
			name: "an asked-at time a second or more after creation cannot be true: the window runs from creation",
			in:   given(timed().askedAt(secs(1))).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(3), requeue: 2 * s},
		},
		{
			name: "an asked-at time before creation cannot be true either: the window runs from creation",
			in:   given(timed().askedAt(secs(-0.5))).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(3), requeue: 2 * s},
		},
		{
			name: "a question asked at 0.75s with a 3s window is still open at 3.5s and continues at 3.75s",
			in:   given(timed().askedAt(secs(0.75))).at(secs(1)).reconciled().at(secs(3.75)),
			want: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3.75), continuedAt: secs(3.75)},
		},
		{
			name: "a timeout in milliseconds gives a deadline in milliseconds",
			in:   given(aQuestion().timeout(1500 * time.Millisecond)).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(1.5), requeue: 500 * time.Millisecond},
		},
		{
			name: "one nanosecond before its deadline a timed question is still open",
			in:   given(timed()).at(secs(3).Add(-time.Nanosecond)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(3), requeue: time.Nanosecond},
		},
		{
			name: "at its deadline exactly a timed question continues",
			in:   given(timed()).at(secs(3)),
			want: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3)},
		},
		{
			name: "an open timed question continues when its deadline comes",
			in:   given(timed()).at(secs(1)).reconciled().at(secs(3)),
			want: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3)},
		},
		{
			name: "a deadline that passed while the controller was down continues the question at once",
			in:   given(timed()).at(secs(3600)),
			want: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3600)},
		},
		{
			name: "an open timed question stays open before its deadline, without a transition",
			in:   given(timed()).at(secs(1)).reconciled().at(secs(2)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(3), requeue: s},
		},
		{
			name: "the deadline is computed once and never moved",
			in: given(timed()).at(secs(1)).reconciled().
				edit(func(q *hitlv1.UserQuestion) { q.Spec.Timeout.Duration = 10 * s }).at(secs(4)),
			want: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(4)},
		},
		{
			name: "a continued question stays continued and nothing is scheduled",
			in:   continued().at(secs(100)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3), unchanged: true},
		},

		// 3. Replies to an open question.
		{
			name: "a valid reply settles an open question inside its window",
			in:   given(aQuestion(), aReply("r1").created(secs(2)).selects("color", "red")).at(secs(2)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers: red, settlement: settled("r1", alice, false, secs(2)),
				changes: []replyWant{applied("r1")}},
		},
		{
			name: "an invalid batch is rejected with BAD_ANSWER naming the question id and the rule, and the question stays open",
			in:   given(aQuestion(), aReply("r1").created(secs(2)).selects("color", "purple")).at(secs(2)),
			want: decideWant{state: hitlv1.StateOpen,
				changes: []replyWant{rejected("r1", hitlv1.CodeBadAnswer, "question color", `"purple" is not an option`)}},
		},
		{
			name: "a batch that leaves out a question of the ask is rejected with BAD_ANSWER naming it",
			in:   given(aQuestion().asks("size", "S", "M"), aReply("r1").created(secs(2)).selects("color", "red")).at(secs(2)),
			want: decideWant{state: hitlv1.StateOpen,
				changes: []replyWant{rejected("r1", hitlv1.CodeBadAnswer, "question size", "not answered")}},
		},
		{
			name: "a batch selecting two labels of a single-select question is rejected with BAD_ANSWER",
			in:   given(aQuestion(), aReply("r1").created(secs(2)).selects("color", "red", "green")).at(secs(2)),
			want: decideWant{state: hitlv1.StateOpen,
				changes: []replyWant{rejected("r1", hitlv1.CodeBadAnswer, "question color", "single-select")}},
		},
		{
			name: "an invalid reply then a valid one: the first is rejected, the second settles",
			in: given(aQuestion(),
				aReply("r1").created(secs(1)).selects("color", "purple"),
				aReply("r2").created(secs(2)).selects("color", "green").by("bob")).at(secs(2)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers: green, settlement: settled("r2", bob, false, secs(2)),
				changes: []replyWant{rejected("r1", hitlv1.CodeBadAnswer, "question color"), applied("r2")}},
		},
		{
			name: "two valid replies: the first in creation order settles, the second is not answerable",
			in: given(aQuestion(),
				aReply("r1").created(secs(2)).selects("color", "red"),
				aReply("r2").created(secs(2)).selects("color", "green").by("bob")).at(secs(2)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers: red, settlement: settled("r1", alice, false, secs(2)),
				changes: []replyWant{applied("r1"), closed("r2", "question "+askName, "Settled")}},
		},
		{
			name: "a valid reply inside a timed question's window settles it and nothing is scheduled",
			in:   given(timed(), aReply("r1").created(secs(1)).selects("color", "red")).at(secs(2)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, deadline: secs(3),
				answers: red, settlement: settled("r1", alice, false, secs(2)),
				changes: []replyWant{applied("r1")}},
		},
		{
			name: "a rejected batch leaves a timed question waiting for its deadline",
			in:   given(timed(), aReply("r1").created(secs(1)).selects("color", "purple")).at(secs(2)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(3), requeue: s,
				changes: []replyWant{rejected("r1", hitlv1.CodeBadAnswer, "question color")}},
		},

		{
			name: "a reply deleted before it was processed is withdrawn, not applied",
			in:   given(aQuestion(), aReply("r1").created(secs(2)).selects("color", "red")).at(secs(2)).deleting("r1"),
			want: decideWant{state: hitlv1.StateOpen},
		},

		// 4. Replies racing the deadline.
		{
			name: "a reply created before the deadline but seen after it is applied in the window",
			in:   given(timed(), aReply("r1").created(secs(2)).selects("color", "red")).at(secs(5)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, deadline: secs(3),
				answers: red, settlement: settled("r1", alice, false, secs(5)),
				changes: []replyWant{applied("r1")}},
		},
		{
			// Creation timestamps have whole seconds: one that reads 2s
			// may be as late as 2.999s, so it cannot be called late.
			name: "a reply whose creation second is the deadline's second counts as in time",
			in: given(aQuestion().timeout(2500*time.Millisecond),
				aReply("r1").created(secs(2)).selects("color", "red")).at(secs(4)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, deadline: secs(2.5),
				answers: red, settlement: settled("r1", alice, false, secs(4)),
				changes: []replyWant{applied("r1")}},
		},
		{
			name: "a reply created at the deadline of a question still open continues it and is queued",
			in:   given(timed(), aReply("r1").created(secs(3)).selects("color", "red")).at(secs(3.2)),
			want: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3.2),
				queued:  queued("r1", red, alice, secs(3.2)),
				changes: []replyWant{queuedOutcome("r1")}},
		},
		{
			name: "a reply created after the deadline of a question still open continues it and is queued",
			in:   given(timed()).at(secs(1)).reconciled().plus(aReply("r1").created(secs(7)).selects("color", "red")).at(secs(8)),
			want: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(8),
				queued:  queued("r1", red, alice, secs(8)),
				changes: []replyWant{queuedOutcome("r1")}},
		},
		{
			name: "an invalid reply created before the deadline and seen after it is rejected, and the window closes",
			in:   given(timed(), aReply("r1").created(secs(2)).selects("color", "purple")).at(secs(5)),
			want: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(5),
				changes: []replyWant{rejected("r1", hitlv1.CodeBadAnswer, "question color")}},
		},
		{
			name: "a reply in time settles the question and a late one seen with it is not answerable",
			in: given(timed(),
				aReply("r1").created(secs(2)).selects("color", "red"),
				aReply("r2").created(secs(4)).selects("color", "green").by("bob")).at(secs(5)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, deadline: secs(3),
				answers: red, settlement: settled("r1", alice, false, secs(5)),
				changes: []replyWant{applied("r1"), closed("r2", "Settled")}},
		},

		// 5. Late replies to a continued question.
		{
			name: "a valid reply to a continued question is queued and the question stays continued",
			in:   continued().plus(aReply("r1").created(secs(10)).selects("color", "red")).at(secs(10.5)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				queued:  queued("r1", red, alice, secs(10.5)),
				changes: []replyWant{queuedOutcome("r1")}},
		},
		{
			name: "a second late reply seen with the queued one is rejected with REPLY_QUEUED",
			in: continued().plus(
				aReply("r1").created(secs(10)).selects("color", "red"),
				aReply("r2").created(secs(10)).selects("color", "green").by("bob")).at(secs(11)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				queued:  queued("r1", red, alice, secs(11)),
				changes: []replyWant{queuedOutcome("r1"), rejected("r2", hitlv1.CodeReplyQueued, "question "+askName, "r1")}},
		},
		{
			name: "a late reply after one was queued is rejected with REPLY_QUEUED, the queue living in the status (as after a restart)",
			in:   withQueued().plus(aReply("r2").created(secs(20)).selects("color", "green").by("bob")).at(secs(21)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				queued:  queued("r1", red, alice, secs(10)),
				changes: []replyWant{rejected("r2", hitlv1.CodeReplyQueued, "r1")}},
		},
		{
			name: "while a reply is queued even an invalid reply is rejected with REPLY_QUEUED",
			in:   withQueued().plus(aReply("r2").created(secs(20)).selects("color", "purple")).at(secs(21)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				queued:  queued("r1", red, alice, secs(10)),
				changes: []replyWant{rejected("r2", hitlv1.CodeReplyQueued, "r1")}},
		},
		{
			name: "an invalid late reply is rejected with BAD_ANSWER and nothing is queued",
			in:   continued().plus(aReply("r1").created(secs(10)).selects("color", "purple")).at(secs(11)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				changes: []replyWant{rejected("r1", hitlv1.CodeBadAnswer, "question color")}},
		},

		// 6. Admission.
		{
			name: "admitting the queued reply settles the question late with the queued batch",
			in:   withQueued().agentAdmits("r1").at(secs(30)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, deadline: secs(3), continuedAt: secs(3),
				answers: red, settlement: settled("r1", alice, true, secs(30)),
				changes: []replyWant{admitted("r1")}},
		},
		{
			name: "a reply seen with the admission is not answerable",
			in:   withQueued().agentAdmits("r1").plus(aReply("r2").created(secs(29)).selects("color", "green")).at(secs(30)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, deadline: secs(3), continuedAt: secs(3),
				answers: red, settlement: settled("r1", alice, true, secs(30)),
				changes: []replyWant{admitted("r1"), closed("r2", "Settled")}},
		},
		{
			name: "admitting a reply that is not the queued one changes nothing",
			in: withQueued().plus(aReply("r2").created(secs(20)).selects("color", "green")).at(secs(20)).reconciled().
				agentAdmits("r2").at(secs(30)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				queued: queued("r1", red, alice, secs(10))},
		},

		// 7. Withdrawal.
		{
			name: "a queued reply deleted before admission is withdrawn and the question stays continued",
			in:   withQueued().gone("r1").at(secs(40)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3)},
		},
		{
			name: "a queued reply being deleted before admission is withdrawn",
			in:   withQueued().at(secs(40)).deleting("r1"),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3)},
		},
		{
			name: "after a withdrawal a new late reply is queued",
			in:   withQueued().gone("r1").plus(aReply("r2").created(secs(40)).selects("color", "green").by("bob")).at(secs(41)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				queued:  queued("r2", green, bob, secs(41)),
				changes: []replyWant{queuedOutcome("r2")}},
		},
		{
			name: "after admission deleting the admitted reply changes nothing",
			in:   admittedLate().at(secs(60)).deleting("r1"),
			want: decideWant{state: hitlv1.StateSettled, deadline: secs(3), continuedAt: secs(3),
				answers: red, settlement: settled("r1", alice, true, secs(30)), unchanged: true},
		},
		{
			name: "after admission the admitted reply's disappearance changes nothing",
			in:   admittedLate().gone("r1").at(secs(60)),
			want: decideWant{state: hitlv1.StateSettled, deadline: secs(3), continuedAt: secs(3),
				answers: red, settlement: settled("r1", alice, true, secs(30)), unchanged: true},
		},

		// 8. Cancellation.
		{
			name: "cancelling an open question cancels it",
			in:   given(timed()).at(secs(1)).reconciled().agentCancels().at(secs(2)),
			want: decideWant{state: hitlv1.StateCancelled, transition: hitlv1.StateCancelled, deadline: secs(3)},
		},
		{
			name: "cancelling an open question past its deadline cancels it rather than continuing it",
			in:   given(timed()).at(secs(1)).reconciled().agentCancels().at(secs(5)),
			want: decideWant{state: hitlv1.StateCancelled, transition: hitlv1.StateCancelled, deadline: secs(3)},
		},
		{
			name: "cancelling a continued question drops its queued reply, which becomes not answerable",
			in:   withQueued().agentCancels().at(secs(30)),
			want: decideWant{state: hitlv1.StateCancelled, transition: hitlv1.StateCancelled, deadline: secs(3), continuedAt: secs(3),
				changes: []replyWant{closed("r1", "question "+askName, "Cancelled")}},
		},
		{
			name: "a reply seen with the cancellation is not answerable",
			in:   given(aQuestion().cancelled(), aReply("r1").created(secs(1)).selects("color", "red")).at(secs(1)),
			want: decideWant{state: hitlv1.StateCancelled, transition: hitlv1.StateCancelled,
				changes: []replyWant{closed("r1", "question "+askName, "Cancelled")}},
		},
		{
			name: "a reply to a cancelled question is not answerable",
			in: given(aQuestion().cancelled()).at(secs(1)).reconciled().
				plus(aReply("r1").created(secs(5)).selects("color", "red")).at(secs(5)),
			want: decideWant{state: hitlv1.StateCancelled,
				changes: []replyWant{closedAlone("r1", "question "+askName, "Cancelled")}},
		},
		{
			name: "a reply to a settled question is not answerable and the question does not change",
			in:   settledByR1(aQuestion()).plus(aReply("r2").created(secs(5)).selects("color", "green")).at(secs(5)),
			want: decideWant{state: hitlv1.StateSettled, answers: red, settlement: settled("r1", alice, false, secs(2)),
				changes: []replyWant{closedAlone("r2", "question "+askName, "Settled")}, unchanged: true},
		},
		{
			name: "a settled question stays settled when the agent cancels it later",
			in:   settledByR1(aQuestion()).agentCancels().at(secs(5)),
			want: decideWant{state: hitlv1.StateSettled, answers: red, settlement: settled("r1", alice, false, secs(2))},
		},
		{
			name: "a question settled late stays settled when the agent cancels it later",
			in:   admittedLate().agentCancels().at(secs(40)),
			want: decideWant{state: hitlv1.StateSettled, deadline: secs(3), continuedAt: secs(3),
				answers: red, settlement: settled("r1", alice, true, secs(30))},
		},

		// 9. Claims.
		{
			name: "a live claim holds a timed question open past its deadline; claims are listed by name",
			in:   given(timed()).claimed(claim("zed", secs(12)), claim("amy", secs(9))).at(secs(5)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(3),
				claims: []hitlv1.ClaimHolder{holder("amy"), holder("zed")}, requeue: 4 * s},
		},
		{
			// 64 is the schema's bound on status.claims: listing a 65th
			// made every status write fail, wedging the question. The
			// claim tracker hands Decide at most 64 (see
			// TestClaimTrackerCountsAtMostMaxClaimsPerQuestion); the
			// listing stays bounded whatever it is given.
			name: "more live claims than status.claims may list: the first 64 by name are listed, and all are counted",
			in:   given(timed()).claimed(manyClaims(65, secs(20))...).at(secs(5)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(3), claims: manyHolders(64), claimCount: 65, requeue: 15 * s},
		},
		{
			name: "before the deadline a claimed question is looked at again at its deadline when the claim outlives it",
			in:   given(timed()).claimed(claim("amy", secs(10))).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(3), claims: []hitlv1.ClaimHolder{holder("amy")}, requeue: 2 * s},
		},
		{
			name: "before the deadline a claimed question is looked at again when the claim expires first",
			in:   given(timed()).claimed(claim("amy", secs(2))).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(3), claims: []hitlv1.ClaimHolder{holder("amy")}, requeue: s},
		},
		{
			name: "a claim that expires at now does not hold the window",
			in:   given(timed()).claimed(claim("amy", secs(5))).at(secs(5)),
			want: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(5)},
		},
		{
			name: "only live claims are listed and hold the window",
			in:   given(timed()).claimed(claim("amy", secs(4)), claim("bob", secs(9))).at(secs(5)),
			want: decideWant{state: hitlv1.StateOpen, deadline: secs(3), claims: []hitlv1.ClaimHolder{holder("bob")}, requeue: 4 * s},
		},
		{
			name: "a claimed question past its deadline continues when the claim expires",
			in:   given(timed()).claimed(claim("amy", secs(8))).at(secs(5)).reconciled().at(secs(8)),
			want: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(8)},
		},
		{
			name: "when the last claim ended after the deadline the question continues at once",
			in:   given(timed()).heldUntil(secs(10)).at(secs(10.5)),
			want: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(10.5)},
		},
		{
			name: "a claim on a blocking question changes nothing but is listed",
			in:   given(aQuestion()).claimed(claim("amy", secs(30))).at(secs(10)),
			want: decideWant{state: hitlv1.StateOpen, claims: []hitlv1.ClaimHolder{holder("amy")}, requeue: 20 * s},
		},
		{
			name: "a claim on a continued question changes nothing but is listed",
			in:   continued().claimed(claim("amy", secs(30))).at(secs(10)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				claims: []hitlv1.ClaimHolder{holder("amy")}, requeue: 20 * s},
		},
		{
			// The TTL ends before the claim expires, so the requeue is the
			// TTL's whether or not a settled question's claims are looked
			// at again when they expire (see the report on claims of
			// terminal questions).
			name: "a reply created after the deadline while a claim is live is applied",
			in: given(timed().ttl(5), aReply("r1").created(secs(8)).selects("color", "red")).
				claimed(claim("amy", secs(20))).at(secs(9)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, deadline: secs(3),
				answers: red, settlement: settled("r1", alice, false, secs(9)), // a finished question lists no claims
				changes: []replyWant{applied("r1")}, requeue: 5 * s},
		},
		{
			name: "a reply created after the deadline but before a gone claim stopped holding the window is applied",
			in:   given(timed(), aReply("r1").created(secs(9)).selects("color", "red")).heldUntil(secs(10)).at(secs(11)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, deadline: secs(3),
				answers: red, settlement: settled("r1", alice, false, secs(11)),
				changes: []replyWant{applied("r1")}},
		},
		{
			name: "a reply created when a gone claim stopped holding the window is late",
			in:   given(timed(), aReply("r1").created(secs(10)).selects("color", "red")).heldUntil(secs(10)).at(secs(11)),
			want: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(11),
				queued: queued("r1", red, alice, secs(11)), changes: []replyWant{queuedOutcome("r1")}},
		},

		// 10. Crash recovery: outcomes the status already implies are restored.
		{
			name: "a crash after settling: the settling reply's outcome is restored as Applied",
			in:   given(aQuestion(), aReply("r1").created(secs(2)).selects("color", "red")).at(secs(2)).crashedAfterQuestionWrite().at(secs(3)),
			want: decideWant{state: hitlv1.StateSettled, answers: red, settlement: settled("r1", alice, false, secs(2)),
				changes: []replyWant{applied("r1")}, unchanged: true},
		},
		{
			name: "a crash after admitting: the admitted reply's outcome is restored as Admitted",
			in:   withQueued().agentAdmits("r1").at(secs(30)).crashedAfterQuestionWrite().at(secs(31)),
			want: decideWant{state: hitlv1.StateSettled, deadline: secs(3), continuedAt: secs(3),
				answers: red, settlement: settled("r1", alice, true, secs(30)),
				changes: []replyWant{admitted("r1")}, unchanged: true},
		},
		{
			name: "a crash after queueing: the queued reply's outcome is restored as Queued",
			in: continued().plus(aReply("r2").created(secs(10)).selects("color", "green").by("bob")).at(secs(10)).
				crashedAfterQuestionWrite().at(secs(11)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				queued: queued("r2", green, bob, secs(10)), changes: []replyWant{queuedOutcome("r2")}, unchanged: true},
		},
		{
			name: "a crash after cancelling: the reply that was queued is rejected as not answerable",
			in:   withQueued().agentCancels().at(secs(30)).crashedAfterQuestionWrite().at(secs(31)),
			want: decideWant{state: hitlv1.StateCancelled, deadline: secs(3), continuedAt: secs(3),
				changes: []replyWant{closed("r1", "Cancelled")}, unchanged: true},
		},

		// 11. Time to live after finishing.
		{
			name: "a settled question with a TTL is looked at again when the TTL ends",
			in:   settledByR1(aQuestion().ttl(10)).at(secs(7)),
			want: decideWant{state: hitlv1.StateSettled, answers: red, settlement: settled("r1", alice, false, secs(2)),
				requeue: 5 * s, unchanged: true},
		},
		{
			name: "a settled question whose TTL has ended is expired",
			in:   settledByR1(aQuestion().ttl(10)).at(secs(12)),
			want: decideWant{state: hitlv1.StateSettled, answers: red, settlement: settled("r1", alice, false, secs(2)),
				expired: true, unchanged: true},
		},
		{
			name: "a TTL of zero does not expire a question in the decision that settles it: the settlement is written first",
			in:   given(aQuestion().ttl(0), aReply("r1").created(secs(2)).selects("color", "red")).at(secs(2)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers: red, settlement: settled("r1", alice, false, secs(2)),
				changes: []replyWant{applied("r1")}, requeue: expiryRecheck},
		},
		{
			name: "a TTL of zero expires a settled question on the next look",
			in:   settledByR1(aQuestion().ttl(0)).at(secs(2)),
			want: decideWant{state: hitlv1.StateSettled, answers: red, settlement: settled("r1", alice, false, secs(2)),
				expired: true, unchanged: true},
		},
		{
			name: "a question past its TTL whose settling reply lacks its outcome (a crash) gets the outcome before it expires",
			in: given(aQuestion().ttl(0), aReply("r1").created(secs(2)).selects("color", "red")).at(secs(2)).
				crashedAfterQuestionWrite().at(secs(3)),
			want: decideWant{state: hitlv1.StateSettled, answers: red, settlement: settled("r1", alice, false, secs(2)),
				changes: []replyWant{applied("r1")}, requeue: expiryRecheck, unchanged: true},
		},
		{
			name: "a TTL of zero does not expire a question in the decision that cancels it",
			in:   given(aQuestion().ttl(0)).at(secs(1)).reconciled().agentCancels().at(secs(5)),
			want: decideWant{state: hitlv1.StateCancelled, transition: hitlv1.StateCancelled, requeue: expiryRecheck},
		},
		{
			name: "a question cancelled with a TTL is looked at again when the TTL ends",
			in:   given(aQuestion().ttl(10)).at(secs(1)).reconciled().agentCancels().at(secs(100)),
			want: decideWant{state: hitlv1.StateCancelled, transition: hitlv1.StateCancelled, requeue: 10 * s},
		},
		{
			name: "a cancelled question's TTL runs from the cancellation, not from its first look",
			in:   given(aQuestion().ttl(10)).at(secs(1)).reconciled().agentCancels().at(secs(100)).reconciled().at(secs(101)),
			want: decideWant{state: hitlv1.StateCancelled, requeue: 9 * s, unchanged: true},
		},
		{
			name: "an open question's TTL does not run",
			in:   given(aQuestion().ttl(10)).at(secs(100)),
			want: decideWant{state: hitlv1.StateOpen},
		},

		// 12. Replies whose author may not answer, or that name another agent.
		{
			name: "a reply whose author may not answer is rejected with FORBIDDEN, and the next reply settles",
			in: given(aQuestion(),
				aReply("r1").created(secs(1)).selects("color", "red").by("mallory"),
				aReply("r2").created(secs(2)).selects("color", "green").by("bob")).at(secs(2)).refuses("r1", hitlv1.CodeForbidden),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers: green, settlement: settled("r2", bob, false, secs(2)),
				changes: []replyWant{refused("r1", hitlv1.CodeForbidden, "refused r1"), applied("r2")}},
		},
		{
			name: "a refused late reply is rejected, not queued",
			in:   continued().plus(aReply("r1").created(secs(10)).selects("color", "red")).at(secs(10)).refuses("r1", hitlv1.CodeForbidden),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				changes: []replyWant{refused("r1", hitlv1.CodeForbidden, "refused r1")}},
		},
		{
			name: "a refusal goes before the state: a reply naming another agent to a settled question is AGENT_MISMATCH",
			in: settledByR1(aQuestion()).plus(aReply("r2").created(secs(5)).selects("color", "green")).at(secs(5)).
				refuses("r2", hitlv1.CodeAgentMismatch),
			want: decideWant{state: hitlv1.StateSettled, answers: red, settlement: settled("r1", alice, false, secs(2)),
				changes: []replyWant{refused("r2", hitlv1.CodeAgentMismatch, "refused r2")}},
		},
		{
			name: "a refused reply that arrives after the deadline still closes the window",
			in:   given(timed(), aReply("r1").created(secs(4)).selects("color", "red")).at(secs(4)).refuses("r1", hitlv1.CodeForbidden),
			want: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(4),
				changes: []replyWant{refused("r1", hitlv1.CodeForbidden, "refused r1")}},
		},

		// 13. Outcomes already given stay.
		{
			name: "a reply already rejected keeps its outcome",
			in:   given(aQuestion(), aReply("r1").created(secs(2)).selects("color", "purple")).at(secs(2)).reconciled().at(secs(3)),
			want: decideWant{state: hitlv1.StateOpen, unchanged: true},
		},
		{
			name: "a reply rejected with REPLY_QUEUED is not queued when the queue empties",
			in: withQueued().plus(aReply("r2").created(secs(20)).selects("color", "green")).at(secs(20)).reconciled().
				gone("r1").at(secs(40)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3)},
		},

		// 14. Replies are followed by UID: a name re-used after deletion is
		// a new reply, judged afresh.
		{
			name: "a reply re-created under the settling reply's name by someone without the grant is FORBIDDEN, not Applied",
			in: settledByR1(aQuestion()).gone("r1").
				plus(aReply("r1").uid("uid-r1-again").created(secs(5)).selects("color", "green").by("mallory")).at(secs(5)).
				refuses("r1", hitlv1.CodeForbidden),
			want: decideWant{state: hitlv1.StateSettled, answers: red, settlement: settled("r1", alice, false, secs(2)),
				changes: []replyWant{refused("r1", hitlv1.CodeForbidden, "refused r1")}, unchanged: true},
		},
		{
			name: "a reply re-created under the settling reply's name by someone with the grant is NOT_ANSWERABLE: the question is settled",
			in: settledByR1(aQuestion()).gone("r1").
				plus(aReply("r1").uid("uid-r1-again").created(secs(5)).selects("color", "green").by("bob")).at(secs(5)),
			want: decideWant{state: hitlv1.StateSettled, answers: red, settlement: settled("r1", alice, false, secs(2)),
				changes: []replyWant{closedAlone("r1", "question "+askName, "Settled")}, unchanged: true},
		},
		{
			name: "a reply re-created under the admitted reply's name is not Admitted",
			in: admittedLate().gone("r1").
				plus(aReply("r1").uid("uid-r1-again").created(secs(40)).selects("color", "green").by("mallory")).at(secs(40)).
				refuses("r1", hitlv1.CodeForbidden),
			want: decideWant{state: hitlv1.StateSettled, deadline: secs(3), continuedAt: secs(3),
				answers: red, settlement: settled("r1", alice, true, secs(30)),
				changes: []replyWant{refused("r1", hitlv1.CodeForbidden, "refused r1")}, unchanged: true},
		},
		{
			name: "a queued reply re-created under its name is withdrawn, and the new one is refused, not kept queued",
			in: withQueued().gone("r1").
				plus(aReply("r1").uid("uid-r1-again").created(secs(40)).selects("color", "green").by("mallory")).at(secs(41)).
				refuses("r1", hitlv1.CodeForbidden),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				changes: []replyWant{refused("r1", hitlv1.CodeForbidden, "refused r1")}},
		},
		{
			name: "a queued reply re-created under its name by someone with the grant is queued afresh, with its own batch and UID",
			in: withQueued().gone("r1").
				plus(aReply("r1").uid("uid-r1-again").created(secs(40)).selects("color", "green").by("bob")).at(secs(41)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				queued:  &hitlv1.QueuedReply{Name: "r1", UID: "uid-r1-again", Answers: green, AnsweredBy: bob, QueuedAt: metav1.NewMicroTime(secs(41))},
				changes: []replyWant{queuedOutcome("r1")}},
		},

		// 15. A reply made for another question of the same name settles
		// nothing.
		{
			name: "a reply created before its question is NOT_ANSWERABLE and the question stays open",
			in:   given(aQuestion(), aReply("r1").created(secs(-1)).selects("color", "red")).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen,
				changes: []replyWant{closedAlone("r1", "reply r1 was created at", "before question "+askName)}},
		},
		{
			name: "a reply created before its question does not take the next reply's place: the next settles",
			in: given(aQuestion(),
				aReply("r1").created(secs(-5)).selects("color", "red"),
				aReply("r2").created(secs(1)).selects("color", "green").by("bob")).at(secs(1)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers: green, settlement: settled("r2", bob, false, secs(1)),
				changes: []replyWant{closedAlone("r1", "before question"), applied("r2")}},
		},
		{
			name: "a reply created before a continued question is NOT_ANSWERABLE, not queued",
			in:   continued().plus(aReply("r1").created(secs(-1)).selects("color", "red")).at(secs(10)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				changes: []replyWant{closedAlone("r1", "before question")}},
		},
		{
			// Creation timestamps have whole seconds: only a reply created
			// in an earlier second is surely older than the question.
			name: "a reply created in its question's second answers it",
			in:   given(aQuestion(), aReply("r1").created(secs(0)).selects("color", "red")).at(secs(1)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers: red, settlement: settled("r1", alice, false, secs(1)), changes: []replyWant{applied("r1")}},
		},
		{
			name: "a reply naming another UID in spec.questionRef.uid is NOT_ANSWERABLE and the question stays open",
			in:   given(aQuestion(), aReply("r1").created(secs(1)).answersUID("uid-earlier").selects("color", "red")).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen,
				changes: []replyWant{closedAlone("r1", "uid-earlier", "spec.questionRef.uid", string(askUID))}},
		},
		{
			name: "a reply naming the live question's UID settles it",
			in:   given(aQuestion(), aReply("r1").created(secs(1)).answersUID(askUID).selects("color", "red")).at(secs(1)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers: red, settlement: settled("r1", alice, false, secs(1)), changes: []replyWant{applied("r1")}},
		},
		{
			name: "a reply naming another UID is NOT_ANSWERABLE on a settled question too, and changes nothing",
			in:   settledByR1(aQuestion()).plus(aReply("r2").created(secs(5)).answersUID("uid-earlier").selects("color", "green")).at(secs(5)),
			want: decideWant{state: hitlv1.StateSettled, answers: red, settlement: settled("r1", alice, false, secs(2)),
				changes: []replyWant{closedAlone("r2", "spec.questionRef.uid")}, unchanged: true},
		},
		{
			name: "a reply owned by an earlier question of the same name is NOT_ANSWERABLE",
			in:   given(aQuestion(), aReply("r1").created(secs(1)).ownedBy(askName, "uid-earlier").selects("color", "red")).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen,
				changes: []replyWant{closedAlone("r1", "uid-earlier", "metadata.ownerReferences")}},
		},
		{
			name: "a reply owned by its question settles it",
			in:   given(aQuestion(), aReply("r1").created(secs(1)).ownedBy(askName, askUID).selects("color", "red")).at(secs(1)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers: red, settlement: settled("r1", alice, false, secs(1)), changes: []replyWant{applied("r1")}},
		},

		// 16. The identity that asked never answers its own Approval or
		// PlanReview question.
		{
			name: "the asker's reply to its Approval question is SELF_APPROVAL and the question stays open",
			in: given(aQuestion().approval("red", "green").askedBy(&hitlv1.UserInfo{Username: "alice", UID: "uid-alice"}),
				aReply("r1").created(secs(1)).selects("color", "red").byUser(&hitlv1.UserInfo{Username: "alice", UID: "uid-alice"})).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen,
				changes: []replyWant{refused("r1", hitlv1.CodeSelfApproval, "alice asked question "+askName, "spec.askedBy")}},
		},
		{
			name: "the asker's reply to its PlanReview question is SELF_APPROVAL",
			in: given(aQuestion().planReview("red").askedBy(&hitlv1.UserInfo{Username: "alice"}),
				aReply("r1").created(secs(1)).selects("color", "red")).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen,
				changes: []replyWant{refused("r1", hitlv1.CodeSelfApproval, "spec.answeredBy")}},
		},
		{
			name: "an intent on any question of the ask makes it one the asker may not answer",
			in: given(aQuestion().asks("size", "S", "M").planReview("S").askedBy(&hitlv1.UserInfo{Username: "alice"}),
				aReply("r1").created(secs(1)).selects("color", "red").selects("size", "S")).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen,
				changes: []replyWant{refused("r1", hitlv1.CodeSelfApproval, "spec.askedBy")}},
		},
		{
			name: "the asker's reply without a UID is still the asker's: SELF_APPROVAL",
			in: given(aQuestion().approval("red", "green").askedBy(&hitlv1.UserInfo{Username: "alice", UID: "uid-alice"}),
				aReply("r1").created(secs(1)).selects("color", "red")).at(secs(1)),
			want: decideWant{state: hitlv1.StateOpen,
				changes: []replyWant{refused("r1", hitlv1.CodeSelfApproval, "spec.askedBy")}},
		},
		{
			name: "the asker's late reply to a timed PlanReview question is SELF_APPROVAL, not queued",
			in: given(timed().planReview("red").askedBy(alice)).at(secs(3)).reconciled().
				plus(aReply("r1").created(secs(10)).selects("color", "red")).at(secs(10)),
			want: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				changes: []replyWant{refused("r1", hitlv1.CodeSelfApproval, "spec.askedBy")}},
		},
		{
			name: "the asker's reply to its settled Approval question is SELF_APPROVAL and changes nothing",
			in: settledByR1(aQuestion().approval("red", "green").askedBy(bob)).
				plus(aReply("r2").created(secs(5)).selects("color", "green").by("bob")).at(secs(5)),
			want: decideWant{state: hitlv1.StateSettled, answers: red, settlement: settled("r1", alice, false, secs(2)),
				changes: []replyWant{refused("r2", hitlv1.CodeSelfApproval, "spec.askedBy")}, unchanged: true},
		},
		{
			name: "another identity approves the Approval question after the asker was refused",
			in: given(aQuestion().approval("red", "green").askedBy(alice),
				aReply("r1").created(secs(1)).selects("color", "red"),
				aReply("r2").created(secs(2)).selects("color", "green").by("bob")).at(secs(2)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers: green, settlement: settled("r2", bob, false, secs(2)),
				changes: []replyWant{refused("r1", hitlv1.CodeSelfApproval), applied("r2")}},
		},
		{
			name: "a question without an Approval or PlanReview intent may be answered by its asker",
			in: given(aQuestion().askedBy(alice),
				aReply("r1").created(secs(1)).selects("color", "red")).at(secs(1)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers: red, settlement: settled("r1", alice, false, secs(1)), changes: []replyWant{applied("r1")}},
		},
		{
			name: "an Approval question whose asker is not recorded refuses nobody as its asker",
			in: given(aQuestion().approval("red", "green"),
				aReply("r1").created(secs(1)).selects("color", "red")).at(secs(1)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers: red, settlement: settled("r1", alice, false, secs(1)), changes: []replyWant{applied("r1")}},
		},
		{
			name: "a user of the asker's name with another UID is another user",
			in: given(aQuestion().approval("red", "green").askedBy(&hitlv1.UserInfo{Username: "alice", UID: "uid-alice"}),
				aReply("r1").created(secs(1)).selects("color", "red").byUser(&hitlv1.UserInfo{Username: "alice", UID: "uid-alice-2"})).at(secs(1)),
			want: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers: red, settlement: settled("r1", &hitlv1.UserInfo{Username: "alice", UID: "uid-alice-2"}, false, secs(1)),
				changes: []replyWant{applied("r1")}},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in.inputs()
			pristine := tc.in.inputs()
			got := Decide(in)

			if !equality.Semantic.DeepEqual(in.Question, pristine.Question) ||
				!equality.Semantic.DeepEqual(in.Replies, pristine.Replies) || !reflect.DeepEqual(in.Claims, pristine.Claims) {
				t.Errorf("Decide changed its inputs:\n got %s\nwant %s", dump(in), dump(pristine))
			}
			tc.want.check(t, in, got)
			if tc.want.unchanged && !equality.Semantic.DeepEqual(got.Status, in.Question.Status) {
				t.Errorf("status changed:\n got %s\nwant %s", dump(got.Status), dump(in.Question.Status))
			}
			checkSettlesOnce(t, in, got)
		})
	}
}

// checkSettlesOnce decides again on what the decision wrote: nothing may
// change, no reply may be given an outcome twice, no transition repeated.
func checkSettlesOnce(t *testing.T, in Inputs, d Decision) {
	t.Helper()
	if d.Expired {
		return
	}
	q, replies := written(in, d, true)
	again := Decide(Inputs{Question: q, Replies: replies, Claims: in.Claims, HeldUntil: in.HeldUntil, Now: in.Now})
	if len(again.Replies) != 0 {
		t.Errorf("deciding again on the written decision changes replies: %s", dump(again.Replies))
	}
	if again.Transition != "" {
		t.Errorf("deciding again on the written decision transitions to %s", again.Transition)
	}
	if !equality.Semantic.DeepEqual(again.Status, d.Status) {
		t.Errorf("deciding again on the written decision changes the status:\n got %s\nwant %s", dump(again.Status), dump(d.Status))
	}
}

func (w decideWant) check(t *testing.T, in Inputs, got Decision) {
	t.Helper()
	st := got.Status
	if st.State != w.state {
		t.Errorf("state = %q, want %q", st.State, w.state)
	}
	if got.Transition != w.transition {
		t.Errorf("transition = %q, want %q", got.Transition, w.transition)
	}
	var deadline, continuedAt time.Time
	if st.Deadline != nil {
		deadline = st.Deadline.Time
	}
	if st.ContinuedAt != nil {
		continuedAt = st.ContinuedAt.Time
	}
	if !deadline.Equal(w.deadline) {
		t.Errorf("deadline = %v, want %v", deadline, w.deadline)
	}
	if !continuedAt.Equal(w.continuedAt) {
		t.Errorf("continuedAt = %v, want %v", continuedAt, w.continuedAt)
	}
	if !equality.Semantic.DeepEqual(st.Claims, w.claims) {
		t.Errorf("claims = %s, want %s", dump(st.Claims), dump(w.claims))
	}
	wantCount := w.claimCount
	if wantCount == 0 {
		wantCount = int32(len(w.claims))
	}
	if st.ClaimCount != wantCount {
		t.Errorf("claimCount = %d, want %d", st.ClaimCount, wantCount)
	}
	if !equality.Semantic.DeepEqual(st.Answers, w.answers) {
		t.Errorf("answers = %s, want %s", dump(st.Answers), dump(w.answers))
	}
	if !equality.Semantic.DeepEqual(st.Settlement, w.settlement) {
		t.Errorf("settlement = %s, want %s", dump(st.Settlement), dump(w.settlement))
	}
	if !equality.Semantic.DeepEqual(st.QueuedReply, w.queued) {
		t.Errorf("queuedReply = %s, want %s", dump(st.QueuedReply), dump(w.queued))
	}
	if st.QuestionCount != int32(len(in.Question.Spec.Questions)) {
		t.Errorf("questionCount = %d, want %d", st.QuestionCount, len(in.Question.Spec.Questions))
	}
	if st.ObservedGeneration != in.Question.Generation {
		t.Errorf("observedGeneration = %d, want %d", st.ObservedGeneration, in.Question.Generation)
	}
	checkQuestionConditions(t, st, in.Question.Generation)

	if len(got.Replies) != len(w.changes) {
		t.Errorf("reply changes = %s, want %d of them", dump(got.Replies), len(w.changes))
	} else {
		for i, c := range got.Replies {
			w.changes[i].check(t, c)
		}
	}
	if got.RequeueAfter != w.requeue {
		t.Errorf("requeueAfter = %v, want %v", got.RequeueAfter, w.requeue)
	}
	if got.Expired != w.expired {
		t.Errorf("expired = %v, want %v", got.Expired, w.expired)
	}
}

func (w replyWant) check(t *testing.T, c ReplyChange) {
	t.Helper()
	if c.Name != w.name || c.Outcome != w.outcome || c.Reason != w.reason {
		t.Errorf("reply change = {%s %s %s}, want {%s %s %s}", c.Name, c.Outcome, c.Reason, w.name, w.outcome, w.reason)
	}
	if c.Alone != w.alone {
		t.Errorf("reply %s: alone = %v, want %v", c.Name, c.Alone, w.alone)
	}
	if w.outcome == hitlv1.OutcomeRejected && !strings.HasPrefix(c.Message, string(w.reason)+": ") {
		t.Errorf("reply %s: message %q does not start with %q", c.Name, c.Message, string(w.reason)+": ")
	}
	if c.Message == "" {
		t.Errorf("reply %s: no message", c.Name)
	}
	for _, s := range w.says {
		if !strings.Contains(c.Message, s) {
			t.Errorf("reply %s: message %q does not say %q", c.Name, c.Message, s)
		}
	}
}

// checkQuestionConditions checks the conditions the way kstatus reads them:
// waiting questions are in progress, settled ones current, cancelled ones
// failed.
func checkQuestionConditions(t *testing.T, st hitlv1.UserQuestionStatus, generation int64) {
	t.Helper()
	want := map[hitlv1.QuestionState]string{
		hitlv1.StateOpen:      "Ready=False/Open Reconciling=True/AwaitingAnswer",
		hitlv1.StateContinued: "Ready=False/Continued Reconciling=True/AwaitingAnswer",
		hitlv1.StateSettled:   "Ready=True/Settled",
		hitlv1.StateCancelled: "Ready=False/Cancelled Stalled=True/Cancelled",
	}[st.State]
	if st.State == hitlv1.StateContinued && st.QueuedReply != nil {
		want = "Ready=False/Continued Reconciling=True/AwaitingAdmission"
	}
	var got []string
	for _, c := range st.Conditions {
		got = append(got, c.Type+"="+string(c.Status)+"/"+c.Reason)
		if c.ObservedGeneration != generation {
			t.Errorf("condition %s: observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, generation)
		}
		if c.Message == "" {
			t.Errorf("condition %s has no message", c.Type)
		}
	}
	sort.Strings(got)
	if strings.Join(got, " ") != want {
		t.Errorf("conditions = %q, want %q", strings.Join(got, " "), want)
	}
}

// manyClaims is n live claims, claim-000 to claim-<n-1>, given in reverse
// order, all expiring at expires.
func manyClaims(n int, expires time.Time) []Claim {
	var cs []Claim
	for i := n - 1; i >= 0; i-- {
		name := fmt.Sprintf("claim-%03d", i)
		cs = append(cs, Claim{Name: name, Holder: "inbox/" + name, ExpiresAt: expires})
	}
	return cs
}

// manyHolders is what status.claims lists of the first n of manyClaims.
func manyHolders(n int) []hitlv1.ClaimHolder {
	var hs []hitlv1.ClaimHolder
	for i := range n {
		name := fmt.Sprintf("claim-%03d", i)
		hs = append(hs, hitlv1.ClaimHolder{Name: name, Holder: "inbox/" + name})
	}
	return hs
}

func dump(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
