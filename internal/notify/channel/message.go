// Package channel renders hitl's notifications and sends them: a signed
// JSON webhook, a Slack Block Kit message, a Microsoft Teams Adaptive Card
// and an email. Every sender takes the same Message, built from a question
// by NewMessage, which decides what a notification may carry: the
// question, never a secret, the answers only when the question is
// settled, and the votes (who, and Approve or Reject) only as quorum
// progress. Delivery (Retry) retries what a sender reports as transient,
// with backoff, a bounded number of times.
package channel

import (
	"fmt"
	"strings"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// SchemaVersion names the version of Message's JSON schema; a change that
// is not backward compatible gets a new one.
const SchemaVersion = "hitl.dev/notification/v1"

// EventTest is the event of the test message `kubectl hitl notify test`
// sends; no policy sends it.
const EventTest hitlv1.NotificationEvent = "Test"

// Message is one notification. The webhook channel POSTs it as JSON; its
// field names and meanings are a stable, documented schema
// (docs/notifications.md). The other channels render it.
type Message struct {
	// Version is SchemaVersion.
	Version string `json:"version"`
	// ID is the notification's deduplication key: the same on every
	// attempt and every resend of one event of one question to one
	// channel, so a receiver that has seen it may drop it.
	ID string `json:"id"`
	// Event is what happened: Asked, Reminder, QuorumProgress, Continued,
	// Settled, Cancelled, Escalated (or Test).
	Event hitlv1.NotificationEvent `json:"event"`
	// Time is when the event happened (for a reminder or an escalation,
	// when it was due).
	Time time.Time `json:"time"`
	// Reminder says which reminder a Reminder event is.
	Reminder *Reminder `json:"reminder,omitempty"`
	// Escalation says which tier an Escalated event is.
	Escalation *Escalation `json:"escalation,omitempty"`
	// Quorum is, on a QuorumProgress event only, the vote it announces
	// and the tally after it.
	Quorum *Quorum `json:"quorum,omitempty"`
	// Question is the question the event is about.
	Question Question `json:"question"`
	// Link opens the question's card in the web inbox:
	// <inbox URL>/q/<namespace>/<name>. Empty when no inbox URL is set.
	Link string `json:"link,omitempty"`
	// Settlement is, on a Settled event only, who answered and what.
	Settlement *Settlement `json:"settlement,omitempty"`
}

// Reminder identifies a reminder.
type Reminder struct {
	// Percent is the point of the window, in percent of the timeout, of a
	// reminder of a timed question; 0 for the others.
	Percent int32 `json:"percent,omitempty"`
	// Count is the number of a repeated reminder (reminders.every) in its
	// phase, from 1; 0 for a reminder at a percent.
	Count int `json:"count,omitempty"`
}

// Escalation identifies an escalation tier.
type Escalation struct {
	// After is the tier's delay, as a Go duration ("30m0s").
	After string `json:"after"`
}

// Quorum is where a governed question's votes stand after one vote:
// what QuorumProgress tells. It names the voters and their choices, never
// what they answered.
type Quorum struct {
	// Tally is status.tally as it was after the vote: "<approving
	// identities>/<approvals required>", with " (<n> no)" when some
	// rejected.
	Tally string `json:"tally"`
	// Approvals and Rejections count the approving and rejecting votes so
	// far; Required is how many approvals the rule needs.
	Approvals  int   `json:"approvals"`
	Rejections int   `json:"rejections"`
	Required   int32 `json:"required"`
	// Vote is the vote announced, the last of Votes.
	Vote Vote `json:"vote"`
	// Votes are the votes counted so far, in the order they were counted.
	Votes []Vote `json:"votes"`
}

// Vote is one vote of a governed question.
type Vote struct {
	// By is the voter's username.
	By string `json:"by"`
	// Choice is Approve or Reject.
	Choice hitlv1.VoteChoice `json:"choice"`
	// Sets are the rule's approver sets the voter counted toward.
	Sets []string `json:"sets,omitempty"`
	// At is when the vote was counted.
	At time.Time `json:"at"`
}

// QuorumAfter is what a QuorumProgress notification tells of the first n
// votes of q (status.votes[:n]): the tally they make under q's rule, the
// n-th vote and those before it. It is the one place a notification takes
// votes from; nil when q is not governed or has fewer than n votes.
func QuorumAfter(q *hitlv1.UserQuestion, n int) *Quorum {
	rule := q.Status.Approval
	if rule == nil || n < 1 || n > len(q.Status.Votes) {
		return nil
	}
	votes := q.Status.Votes[:n]
	c := rule.Count(votes)
	out := &Quorum{Tally: rule.Tally(votes), Approvals: c.Approvals, Rejections: c.Rejections, Required: rule.Approvals}
	for _, v := range votes {
		out.Votes = append(out.Votes, Vote{By: v.By.Username, Choice: v.Choice, Sets: v.Sets, At: v.At.UTC()})
	}
	out.Vote = out.Votes[n-1]
	return out
}

// Summary is the tally for people: "approvals 1/2", "approvals 0/2 (1
// no)".
func (q *Quorum) Summary() string { return "approvals " + q.Tally }

// Question is what a notification tells of a question.
type Question struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Agent     string `json:"agent"`
	// CallID is the id UIs key the question's card by.
	CallID string `json:"callID"`
	// State is the question's state when the notification was made.
	State hitlv1.QuestionState `json:"state"`
	// AskedAt is when the window was measured from.
	AskedAt time.Time `json:"askedAt"`
	// Deadline ends the window of a timed question; absent for a blocking
	// one.
	Deadline *time.Time `json:"deadline,omitempty"`
	// Items are the questions of the ask, without their detail text (the
	// link shows it).
	Items []Item `json:"questions"`
}

