package userquestion

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// Inputs is everything the next status of a question depends on.
type Inputs struct {
	// Question is the question as last read.
	Question *hitlv1.UserQuestion
	// Replies are the replies naming the question, in creation order.
	Replies []hitlv1.QuestionReply
	// Claims are the question's claims, with the liveness the controller
	// observed.
	Claims []Claim
	// HeldUntil is the latest time a claim, now gone or expired, was known
	// to hold the window open.
	HeldUntil time.Time
	// Now is the current time.
	Now time.Time
	// Refused are the new replies that may not touch the question, by name:
	// their author may not answer its agent (FORBIDDEN), or they name
	// another agent (AGENT_MISMATCH). Reconcile asks the API server's
	// authorizer; Decide rejects them before anything else.
	Refused map[string]Refusal
	// Sources are where the new replies that a GitOps engine applied came
	// from, by name (see package provenance).
	Sources map[string]*hitlv1.ReplySource
	// Policies are the ApprovalPolicies that govern the question, read on
	// its first look only (status.state empty): the rule they make is
	// fixed into status.approval then, and no later change of a policy
	// reaches a question already asked.
	Policies []hitlv1.ApprovalPolicy
}

// Refusal is why a reply may not touch its question: its code and message.
type Refusal struct {
	Code    hitlv1.ErrorCode
	Message string
}

// Claim is a QuestionClaim as the controller judges it.
type Claim struct {
	// Name is the claim's name and Holder its stamped holder's username.
	Name, Holder string
	// ExpiresAt is when the controller last observed a renewal, plus the
	// lease duration.
	ExpiresAt time.Time
}

// ReplyChange is a new outcome for a reply.
type ReplyChange struct {
	Name    string
	Outcome hitlv1.ReplyOutcome
	Reason  hitlv1.ErrorCode
	Message string
	// Alone is true when the outcome follows from the reply and the
	// question's spec alone (a refusal: FORBIDDEN, AGENT_MISMATCH,
	// SELF_APPROVAL, a reply for another question), or from a vote that
	// the status read already records (Counted, which no later status
	// undoes): it is written without the status write that fences a
	// decision made on a stale read, so a refused reply costs one write.
	Alone bool
	// Source is where the reply came from, written with its first outcome
	// (status.source); nil for a reply no GitOps engine applied.
	Source *hitlv1.ReplySource
}

// Decision is what Reconcile writes.
type Decision struct {
	// Status is the question's next status.
	Status hitlv1.UserQuestionStatus
	// Transition is the state the question moved to, or "" when it stayed.
	Transition hitlv1.QuestionState
	// Replies are the replies whose outcome changes.
	Replies []ReplyChange
	// RequeueAfter is when the question needs another look (a deadline, a
	// claim's expiry, the TTL); zero when nothing is scheduled.
	RequeueAfter time.Duration
	// Expired is true when the question's TTL after finishing has passed.
	Expired bool
}

// Decide computes a question's next status and its replies' outcomes. It is
// a pure function of its inputs: Reconcile gathers them and applies the
// decision with one write guarded by the question's resourceVersion, so a
// decision made on stale inputs is refused rather than applied.
func Decide(in Inputs) Decision {
	q := in.Question
	d := decider{in: in, st: *q.Status.DeepCopy()}
	d.prepare()

	if !d.st.State.Terminal() {
		switch {
		case q.Spec.Cancelled:
			d.cancel()
		case d.st.State == hitlv1.StateContinued && d.admissible():
			qr := d.st.QueuedReply
			d.settle(*qr, true)
		case d.st.State == hitlv1.StateContinued && d.st.QueuedReply != nil && d.withdrawn(d.st.QueuedReply):
			d.unvote(d.st.QueuedReply.Name, d.st.QueuedReply.UID)
			d.st.QueuedReply = nil
		}
	}
	for i := range in.Replies {
		d.reply(&in.Replies[i])
	}
	if d.st.State == hitlv1.StateOpen && d.windowClosed() {
		d.continueAt(in.Now)
	}
	if d.st.State.Terminal() {
		// Claims on a finished question hold nothing, and nobody would
		// look again to drop them when they expire.
		d.live = nil
		d.listClaims()
	}
	d.schedule()

	out := Decision{Status: d.st, Replies: d.changes, RequeueAfter: d.requeue, Expired: d.expired}
	prev := q.Status.State
	if prev == "" {
		prev = hitlv1.StateOpen
	}
	if d.st.State != prev {
		out.Transition = d.st.State
	}
	setQuestionConditions(&out.Status, q.Generation, in.Now)
	return out
}

