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
//
// The model also knows who is who in the namespace (the tenancy guide): the
// one identity that asks, those who may answer, and who made each reply
// and claim. It predicts which requests the API server's ownership and
// identity policies refuse (NOT_OWNER, FORBIDDEN): a refused request
// changes nothing.
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
	// ErrInvalid: the CRD's validation rules refuse the update. They are
	// checked before the admission policies.
	ErrInvalid = errors.New("invalid")
	// ErrNotOwner: an ownership policy refuses the request (NOT_OWNER): it
	// does not come from the question's asker, the reply's author or the
	// claim's holder.
	ErrNotOwner = errors.New("NOT_OWNER")
	// ErrForbidden: an identity policy refuses the request (FORBIDDEN): its
	// author may not answer the agent.
	ErrForbidden = errors.New("FORBIDDEN")
)

// Tenancy says who is who in the namespace.
type Tenancy struct {
	// Agent is the identity that asks every question (spec.askedBy): the
	// agent's ServiceAccount, which may also withdraw any reply to it.
	Agent string
	// Answerers may answer the agent (RBAC verb answer), the agent itself
	// among them when it holds the grant.
	Answerers []string
	// Groups are the groups each identity is in, as the API server
	// authenticates it (and admission stamps them on its replies).
	Groups map[string][]string
}

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
	// AskedBy is the identity that asked (spec.askedBy). NeedsOtherApprover
	// is true when the ask holds an Approval or PlanReview intent, which
	// that identity may never answer.
	AskedBy            string
	NeedsOtherApprover bool

	State hitlv1.QuestionState
	// ContinuedSlot is when the window closed unanswered (when Continued).
	Continued     bool
	ContinuedSlot int
	// Queued names the late reply waiting for admission, queued at
	// QueuedSlot; QueuedGen is which reply of that name it is.
	Queued     string
	QueuedSlot int
	QueuedGen  int
	// Settlement is set once the question is Settled.
	Settlement *Settlement
	// FinishedSlot is when the question became Settled or Cancelled.
	FinishedSlot int

	// Cancelled and Admitted are the agent-written spec fields.
	Cancelled bool
	Admitted  string

	// Deleted is true once the question's TTL after finishing has passed.
	Deleted bool

	// Rule is the approval rule fixed on the controller's first look (nil:
	// ungoverned, the first valid reply settles); Candidates, while not
	// empty, are the rules it may have been given (see Model.candidates).
	Rule       *Rule
	Candidates []Candidate
	// Votes are the votes counted (status.votes), in order.
	Votes []Vote
}

// Settlement is how a question was settled.
type Settlement struct {
	// Reply settled the question at Slot; Gen is which reply of that name
	// it was. Late is true when it was a queued late reply that the agent
	// admitted.
	Reply string
	Gen   int
	Late  bool
	Slot  int
	// Votes are the votes that decided a governed question.
	Votes []Vote
}