// Item is one question of an ask.
type Item struct {
	ID          string   `json:"id"`
	Header      string   `json:"header,omitempty"`
	Question    string   `json:"question"`
	Options     []string `json:"options,omitempty"`
	MultiSelect bool     `json:"multiSelect,omitempty"`
	// Intent is PlanReview, Approval or empty.
	Intent hitlv1.IntentType `json:"intent,omitempty"`
}

// Settlement is who answered a settled question and what.
type Settlement struct {
	AnsweredBy string `json:"answeredBy,omitempty"`
	// Late is true when the answer came after the window closed.
	Late    bool     `json:"late,omitempty"`
	Answers []Answer `json:"answers,omitempty"`
}

// Answer is the answer to one question of the ask.
type Answer struct {
	ID       string   `json:"id"`
	Selected []string `json:"selected,omitempty"`
	Custom   string   `json:"custom,omitempty"`
	// Sensitive is true for the answer to a sensitive question: it was
	// given, and nothing of it, not even its sealed text, is sent.
	Sensitive bool `json:"sensitive,omitempty"`
}

// Link is the deep link to a question's card in the web inbox at
// inboxURL: <inboxURL>/q/<namespace>/<name> (hitlv1.InboxQuestionPath,
// the path the inbox serves); "" without an inbox URL.
func Link(inboxURL, namespace, name string) string {
	if inboxURL == "" {
		return ""
	}
	return strings.TrimSuffix(inboxURL, "/") + hitlv1.InboxQuestionPath(namespace, name)
}

// NewMessage makes the notification of event about q, with the
// deduplication key id, the event's time at and the deep link into the
// inbox at inboxURL. What a notification carries is decided here: the
// answers enter only a Settled event (settlementOf); who voted what enters
// only a QuorumProgress event, through the Quorum its caller sets
// (QuorumAfter); no other field of q that a person wrote after the ask (a
// queued reply) enters any.
func NewMessage(q *hitlv1.UserQuestion, event hitlv1.NotificationEvent, id string, at time.Time, inboxURL string) *Message {
	m := &Message{
		Version: SchemaVersion,
		ID:      id,
		Event:   event,
		Time:    at.UTC(),
		Link:    Link(inboxURL, q.Namespace, q.Name),
		Question: Question{
			Namespace: q.Namespace, Name: q.Name, UID: string(q.UID), Agent: q.Spec.Agent, CallID: q.CallID(),
			State: q.State(), AskedAt: q.WindowStart().UTC(),
		},
	}
	if d, ok := q.Deadline(); ok {
		d = d.UTC()
		m.Question.Deadline = &d
	}
	for _, qq := range q.Spec.Questions {
		it := Item{ID: qq.ID, Header: qq.Header, Question: qq.Question, MultiSelect: qq.MultiSelect}
		for _, o := range qq.Options {
			it.Options = append(it.Options, o.Label)
		}
		if qq.Intent != nil {
			it.Intent = qq.Intent.Type
		}
		m.Question.Items = append(m.Question.Items, it)
	}
	if event == hitlv1.EventSettled {
		m.Settlement = settlementOf(q)
	}
	return m
}