type decider struct {
	in      Inputs
	st      hitlv1.UserQuestionStatus
	live    []Claim
	changes []ReplyChange
	requeue time.Duration
	expired bool
}

// prepare fills what every status carries: the state of a new question, its
// deadline (computed once), its question count, and its live claims.
func (d *decider) prepare() {
	q := d.in.Question
	if d.st.State == "" && d.st.Approval == nil {
		if d.st.Approval = effectiveApproval(q.Spec.Approval, d.in.Policies); d.st.Approval != nil {
			d.st.Tally = d.st.Approval.Tally(nil)
		}
	}
	if d.st.SpecDigest == "" {
		// The cache takes it from the whole spec before dropping the
		// text (see trimForCache); a question read otherwise has it all.
		d.st.SpecDigest = hitlv1.SpecDigest(&q.Spec)
	}
	d.st.State = d.st.State.OrOpen()
	d.st.QuestionCount = int32(len(q.Spec.Questions))
	d.st.ObservedGeneration = q.Generation
	if deadline, timed := q.Deadline(); timed && d.st.Deadline == nil {
		d.st.Deadline = ptr.To(metav1.NewMicroTime(deadline))
	}
	for _, c := range d.in.Claims {
		if c.ExpiresAt.After(d.in.Now) {
			d.live = append(d.live, c)
		}
	}
	sort.Slice(d.live, func(i, j int) bool { return d.live[i].Name < d.live[j].Name })
	d.listClaims()
}

// listClaims writes the live claims into the status: the first MaxClaims
// by name, and how many there are. Listing them all would make every
// status write fail the schema once there are more.
func (d *decider) listClaims() {
	d.st.Claims = nil
	d.st.ClaimCount = int32(len(d.live))
	for _, c := range d.live[:min(len(d.live), hitlv1.MaxClaims)] {
		d.st.Claims = append(d.st.Claims, hitlv1.ClaimHolder{Name: c.Name, Holder: c.Holder})
	}
}

func (d *decider) timed() bool { return d.st.Deadline != nil }

// windowClosed reports whether a timed question's foreground window is over:
// its deadline has passed and no live claim holds it.
func (d *decider) windowClosed() bool {
	return d.timed() && !d.in.Now.Before(d.st.Deadline.Time) && len(d.live) == 0
}

// inWindow reports whether a reply created at t arrived inside the window:
// before the deadline, or while a claim held the window. Creation times are
// whole seconds, so a reply in the deadline's second counts as in time.
func (d *decider) inWindow(t time.Time) bool {
	if !d.timed() || len(d.live) > 0 {
		return true
	}
	return t.Before(d.st.Deadline.Time) || t.Before(d.in.HeldUntil)
}

func (d *decider) admissible() bool {
	admitted := d.in.Question.Spec.AdmittedReply
	return admitted != "" && d.st.QueuedReply != nil && d.st.QueuedReply.Name == admitted
}

// withdrawn reports whether the queued reply is gone or being deleted; one
// re-created under its name is another reply.
func (d *decider) withdrawn(qr *hitlv1.QueuedReply) bool {
	for i := range d.in.Replies {
		if r := &d.in.Replies[i]; qr.Is(r) {
			return r.DeletionTimestamp != nil
		}
	}
	return true
}