// Reply is the model's view of one QuestionReply.
type Reply struct {
	Name, Question string
	// By is its author (spec.answeredBy).
	By string
	// Gen counts the replies made under this name: a reply re-created
	// under a deleted reply's name is a new reply (followed by UID).
	Gen int
	// Valid is whether the batch follows the batch rules for its question.
	Valid bool
	// Approves is the batch's choice as a vote: it picks the approving
	// option of every Approval and PlanReview question.
	Approves bool
	Outcome  hitlv1.ReplyOutcome
	Reason   hitlv1.ErrorCode
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
	// Replies holds the latest reply made under each name.
	Replies map[string]*Reply
	Claims  map[string]*Claim

	agent     string
	answerers map[string]bool
	groups    map[string][]string

	// policies are the ApprovalPolicies that exist; states every set of
	// them there has been, in order (states[0] is none), and synced the
	// oldest the controller's cache may still hold.
	policies map[string]Policy
	states   [][]Policy
	synced   int

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

// New returns an empty model of a namespace set up as t says, whose fake
// clock starts at t0.
func New(t0 time.Time, t Tenancy) *Model {
	m := &Model{T0: t0, Questions: map[string]*Question{}, Replies: map[string]*Reply{}, Claims: map[string]*Claim{},
		agent: t.Agent, answerers: map[string]bool{}, groups: t.Groups, policies: map[string]Policy{}, states: [][]Policy{nil},
		Seen: map[string]int{}, held: map[string]bool{}, shown: map[string]shownOutcome{}}
	for _, a := range t.Answerers {
		m.answerers[a] = true
	}
	return m
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
	// NeedsOtherApprover is true when the ask holds an Approval or
	// PlanReview intent.
	NeedsOtherApprover bool
	// Agent is spec.agent (the tenancy's agent when empty), Intents the
	// intents of its questions, Labels its labels, and Own its
	// spec.approval: what decides which policies govern it, and its rule.
	Agent   string
	Intents []hitlv1.IntentType
	Labels  map[string]string
	Own     *RuleSpec
}

// Ask records a new question, asked by the tenancy's agent. A timed
// question whose window has already closed, with no live claim, is
// Continued at once.
func (m *Model) Ask(a Ask) *Question {
	q := &Question{Name: a.Name, TTL: a.TTL, State: hitlv1.StateOpen, AskedBy: m.agent, NeedsOtherApprover: a.NeedsOtherApprover}
	if a.Timeout != nil {
		q.Timed = true
		q.Deadline = WindowStart(a.Created, a.AskedAt).Add(*a.Timeout)
		q.DeadlineSlot = m.SlotOf(q.Deadline)
	}
	agentName := a.Agent
	if agentName == "" {
		agentName = m.agent
	}
	if a.Own != nil {
		m.Seen["asks with their own spec.approval"]++
	}
	cands := m.candidates(agentName, a.Intents, a.Labels, a.Own)
	q.Rule = cands[0].Rule
	for _, c := range cands[1:] {
		if c.Rule.String() != q.Rule.String() {
			q.Rule, q.Candidates = nil, cands
			m.Seen["asks in a policy race window with several possible rules"]++
			break
		}
	}
	if !q.Pending() {
		m.noteGoverned(q)
	}
	m.Questions[a.Name] = q
	m.logf("ask %s: Open, rule %s", a.Name, q.Rule)
	m.settle()
	return q
}

// Sent is a reply as its author creates it.
type Sent struct {
	Name, Question string
	// By is the author, as admission stamps it.
	By string
	// Valid is whether the batch follows the batch rules for its question.
	Valid bool
	// Labelled is true when the reply names its agent (label
	// hitl.dev/agent), as kubectl hitl and the answerer SDK send it.
	Labelled bool
	// Approves is the batch's choice as a vote (see Reply.Approves).
	Approves bool
	// WrongDigest is true when spec.questionRef.specDigest is set and is
	// not the question's (QUESTION_CHANGED).
	WrongDigest bool
}

// Reply records a new reply to the named question, which may be missing,
// and gives it its outcome (SPEC §1, Replies). A reply that names its
// agent is refused at admission when its author may not answer it
// (ErrForbidden), and nothing is recorded. A reply under the name of a
// deleted one is a new reply, judged afresh.
//
// The controller judges a reply first for what it is, then for the
// question's state: a reply to a missing question is Closed, NOT_ANSWERABLE
// (nothing to check it against); one whose author may not answer the agent
// is FORBIDDEN (SPEC §3); one from the question's asker to a question with
// an Approval or PlanReview intent is SELF_APPROVAL; only then come the
// state (a reply to a Settled or Cancelled question is Closed,
// NOT_ANSWERABLE), the queued reply and the batch rules.
func (m *Model) Reply(s Sent) (*Reply, error) {
	if s.Labelled && !m.answerers[s.By] {
		return nil, ErrForbidden
	}
	r := &Reply{Name: s.Name, Question: s.Question, By: s.By, Gen: 1, Valid: s.Valid, Approves: s.Approves}
	if was := m.Replies[s.Name]; was != nil {
		r.Gen = was.Gen + 1
		m.Seen["replies re-created under a deleted reply's name"]++
		switch was.Outcome {
		case hitlv1.OutcomeApplied, hitlv1.OutcomeAdmitted:
			m.Seen["replies re-created under the name of one that settled its question"]++
		case hitlv1.OutcomeQueued:
			m.Seen["replies re-created under the name of a withdrawn queued reply"]++
		}
	}
	m.Replies[s.Name] = r
	q := m.question(s.Question)
	switch {
	case q == nil:
		m.close(r, "missing question")
	case !m.answerers[s.By]:
		m.reject(r, hitlv1.CodeForbidden, "the author may not answer the agent")
	case s.By == q.AskedBy && q.NeedsOtherApprover:
		m.reject(r, hitlv1.CodeSelfApproval, "the asker answers its own "+string(q.State)+" question")
	case s.WrongDigest:
		m.reject(r, hitlv1.CodeQuestionChanged, "the reply names another spec digest")
	case q.Pending():
		panic(fmt.Sprintf("reply %s to question %s, whose rule is not known yet", s.Name, s.Question))
	case q.State == hitlv1.StateSettled || q.State == hitlv1.StateCancelled:
		m.close(r, "question "+string(q.State))
	case q.State == hitlv1.StateContinued && q.Queued != "":
		m.reject(r, hitlv1.CodeReplyQueued, "already queued: "+q.Queued)
	case !s.Valid:
		m.reject(r, hitlv1.CodeBadAnswer, "bad batch")
	case q.Rule != nil:
		m.vote(q, r, s.Approves)
	case q.State == hitlv1.StateContinued:
		q.Queued, q.QueuedSlot, q.QueuedGen = s.Name, m.Slots, r.Gen
		r.Outcome = hitlv1.OutcomeQueued
		m.Seen["queued"]++
		m.logf("reply %s: Queued on %s", s.Name, s.Question)
	default: // Open
		m.settleWith(q, s.Name, false)
		r.Outcome = hitlv1.OutcomeApplied
		m.Seen["settled in window"]++
		if m.held[s.Question] {
			m.Seen["settled in a held window past the deadline"]++
		}
		m.logf("reply %s: Applied, %s Settled in window", s.Name, s.Question)
	}
	m.settle()
	return r, nil
}

// Admit sets spec.admittedReply on a question, as by. The API server
// refuses a name other than the queued reply's, and any change once it is
// set (the CRD's rules, checked first); then anyone but the asker
// (NOT_OWNER).
func (m *Model) Admit(question, reply, by string) error {
	q := m.question(question)
	if q == nil {
		return ErrNotFound
	}
	if q.Admitted != "" && q.Admitted != reply || q.Admitted == "" && q.Queued != reply {
		return ErrInvalid
	}
	if by != q.AskedBy {
		return ErrNotOwner
	}
	if q.Admitted != "" {
		return nil // unchanged: accepted, nothing happens
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

// Cancel sets spec.cancelled on a question, as by; anyone but the asker is
// refused (NOT_OWNER). An Open or Continued question is Cancelled, and a
// queued reply is then Closed with NOT_ANSWERABLE; a Settled or
// Cancelled question does not change.
func (m *Model) Cancel(question, by string) error {
	q := m.question(question)
	if q == nil {
		return ErrNotFound
	}
	if by != q.AskedBy {
		return ErrNotOwner
	}
	q.Cancelled = true
	if q.State == hitlv1.StateOpen || q.State == hitlv1.StateContinued {
		q.State, q.FinishedSlot = hitlv1.StateCancelled, m.Slots
		m.Seen["cancelled"]++
		if q.Queued != "" {
			m.Seen["cancelled with a queued reply"]++
			m.noteShown(m.Replies[q.Queued])
			m.close(m.Replies[q.Queued], "cancelled while queued")
			if q.Rule != nil {
				q.unvote(q.Queued, q.QueuedGen)
				m.Seen["cancelled with a queued deciding vote"]++
			}
			q.Queued = ""
		}
		m.logf("cancel %s: Cancelled", question)
	}
	m.settle()
	return nil
}

// Relabel changes a question's metadata (a label), as by: anyone but the
// asker is refused (NOT_OWNER). The model keeps no metadata: an accepted
// change changes nothing it predicts.
func (m *Model) Relabel(question, by string) error {
	q := m.question(question)
	if q == nil {
		return ErrNotFound
	}
	if by != q.AskedBy {
		return ErrNotOwner
	}
	return nil
}

// DeleteReply deletes a reply, as by: only its author, or the identity
// that may ask as the agent it names, may (NOT_OWNER). Deleting the queued
// reply withdraws it: the question stays Continued and answerable.
// Deleting any other changes nothing.
func (m *Model) DeleteReply(name, by string) error {
	r := m.Replies[name]
	if r == nil || r.Deleted {
		return ErrNotFound
	}
	if by != r.By && by != m.agent {
		return ErrNotOwner
	}
	r.Deleted = true
	if was, ok := m.shown[name]; ok && m.down {
		// Its new outcome was never written: it goes as it was.
		r.Outcome, r.Reason = was.outcome, was.reason
		m.Seen["deleted before its new outcome was written"]++
	}
	if q := m.question(r.Question); q != nil && q.Queued == name {
		if q.Rule != nil {
			q.unvote(q.Queued, q.QueuedGen)
			m.Seen["withdrawn queued deciding votes"]++
		}
		q.Queued = ""
		m.Seen["withdrawn"]++
		m.logf("withdraw %s from %s", name, q.Name)
	}
	m.settle()
	return nil
}

// Claim records a new QuestionClaim on a question, which may be missing,
// held by holder (the user admission stamps). Only those who may answer
// the agent claim (FORBIDDEN), whatever the question.
func (m *Model) Claim(name, question, holder string) error {
	if !m.answerers[holder] {
		return ErrForbidden
	}
	m.Claims[name] = &Claim{Name: name, Question: question, Holder: holder, Live: true}
	m.settle()
	return nil
}

// Renew records a renewal of a claim, as by: only its holder renews it
// (NOT_OWNER).
func (m *Model) Renew(name, by string) error {
	c := m.Claims[name]
	if c == nil {
		return ErrNotFound
	}
	if by != c.Holder {
		return ErrNotOwner
	}
	c.Live = true
	m.settle()
	return nil
}

// Unclaim records the deletion of a claim, as by: only its holder releases
// it (NOT_OWNER). When it was the last live claim of a question whose
// window has closed, the question becomes Continued.
func (m *Model) Unclaim(name, by string) error {
	c := m.Claims[name]
	if c == nil {
		return ErrNotFound
	}
	if by != c.Holder {
		return ErrNotOwner
	}
	delete(m.Claims, name)
	m.settle()
	return nil
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
	m.synced = len(m.states) - 1 // the new manager's cache lists the policies afresh
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
	q.Settlement = &Settlement{Reply: reply, Gen: m.Replies[reply].Gen, Late: late, Slot: m.Slots}
	if q.Rule != nil {
		q.Settlement.Votes = append([]Vote(nil), q.Votes...)
	}
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

// close gives a reply whose question is finished (Settled or Cancelled,
// or cancelled while the reply was queued) or gone (missing, or deleted
// after its TTL) its final, healthy outcome: Closed, NOT_ANSWERABLE. Only
// a vote past MaxVotes is still Rejected with NOT_ANSWERABLE.
func (m *Model) close(r *Reply, why string) {
	r.Outcome, r.Reason = hitlv1.OutcomeClosed, hitlv1.CodeNotAnswerable
	m.Seen["closed NOT_ANSWERABLE ("+why+")"]++
	m.logf("reply %s: Closed NOT_ANSWERABLE (%s)", r.Name, why)
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