// settlementOf is what a Settled notification tells of the answer: who
// answered, whether late, and the settled batch. It is the one place a
// notification takes answers from.
func settlementOf(q *hitlv1.UserQuestion) *Settlement {
	s := q.Status.Settlement
	if s == nil {
		return nil
	}
	out := &Settlement{Late: s.Late}
	if s.AnsweredBy != nil {
		out.AnsweredBy = s.AnsweredBy.Username
	}
	for _, a := range q.Status.Answers {
		if a.Sealed != "" {
			out.Answers = append(out.Answers, Answer{ID: a.ID, Sensitive: true})
			continue
		}
		out.Answers = append(out.Answers, Answer{ID: a.ID, Selected: a.Selected, Custom: a.Custom})
	}
	return out
}

// Title is a one-line summary of the notification, for a chat message's
// heading and an email's subject.
func (m *Message) Title() string {
	agent := m.Question.Agent
	switch m.Event {
	case hitlv1.EventAsked:
		if n := len(m.Question.Items); n > 1 {
			return fmt.Sprintf("%s asks %d questions", agent, n)
		}
		return agent + " asks a question"
	case hitlv1.EventReminder:
		return "Reminder: " + agent + " is waiting for an answer"
	case hitlv1.EventQuorumProgress:
		if qu := m.Quorum; qu != nil {
			return fmt.Sprintf("%s voted %s on %s's question: %s", qu.Vote.By, qu.Vote.Choice, agent, qu.Summary())
		}
		return "A vote was counted on " + agent + "'s question"
	case hitlv1.EventContinued:
		return agent + " went on without an answer; the question stays open"
	case hitlv1.EventSettled:
		if m.Settlement != nil && m.Settlement.AnsweredBy != "" {
			return agent + "'s question was answered by " + m.Settlement.AnsweredBy
		}
		return agent + "'s question was answered"
	case hitlv1.EventCancelled:
		return agent + " cancelled its question"
	case hitlv1.EventEscalated:
		if m.Escalation != nil {
			return "Escalated: " + agent + "'s question is unanswered after " + m.Escalation.After
		}
		return "Escalated: " + agent + "'s question is unanswered"
	case EventTest:
		return "Test notification from hitl"
	}
	return agent + ": " + string(m.Event)
}

// When says when the question is due, for people: "Deadline 15:04:05 UTC
// (in 2m30s)", "No deadline: the agent waits", or, past the window, that
// the question stays answerable.
func (m *Message) When(now time.Time) string {
	d := m.Question.Deadline
	switch {
	case m.Question.State.Terminal():
		return ""
	case d == nil || m.Question.State == hitlv1.StateContinued:
		if m.Question.State == hitlv1.StateContinued {
			return "The window has closed; the question stays answerable"
		}
		return "No deadline: the agent waits for the answer"
	case d.After(now):
		return fmt.Sprintf("Deadline %s (in %s)", d.Format("2006-01-02 15:04:05 MST"), d.Sub(now).Round(time.Second))
	}
	return fmt.Sprintf("Deadline %s (passed)", d.Format("2006-01-02 15:04:05 MST"))
}

// answerText is an answer for people: the selected labels and the free
// text.
func answerText(a Answer) string {
	if a.Sensitive {
		return "(sensitive answer given)"
	}
	parts := append([]string(nil), a.Selected...)
	if a.Custom != "" {
		parts = append(parts, fmt.Sprintf("%q", a.Custom))
	}
	if len(parts) == 0 {
		return "(skipped)"
	}
	return strings.Join(parts, ", ")
}

// voteText is a vote for people: "alice: Approve".
func voteText(v Vote) string { return v.By + ": " + string(v.Choice) }

// truncate shortens s to at most n runes, with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