func (d *decider) cancel() {
	d.st.State = hitlv1.StateCancelled
	if qr := d.st.QueuedReply; qr != nil {
		// A queued vote decided nothing: it goes with the queue, and the
		// reply is NOT_ANSWERABLE, as on an ungoverned question.
		d.unvote(qr.Name, qr.UID)
	}
	d.st.QueuedReply = nil
}

func (d *decider) continueAt(t time.Time) {
	d.st.State = hitlv1.StateContinued
	d.st.ContinuedAt = ptr.To(metav1.NewMicroTime(t))
}

// entry is what the question records of reply r, sent by by: its batch,
// its author and where it came from, for the queue or the settlement.
func (d *decider) entry(r *hitlv1.QuestionReply, by *hitlv1.UserInfo) hitlv1.QueuedReply {
	return hitlv1.QueuedReply{Name: r.Name, UID: r.UID, Answers: r.Spec.Answers, AnsweredBy: by,
		QueuedAt: metav1.NewMicroTime(d.in.Now), Source: d.source(r)}
}

// source is where new reply r came from, as Reconcile read it (nil for a
// reply no GitOps engine applied).
func (d *decider) source(r *hitlv1.QuestionReply) *hitlv1.ReplySource {
	if r.Status.Source != nil {
		return r.Status.Source
	}
	return d.in.Sources[r.Name]
}

func (d *decider) settle(e hitlv1.QueuedReply, late bool) {
	d.st.State = hitlv1.StateSettled
	d.st.Answers = e.Answers
	d.st.QueuedReply = nil
	d.st.Settlement = &hitlv1.Settlement{Reply: e.Name, ReplyUID: e.UID, AnsweredBy: e.AnsweredBy, Late: late,
		At: metav1.NewMicroTime(d.in.Now), Source: e.Source}
	if d.st.Approval != nil {
		d.st.Settlement.Votes = slices.Clone(d.st.Votes)
	}
}

