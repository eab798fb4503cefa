// Package model is an executable reference model of the life of a question
// (SPEC §1) and of its time rules (SPEC §6): what every UserQuestion,
// QuestionReply and claim should look like after any sequence of
// operations. It is written straight from the specification, independently
// of the controller (it shares only the API's names), so that the
// randomized test beside it can drive the real controller and this model
// with the same operations and compare them after every step.
//
// Time in the model is counted in slots. The test gives the controller a
// fake clock that starts at T0 and only ever moves by whole slots, while
// creation timestamps are real; a run lasts minutes, far less than a slot,
// so every comparison of a real time with a fake one falls the same way
// however long each operation took:
//
//   - a timed question's window closes at the first slot at or after its
//     deadline (creationTimestamp or spec.askedAt, plus spec.timeout);
//   - a claim (at most 300 s long) is live from its creation or last
//     renewal, or from a manager restart, until the next clock step;
//   - a TTL of n seconds after finishing ends ceil(n / 30 min) slots after
//     the slot the question finished in.
package model

import (
	"errors"
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Slot is the model's unit of time: the fake clock moves by whole slots.
const Slot = 30 * time.Minute

// Refusals the API server must give, as the model predicts them.
var (
	// ErrNotFound: the question does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the CRD's validation rules refuse the update.
	ErrInvalid = errors.New("invalid")
)

// Question is the model's view of one UserQuestion.
type Question struct {
	Name string
	// Timed is true when the ask has spec.timeout; Deadline is then the end
	// of its window, and DeadlineSlot the first slot at or after it.
	Timed        bool
	Deadline     time.Time
	DeadlineSlot int
	// TTL is spec.ttlSecondsAfterFinished, nil when absent.
	TTL *int32

	State hitlv1.QuestionState
	// ContinuedSlot is when the window closed unanswered (when Continued).
	Continued     bool
	ContinuedSlot int
	// Queued names the late reply waiting for admission, queued at QueuedSlot.
	Queued     string
	QueuedSlot int
	// Settlement is set once the question is Settled.
	Settlement *Settlement
	// FinishedSlot is when the question became Settled or Cancelled.
	FinishedSlot int

	// Cancelled and Admitted are the agent-written spec fields.
	Cancelled bool
	Admitted  string

	// Deleted is true once the question's TTL after finishing has passed.
	Deleted bool
}

// Settlement is how a question was settled.
type Settlement struct {
	// Reply settled the question at Slot; Late is true when it was a queued
	// late reply that the agent admitted.
	Reply string
	Late  bool
	Slot  int
}

// Reply is the model's view of one QuestionReply.
type Reply struct {
	Name, Question string
	// Valid is whether the batch follows the batch rules for its question.
	Valid   bool
	Outcome hitlv1.ReplyOutcome
	Reason  hitlv1.ErrorCode
	// Deleted is true once the reply is gone: withdrawn or deleted by the
	// test, or deleted with its question.
	Deleted bool
}

// Claim is the model's view of one QuestionClaim.
type Claim struct {
	Name, Question, Holder string
	// Live is true from the claim's creation or last renewal, or from a
	// manager restart, until the next clock step.
	Live bool
}

// Model is the state of a namespace of questions, replies and claims.
type Model struct {
	// T0 is the fake clock's start; slot n is T0 + n × Slot.
	T0 time.Time
	// Slots is how many slots the fake clock has moved.
	Slots int

	Questions map[string]*Question
	Replies   map[string]*Reply
	Claims    map[string]*Claim

	// down is true while the manager is stopped: nothing is decided until
	// it starts again, when it sees everything that happened meanwhile.
	down bool
	// Log records every transition, for reports.
	Log []string
	// Seen counts what the model went through, to show what a run covered.
	Seen map[string]int
	// held are the questions a claim held open past their deadline.
	held map[string]bool
	// shown are the outcomes that replies' objects show while the manager
	// is down, for the replies whose outcome the model changed meanwhile:
	// the manager writes the new one when it starts, unless the reply is
	// deleted first, when the object goes with the outcome it showed.
	shown map[string]shownOutcome
}

type shownOutcome struct {
	outcome hitlv1.ReplyOutcome
	reason  hitlv1.ErrorCode
}

// New returns an empty model whose fake clock starts at t0.
func New(t0 time.Time) *Model {
	return &Model{T0: t0, Questions: map[string]*Question{}, Replies: map[string]*Reply{}, Claims: map[string]*Claim{},
		Seen: map[string]int{}, held: map[string]bool{}, shown: map[string]shownOutcome{}}
}

// At is the fake time of a slot.
func (m *Model) At(slot int) time.Time { return m.T0.Add(time.Duration(slot) * Slot) }

// Now is the fake clock's time.
func (m *Model) Now() time.Time { return m.At(m.Slots) }

// SlotOf is the first slot at or after t, for t after T0.
func (m *Model) SlotOf(t time.Time) int {
	return int((t.Sub(m.T0) + Slot - 1) / Slot)
}

// Down reports whether the manager is stopped.
func (m *Model) Down() bool { return m.down }

// WindowStart is where a timed question's window starts (SPEC §6), by the
// API's own rule (UserQuestion.WindowStart): the precise asked-at time when
// it lies within [creationTimestamp, creationTimestamp + 1 s), and
// creationTimestamp otherwise.
func WindowStart(created time.Time, askedAt *time.Time) time.Time {
	q := &hitlv1.UserQuestion{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
	if askedAt != nil {
		q.Spec.AskedAt = ptr.To(metav1.NewMicroTime(*askedAt))
	}
	return q.WindowStart()
}

// Ask describes a created UserQuestion.
type Ask struct {
	Name string
	// Created is the object's creationTimestamp, AskedAt its spec.askedAt.
	Created time.Time
	AskedAt *time.Time
	// Timeout is spec.timeout, nil for a blocking question.
	Timeout *time.Duration
	TTL     *int32
}

// Ask records a new question. A timed question whose window has already
// closed, with no live claim, is Continued at once.
func (m *Model) Ask(a Ask) *Question {
	q := &Question{Name: a.Name, TTL: a.TTL, State: hitlv1.StateOpen}
	if a.Timeout != nil {
		q.Timed = true
		q.Deadline = WindowStart(a.Created, a.AskedAt).Add(*a.Timeout)
		q.DeadlineSlot = m.SlotOf(q.Deadline)
	}
	m.Questions[a.Name] = q
	m.logf("ask %s: Open", a.Name)
	m.settle()
	return q
}

// Reply records a new reply to the named question, which may be missing,
// and gives it its outcome (SPEC §1, Replies).
func (m *Model) Reply(name, question string, valid bool) *Reply {
	r := &Reply{Name: name, Question: question, Valid: valid}
	m.Replies[name] = r
	q := m.question(question)
	switch {
	case q == nil:
		m.reject(r, hitlv1.CodeNotAnswerable, "missing question")
	case q.State == hitlv1.StateSettled || q.State == hitlv1.StateCancelled:
		m.reject(r, hitlv1.CodeNotAnswerable, "question "+string(q.State))
	case q.State == hitlv1.StateContinued && q.Queued != "":
		m.reject(r, hitlv1.CodeReplyQueued, "already queued: "+q.Queued)
	case !valid:
		m.reject(r, hitlv1.CodeBadAnswer, "bad batch")
	case q.State == hitlv1.StateContinued:
		q.Queued, q.QueuedSlot = name, m.Slots
		r.Outcome = hitlv1.OutcomeQueued
		m.Seen["queued"]++
		m.logf("reply %s: Queued on %s", name, question)
	default: // Open
		m.settleWith(q, name, false)
		r.Outcome = hitlv1.OutcomeApplied
		m.Seen["settled in window"]++
		if m.held[question] {
			m.Seen["settled in a held window past the deadline"]++
		}
		m.logf("reply %s: Applied, %s Settled in window", name, question)
	}
	m.settle()
	return r
}

// OutsiderReply records a new reply from a user who may not answer the
// agent: a reply to a missing question is NOT_ANSWERABLE (nothing to check
// it against), any other is FORBIDDEN and changes nothing (SPEC §3).
func (m *Model) OutsiderReply(name, question string) *Reply {
	r := &Reply{Name: name, Question: question}
	m.Replies[name] = r
	if m.question(question) == nil {
		m.reject(r, hitlv1.CodeNotAnswerable, "missing question")
	} else {
		m.reject(r, hitlv1.CodeForbidden, "the author may not answer the agent")
	}
	m.settle()
	return r
}

// Admit sets spec.admittedReply on a question. The API server refuses a
// name other than the queued reply's, and any change once it is set.
func (m *Model) Admit(question, reply string) error {
	q := m.question(question)
	if q == nil {
		return ErrNotFound
	}
	if q.Admitted != "" {
		if q.Admitted == reply {
			return nil // unchanged: accepted, nothing happens
		}
		return ErrInvalid
	}
	if q.Queued == "" || q.Queued != reply {
		return ErrInvalid
	}
	q.Admitted = reply
	m.settleWith(q, reply, true)
	m.noteShown(m.Replies[reply])
	m.Replies[reply].Outcome = hitlv1.OutcomeAdmitted
	m.Seen["settled late"]++
	m.logf("admit %s: Admitted, %s Settled late", reply, question)
	m.settle()
	return nil
}

// Cancel sets spec.cancelled on a question. An Open or Continued question
// is Cancelled, and a queued reply is then Rejected with NOT_ANSWERABLE;
// a Settled or Cancelled question does not change.
func (m *Model) Cancel(question string) error {
	q := m.question(question)
	if q == nil {
		return ErrNotFound
	}
	q.Cancelled = true
	if q.State == hitlv1.StateOpen || q.State == hitlv1.StateContinued {
		q.State, q.FinishedSlot = hitlv1.StateCancelled, m.Slots
		m.Seen["cancelled"]++
		if q.Queued != "" {
			m.Seen["cancelled with a queued reply"]++
			m.noteShown(m.Replies[q.Queued])
			m.reject(m.Replies[q.Queued], hitlv1.CodeNotAnswerable, "cancelled while queued")
			q.Queued = ""
		}
		m.logf("cancel %s: Cancelled", question)
	}
	m.settle()
	return nil
}

// DeleteReply deletes a reply. Deleting the queued reply withdraws it: the
// question stays Continued and answerable. Deleting any other changes
// nothing.
func (m *Model) DeleteReply(name string) {
	r := m.Replies[name]
	if r == nil || r.Deleted {
		return
	}
	r.Deleted = true
	if was, ok := m.shown[name]; ok && m.down {
		// Its new outcome was never written: it goes as it was.
		r.Outcome, r.Reason = was.outcome, was.reason
		m.Seen["deleted before its new outcome was written"]++
	}
	if q := m.question(r.Question); q != nil && q.Queued == name {
		q.Queued = ""
		m.Seen["withdrawn"]++
		m.logf("withdraw %s from %s", name, q.Name)
	}
	m.settle()
}

// Claim records a new QuestionClaim on a question, which may be missing,
// held by holder (the user admission stamps).
func (m *Model) Claim(name, question, holder string) {
	m.Claims[name] = &Claim{Name: name, Question: question, Holder: holder, Live: true}
	m.settle()
}

// Renew records a renewal of a claim.
func (m *Model) Renew(name string) {
	if c := m.Claims[name]; c != nil {
		c.Live = true
	}
	m.settle()
}

// Unclaim records the deletion of a claim. When it was the last live claim
// of a question whose window has closed, the question becomes Continued.
func (m *Model) Unclaim(name string) {
	delete(m.Claims, name)
	m.settle()
}

// Step moves the fake clock by k slots. Every claim expires.
func (m *Model) Step(k int) {
	m.Slots += k
	for _, c := range m.Claims {
		c.Live = false
	}
	m.logf("step %d: slot %d", k, m.Slots)
	m.settle()
}

// Stop stops the manager: until Start, the model records what happens and
// decides nothing that depends on time.
func (m *Model) Stop() { m.down = true }

// Start starts the manager again: every existing claim counts as just
// renewed, and everything that came due meanwhile is decided now.
func (m *Model) Start() {
	m.down = false
	clear(m.shown)
	for _, c := range m.Claims {
		c.Live = true
	}
	m.logf("restart at slot %d", m.Slots)
	m.settle()
}

// Held reports whether a live claim holds the question's window.
func (m *Model) Held(question string) bool {
	for _, c := range m.Claims {
		if c.Question == question && c.Live {
			return true
		}
	}
	return false
}

// HasClaims reports whether any claim names the question, live or not.
func (m *Model) HasClaims(question string) bool {
	for _, c := range m.Claims {
		if c.Question == question {
			return true
		}
	}
	return false
}

// Overdue reports whether a question is Open, timed and past its deadline.
func (m *Model) Overdue(question string) bool {
	q := m.question(question)
	return q != nil && q.State == hitlv1.StateOpen && q.Timed && m.Slots >= q.DeadlineSlot
}

// ListedClaims are the claims status.claims should list: the live claims of
// a question that is not finished, by name.
func (m *Model) ListedClaims(question string) []hitlv1.ClaimHolder {
	q := m.question(question)
	if q == nil || q.State == hitlv1.StateSettled || q.State == hitlv1.StateCancelled {
		return nil
	}
	var out []hitlv1.ClaimHolder
	for _, c := range m.Claims {
		if c.Question == question && c.Live {
			out = append(out, hitlv1.ClaimHolder{Name: c.Name, Holder: c.Holder})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// QuestionNames are the names of every question ever asked, sorted.
func (m *Model) QuestionNames() []string { return sortedKeys(m.Questions) }

// ReplyNames are the names of every reply ever created, sorted.
func (m *Model) ReplyNames() []string { return sortedKeys(m.Replies) }

// ClaimNames are the names of the existing claims, sorted.
func (m *Model) ClaimNames() []string { return sortedKeys(m.Claims) }

// question returns the named question, or nil when it is missing or deleted.
func (m *Model) question(name string) *Question {
	if q := m.Questions[name]; q != nil && !q.Deleted {
		return q
	}
	return nil
}

func (m *Model) settleWith(q *Question, reply string, late bool) {
	q.State = hitlv1.StateSettled
	q.Settlement = &Settlement{Reply: reply, Late: late, Slot: m.Slots}
	q.FinishedSlot = m.Slots
	q.Queued = ""
}

// noteShown records, while the manager is down, the outcome a reply's
// object shows before the model gives it a new one.
func (m *Model) noteShown(r *Reply) {
	if _, ok := m.shown[r.Name]; m.down && !ok {
		m.shown[r.Name] = shownOutcome{r.Outcome, r.Reason}
	}
}

func (m *Model) reject(r *Reply, code hitlv1.ErrorCode, why string) {
	r.Outcome, r.Reason = hitlv1.OutcomeRejected, code
	m.Seen["rejected "+string(code)]++
	m.logf("reply %s: Rejected %s (%s)", r.Name, code, why)
}

// settle applies the rules that depend on time and claims, after every
// operation: a timed Open question whose deadline has passed with no live
// claim becomes Continued, and a finished question whose TTL has passed is
// deleted with its replies and claims. While the manager is down, nothing
// is decided.
func (m *Model) settle() {
	if m.down {
		return
	}
	for _, name := range m.QuestionNames() {
		q := m.Questions[name]
		if q.Deleted {
			continue
		}
		if q.State == hitlv1.StateOpen && q.Timed && m.Slots >= q.DeadlineSlot {
			if !m.Held(name) {
				q.State, q.Continued, q.ContinuedSlot = hitlv1.StateContinued, true, m.Slots
				m.Seen["continued"]++
				if m.held[name] {
					m.Seen["continued when the claims holding it ended"]++
				}
				m.logf("%s: Continued at slot %d (deadline slot %d)", name, m.Slots, q.DeadlineSlot)
			} else if !m.held[name] {
				m.held[name] = true
				m.Seen["held open past the deadline by a claim"]++
				m.logf("%s: held open past its deadline by a claim", name)
			}
		}
		finished := q.State == hitlv1.StateSettled || q.State == hitlv1.StateCancelled
		if finished && q.TTL != nil && m.Slots-q.FinishedSlot >= ttlSlots(*q.TTL) {
			q.Deleted = true
			for _, r := range m.Replies {
				if r.Question == name {
					r.Deleted = true
				}
			}
			for claim, c := range m.Claims {
				if c.Question == name {
					delete(m.Claims, claim)
				}
			}
			m.Seen["deleted after the TTL"]++
			m.logf("%s: deleted after its TTL", name)
		}
	}
}

func ttlSlots(seconds int32) int {
	return int((time.Duration(seconds)*time.Second + Slot - 1) / Slot)
}

func (m *Model) logf(format string, args ...any) {
	m.Log = append(m.Log, fmt.Sprintf(format, args...))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
