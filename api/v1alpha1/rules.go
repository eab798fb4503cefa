package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The small rules of the specification that several components apply. Each
// lives here, next to the types, once; the controller, the SDKs, the CLI and
// the MCP server call these instead of restating them.

// OrOpen is the state a reader should act on: a question the controller has
// not looked at yet (empty state) is Open.
func (s QuestionState) OrOpen() QuestionState {
	if s == "" {
		return StateOpen
	}
	return s
}

// State is the question's state, Open before the controller has recorded
// one (see QuestionState.OrOpen).
func (q *UserQuestion) State() QuestionState { return q.Status.State.OrOpen() }

// Active reports whether the question is still waiting for an answer: Open
// or Continued.
func (q *UserQuestion) Active() bool { return !q.State().Terminal() }

// LeftOpen reports whether the asking call can return: the question was
// settled, continued or cancelled.
func (q *UserQuestion) LeftOpen() bool { return q.State() != StateOpen }

// Unanswerable says why a question in status st, asked with spec, may not
// take a new reply, as an error code and a reason that names the question:
// NOT_ANSWERABLE once it is Settled or Cancelled or while it is being
// cancelled, REPLY_QUEUED while a late reply waits for the agent. The code
// is empty when a reply may come. The reply webhook, the admission policy's
// feedback, the controller (on the status it is deciding), the CLI and the
// web inbox all ask this.
func Unanswerable(name string, spec *UserQuestionSpec, st *UserQuestionStatus) (ErrorCode, string) {
	switch {
	case st.State.Terminal():
		return CodeNotAnswerable, fmt.Sprintf("question %s is %s", name, st.State)
	case spec.Cancelled:
		return CodeNotAnswerable, fmt.Sprintf("question %s is being cancelled", name)
	case st.QueuedReply != nil:
		return CodeReplyQueued, fmt.Sprintf("question %s already has queued reply %s", name, st.QueuedReply.Name)
	}
	return "", ""
}

// Answerable reports whether the question may take a new reply now: Open
// or Continued, not being cancelled, no late reply queued (Unanswerable).
func (q *UserQuestion) Answerable() bool {
	code, _ := Unanswerable(q.Name, &q.Spec, &q.Status)
	return code == ""
}

// AskedBefore is ask order: creationTimestamp, then namespace, then name.
// Creation timestamps have a resolution of one second, so the names decide
// between the asks of one second.
func AskedBefore(a, b *UserQuestion) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// SettledAt is when the question was settled (status.settlement.at), zero
// when it has not been.
func (q *UserQuestion) SettledAt() time.Time {
	if s := q.Status.Settlement; s != nil {
		return s.At.Time
	}
	return time.Time{}
}