// reply gives one reply its outcome, applying it to the question when it is
// new. Outcomes the status already implies (the settling or queued reply)
// are restored, so a crash between the question's write and the reply's
// changes nothing.
func (d *decider) reply(r *hitlv1.QuestionReply) {
	q := d.in.Question
	if s := d.st.Settlement; s != nil && s.Is(r) {
		if s.Late {
			d.outcome(r, hitlv1.OutcomeAdmitted, "", fmt.Sprintf("admitted by the agent; settled question %s late", q.Name))
		} else {
			d.outcome(r, hitlv1.OutcomeApplied, "", fmt.Sprintf("settled question %s inside its window", q.Name))
		}
		return
	}
	if qr := d.st.QueuedReply; qr != nil && qr.Is(r) {
		d.outcome(r, hitlv1.OutcomeQueued, "", fmt.Sprintf("queued on question %s until the agent admits it", q.Name))
		return
	}
	if counted(d.st.Votes, r) {
		// A vote the status read already records is never uncounted (only
		// a queued vote is, and that one is Queued): its outcome needs no
		// fence.
		d.change(r, ReplyChange{Outcome: hitlv1.OutcomeCounted, Message: countedMessage(q), Alone: true})
		return
	}
	switch r.Status.Outcome {
	case hitlv1.OutcomeQueued:
		// Queued once, no longer: the question was cancelled while it waited.
		if d.st.State.Terminal() {
			d.close(r, fmt.Sprintf("question %s was %s while the reply was queued (spec.questionRef.name)", q.Name, d.st.State), false)
		}
		return
	case "":
	default:
		return
	}
	if r.DeletionTimestamp != nil {
		return
	}
	if why, refused := d.in.Refused[r.Name]; refused {
		d.rejectAlone(r, why.Code, why.Message)
		return
	}
	if code, why := foreign(q, r); code == hitlv1.CodeNotAnswerable {
		// Made for a question that is gone: a reply file that outlived it.
		d.close(r, why, true)
		return
	} else if code != "" {
		d.rejectAlone(r, code, why)
		return
	}
	if digest := r.Spec.QuestionRef.SpecDigest; digest != "" && digest != d.st.SpecDigest {
		d.rejectAlone(r, hitlv1.CodeQuestionChanged, fmt.Sprintf("reply %s was prepared for a question whose digest is %s (spec.questionRef.specDigest), not question %s's %s",
			r.Name, digest, q.Name, d.st.SpecDigest))
		return
	}

	if d.st.State == hitlv1.StateOpen && !d.inWindow(r.CreationTimestamp.Time) {
		// The window closed before this reply arrived: the question was
		// Continued at that moment, whether or not it was written yet.
		d.continueAt(d.in.Now)
	}
	if code, why := hitlv1.Unanswerable(q.Name, &q.Spec, &d.st); code == hitlv1.CodeNotAnswerable {
		// A question read finished stays finished: no later status can
		// make the reply anything but Closed, so it needs no fence. One
		// this decision finishes does.
		d.close(r, why+" (spec.questionRef.name)", q.Status.State.Terminal())
		return
	} else if code != "" {
		d.reject(r, code, why+" (spec.questionRef.name)")
		return
	}
	if d.st.Approval != nil {
		d.vote(r)
		return
	}
	switch d.st.State {
	case hitlv1.StateContinued:
		if err := validation.ValidateAnswers(q.Spec.Questions, r.Spec.Answers); err != nil {
			d.reject(r, hitlv1.CodeBadAnswer, err.Error())
			return
		}
		d.st.QueuedReply = ptr.To(d.entry(r, r.Spec.AnsweredBy))
		d.outcome(r, hitlv1.OutcomeQueued, "", fmt.Sprintf("queued on question %s until the agent admits it", q.Name))
	case hitlv1.StateOpen:
		if err := validation.ValidateAnswers(q.Spec.Questions, r.Spec.Answers); err != nil {
			d.reject(r, hitlv1.CodeBadAnswer, err.Error())
			return
		}
		d.settle(d.entry(r, r.Spec.AnsweredBy), false)
		d.outcome(r, hitlv1.OutcomeApplied, "", fmt.Sprintf("settled question %s inside its window", q.Name))
	}
}

// foreign reports why a new reply may not answer q whatever q's state: it
// was made for another question of the same name (it names another UID,
// it was created before q, or another question owns it), or it comes from
// the identity that asked an Approval or PlanReview question.
func foreign(q *hitlv1.UserQuestion, r *hitlv1.QuestionReply) (hitlv1.ErrorCode, string) {
	if uid := r.Spec.QuestionRef.UID; uid != "" && uid != q.UID {
		return hitlv1.CodeNotAnswerable, fmt.Sprintf("reply %s answers question %s with UID %s (spec.questionRef.uid), not the live question's %s",
			r.Name, q.Name, uid, q.UID)
	}
	if r.CreationTimestamp.Before(&q.CreationTimestamp) {
		return hitlv1.CodeNotAnswerable, fmt.Sprintf("reply %s was created at %s, before question %s (spec.questionRef.name) was asked at %s",
			r.Name, r.CreationTimestamp.UTC().Format(time.RFC3339), q.Name, q.CreationTimestamp.UTC().Format(time.RFC3339))
	}
	for _, o := range r.OwnerReferences {
		if o.Kind == "UserQuestion" && o.APIVersion == hitlv1.GroupVersion.String() && o.UID != q.UID {
			return hitlv1.CodeNotAnswerable, fmt.Sprintf("reply %s belongs to an earlier question %s (UID %s, metadata.ownerReferences)", r.Name, o.Name, o.UID)
		}
	}
	if q.NeedsOtherApprover() && hitlv1.SameUser(r.Spec.AnsweredBy, q.Spec.AskedBy) {
		return hitlv1.CodeSelfApproval, fmt.Sprintf("%s asked question %s (spec.askedBy) and may not answer its own %s (spec.answeredBy)",
			q.Spec.AskedBy.Username, q.Name, "Approval or PlanReview question")
	}
	return "", ""
}

func (d *decider) reject(r *hitlv1.QuestionReply, code hitlv1.ErrorCode, message string) {
	d.change(r, ReplyChange{Outcome: hitlv1.OutcomeRejected, Reason: code, Message: coded(code, message)})
}

// rejectAlone rejects a reply for what it is, not for the question's
// state: its outcome needs no fence (see ReplyChange.Alone).
func (d *decider) rejectAlone(r *hitlv1.QuestionReply, code hitlv1.ErrorCode, message string) {
	d.change(r, ReplyChange{Outcome: hitlv1.OutcomeRejected, Reason: code, Message: coded(code, message), Alone: true})
}

// close gives a reply whose question is finished or gone its final
// outcome: Closed, NOT_ANSWERABLE. It settles nothing, and is healthy, so
// that a reply file outliving its question in a GitOps repository leaves
// the engine green. alone: see ReplyChange.Alone.
func (d *decider) close(r *hitlv1.QuestionReply, message string, alone bool) {
	code := hitlv1.CodeNotAnswerable
	d.change(r, ReplyChange{Outcome: hitlv1.OutcomeClosed, Reason: code, Message: coded(code, message), Alone: alone})
}

func coded(code hitlv1.ErrorCode, message string) string {
	if !strings.HasPrefix(message, string(code)+": ") {
		message = string(code) + ": " + message
	}
	return message
}

func (d *decider) outcome(r *hitlv1.QuestionReply, outcome hitlv1.ReplyOutcome, reason hitlv1.ErrorCode, message string) {
	d.change(r, ReplyChange{Outcome: outcome, Reason: reason, Message: message})
}

// change records c as reply r's new outcome, unless r is being deleted or
// already has it.
func (d *decider) change(r *hitlv1.QuestionReply, c ReplyChange) {
	if r.DeletionTimestamp != nil {
		return
	}
	c.Name, c.Message = r.Name, hitlv1.TruncateMessage(c.Message)
	if r.Status.Outcome == c.Outcome && r.Status.Reason == c.Reason && r.Status.Message == c.Message {
		return
	}
	if r.Status.Source == nil {
		c.Source = d.in.Sources[r.Name]
	}
	d.changes = append(d.changes, c)
}

// expiryRecheck is how soon a question whose TTL has already passed is
// looked at again once its settlement is written; the status write's own
// watch event usually brings it back sooner.
const expiryRecheck = time.Second

// schedule sets when the question needs another look: at its deadline, when
// its first live claim expires, or when its TTL after finishing ends.
func (d *decider) schedule() {
	now := d.in.Now
	var next time.Time
	earliest := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	switch {
	case d.st.State.Terminal():
		if ttl := d.in.Question.Spec.TTLSecondsAfterFinished; ttl != nil {
			// A cancellation whose Stalled condition is not set yet
			// finishes now.
			finished, ok := d.st.FinishedAt()
			if !ok {
				finished = now
			}
			expiry := finished.Add(time.Duration(*ttl) * time.Second)
			if now.Before(expiry) {
				earliest(expiry)
				break
			}
			// The settlement (the status and every reply's outcome) is
			// written, and read back, before anything is deleted: a
			// question that finishes in this decision, or whose replies
			// still need their outcome, expires on the next look.
			if d.in.Question.Status.State.Terminal() && len(d.changes) == 0 {
				d.expired = true
			} else {
				d.requeue = expiryRecheck
			}
		}
	default:
		// Claims are looked at again when they expire, to keep
		// status.claims true and to close a held window.
		for _, c := range d.live {
			earliest(c.ExpiresAt)
		}
		if d.st.State == hitlv1.StateOpen && d.timed() {
			earliest(d.st.Deadline.Time)
		}
	}
	if !next.IsZero() && d.requeue == 0 {
		d.requeue = next.Sub(now)
	}
}