// SettledBefore is settlement order: status.settlement.at (a question
// without a settlement first), then namespace, then name.
func SettledBefore(a, b *UserQuestion) bool {
	if at, bt := a.SettledAt(), b.SettledAt(); !at.Equal(bt) {
		return at.Before(bt)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// SortAskOrder sorts questions in ask order (AskedBefore).
func SortAskOrder(items []UserQuestion) {
	slices.SortFunc(items, func(a, b UserQuestion) int { return compare(AskedBefore(&a, &b), AskedBefore(&b, &a)) })
}

// SortSettlementOrder sorts questions in settlement order (SettledBefore).
func SortSettlementOrder(items []UserQuestion) {
	slices.SortFunc(items, func(a, b UserQuestion) int { return compare(SettledBefore(&a, &b), SettledBefore(&b, &a)) })
}

// RepliedBefore is the order in which the controller applies the replies to
// one question: creationTimestamp, then name.
func RepliedBefore(a, b *QuestionReply) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// SortReplyOrder sorts replies in the order the controller applies them
// (RepliedBefore).
func SortReplyOrder(items []QuestionReply) {
	slices.SortFunc(items, func(a, b QuestionReply) int { return compare(RepliedBefore(&a, &b), RepliedBefore(&b, &a)) })
}

func compare(less, greater bool) int {
	switch {
	case less:
		return -1
	case greater:
		return 1
	}
	return 0
}

// The range of a claim's spec.durationSeconds. A claim outside it
// is judged as if clamped into it.
const (
	MinClaimLeaseSeconds = 5
	MaxClaimLeaseSeconds = 300
)

// ClaimLeaseSeconds clamps a lease duration in seconds into
// [MinClaimLeaseSeconds, MaxClaimLeaseSeconds].
func ClaimLeaseSeconds(s int64) int32 {
	return int32(max(MinClaimLeaseSeconds, min(MaxClaimLeaseSeconds, s)))
}

// ClaimDuration is how long a claim holds the window after each renewal:
// its spec.durationSeconds (the shortest allowed when it has none),
// clamped into the allowed range.
func ClaimDuration(c *QuestionClaim) time.Duration {
	s := int64(c.Spec.DurationSeconds)
	if s == 0 {
		s = MinClaimLeaseSeconds
	}
	return time.Duration(ClaimLeaseSeconds(s)) * time.Second
}

// Holds reports whether claim c may hold question q's window: it names q
// (by UID, when it carries one) and q's agent, and has a stamped holder.
// Admission checked that its holder may answer the agent it names.
func (c *QuestionClaim) Holds(q *UserQuestion) bool {
	return c.Namespace == q.Namespace && c.Spec.QuestionRef.Name == q.Name &&
		(c.Spec.QuestionRef.UID == "" || c.Spec.QuestionRef.UID == q.UID) &&
		c.Spec.Agent == q.Spec.Agent && c.Spec.Holder != nil && c.Spec.Holder.Username != ""
}

// MaxMessageLength is the longest message hitl writes where a person reads
// it: a reply's status.message (the CRD's MaxLength says the same, a test
// compares them) and an Event's note (the API server's own limit).
const MaxMessageLength = 1024

// TruncateMessage cuts s to MaxMessageLength bytes without splitting a
// UTF-8 character.
func TruncateMessage(s string) string {
	if len(s) <= MaxMessageLength {
		return s
	}
	s = s[:MaxMessageLength]
	// Drop a character the cut split, so the result stays valid UTF-8.
	return strings.ToValidUTF8(s, "")
}

// Views splits questions into the two views of an agent's projection: the
// active ones (Open, Continued) in ask order and the settled ones in
// settlement order. Cancelled questions are in neither. items is not
// changed.
func Views(items []UserQuestion) (active, settled []UserQuestion) {
	for i := range items {
		switch items[i].State() {
		case StateSettled:
			settled = append(settled, items[i])
		case StateCancelled:
		default:
			active = append(active, items[i])
		}
	}
	SortAskOrder(active)
	SortSettlementOrder(settled)
	return active, settled
}

// Is reports whether the settlement names reply: by name, and by UID when
// it recorded one (a reply re-created under the same name is another).
func (s *Settlement) Is(reply *QuestionReply) bool {
	return s.Reply == reply.Name && (s.ReplyUID == "" || s.ReplyUID == reply.UID)
}

// Is reports whether the queued reply is reply, as Settlement.Is does.
func (q *QueuedReply) Is(reply *QuestionReply) bool {
	return q.Name == reply.Name && (q.UID == "" || q.UID == reply.UID)
}

// SameUser reports whether two stamped identities are the same user: the
// same username, and the same UID when both carry one.
func SameUser(a, b *UserInfo) bool {
	return a != nil && b != nil && a.Username != "" && a.Username == b.Username &&
		(a.UID == "" || b.UID == "" || a.UID == b.UID)
}

// NeedsOtherApprover reports whether the question holds an Approval or
// PlanReview intent, which the identity that asked may never answer.
func (q *UserQuestion) NeedsOtherApprover() bool {
	for i := range q.Spec.Questions {
		if in := q.Spec.Questions[i].Intent; in != nil && (in.Type == IntentApproval || in.Type == IntentPlanReview) {
			return true
		}
	}
	return false
}

// SpecDigest is "sha256:" and the hex SHA-256 of what a question asks: the
// JSON of its agent, its questions and its approval rule. The question's
// status.specDigest holds it; a reply that carries another digest in
// spec.questionRef.specDigest was prepared for another question.
func SpecDigest(spec *UserQuestionSpec) string {
	asked := struct {
		Agent     string        `json:"agent"`
		Questions []Question    `json:"questions"`
		Approval  *ApprovalRule `json:"approval,omitempty"`
	}{spec.Agent, spec.Questions, spec.Approval}
	b, err := json.Marshal(asked)
	if err != nil {
		// Only channels, functions and cyclic values fail, and the spec has none.
		panic(err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// FinishedAt is when a terminal question finished: its settlement time, or
// when its Stalled condition became True (its cancellation). ok is false
// for an active question, and for a cancelled one whose condition is not
// written yet.
func (q *UserQuestion) FinishedAt() (at time.Time, ok bool) { return q.Status.FinishedAt() }

// FinishedAt is UserQuestion.FinishedAt of a question in this status: the
// controller asks it of the status it is deciding, before it is written.
// Ready is no help here: it was False before a cancellation too.
func (st *UserQuestionStatus) FinishedAt() (at time.Time, ok bool) {
	if !st.State.Terminal() {
		return time.Time{}, false
	}
	if s := st.Settlement; s != nil {
		return s.At.Time, true
	}
	for _, c := range st.Conditions {
		if c.Type == ConditionStalled && c.Status == "True" {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}
