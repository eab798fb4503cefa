package notify

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify/channel"
)

// Due is one notification that is due: an event of a question, for one
// channel.
type Due struct {
	// Key names the event within the question's life, the same however
	// often it is planned: asked, reminder-<percent>,
	// reminder-open-<n>, reminder-continued-<n>, vote-<reply UID>,
	// continued, settled, cancelled, escalated-<seconds>. With the
	// question's UID and the channel it is the deduplication key.
	Key     string
	Event   hitlv1.NotificationEvent
	Channel string
	// At is when it became due.
	At         time.Time
	Reminder   *channel.Reminder
	Escalation *channel.Escalation
	Quorum     *channel.Quorum
}

// order is the place of each event among those due at one instant.
var order = map[hitlv1.NotificationEvent]int{
	hitlv1.EventAsked: 0, hitlv1.EventQuorumProgress: 1, hitlv1.EventReminder: 2, hitlv1.EventEscalated: 3,
	hitlv1.EventContinued: 4, hitlv1.EventSettled: 5, hitlv1.EventCancelled: 6,
}

// Plan decides what to send about question q under the policies that
// select it, given what was sent (the question's record) at now: the
// notifications due and not yet sent, in the order they became due, and
// when the next one falls due (zero when none will unless q changes).
//
//   - Asked, while q is Open.
//   - Reminder at each of reminders.percents of a timed window while q is
//     Open and answerable; every reminders.every after the ask of a
//     blocking question while it is Open and answerable, and after the
//     window closed while it is Continued and answerable, up to
//     reminders.max in each phase.
//   - QuorumProgress, for each vote counted on a governed question
//     (status.approval set) while q is answerable, if the vote was
//     counted after the policy was created. The vote that decides q
//     settles it or queues its reply, so it is told by Settled, not here.
//   - Continued, while q is Continued (once q is settled or cancelled, that
//     it was continued is no news).
//   - Settled and Cancelled, once q finished, if it finished after the
//     policy was created: a new policy does not announce old endings.
//   - Escalated, each tier's after the ask while q is unanswered (Open or
//     Continued, not being cancelled, no late reply queued), to the tier's
//     channels and, when on has Escalated, the policy's.
//
// A (key, channel) pair is planned once whatever the number of policies
// that ask for it.
func Plan(q *hitlv1.UserQuestion, policies []*hitlv1.NotificationPolicy, sent Record, now time.Time) (due []Due, next time.Time) {
	seen := map[[2]string]bool{}
	add := func(d Due, channels []string) {
		if d.At.After(now) {
			if next.IsZero() || d.At.Before(next) {
				next = d.At
			}
			return
		}
		for _, ch := range channels {
			k := [2]string{d.Key, ch}
			if seen[k] || sent.Has(ch, d.Key) {
				continue
			}
			seen[k] = true
			d.Channel = ch
			due = append(due, d)
		}
	}
	state, start := q.State(), q.WindowStart()
	unanswered := q.Answerable()
	finished, hasFinished := q.FinishedAt()
	for _, p := range policies {
		to := func(e hitlv1.NotificationEvent) []string {
			if p.Spec.Sends(e) {
				return p.Spec.Channels
			}
			return nil
		}
		if state == hitlv1.StateOpen {
			add(Due{Key: "asked", Event: hitlv1.EventAsked, At: start}, to(hitlv1.EventAsked))
		}
		if r := p.Spec.Reminders; r != nil && unanswered {
			reminders(q, r, func(d Due) { add(d, to(hitlv1.EventReminder)) })
		}
		if unanswered && q.Status.Approval != nil {
			for i, v := range q.Status.Votes {
				if v.At.Time.Before(p.CreationTimestamp.Time) {
					continue
				}
				add(Due{Key: voteKey(v), Event: hitlv1.EventQuorumProgress, At: v.At.Time, Quorum: channel.QuorumAfter(q, i+1)},
					to(hitlv1.EventQuorumProgress))
			}
		}
		if state == hitlv1.StateContinued && q.Status.ContinuedAt != nil {
			add(Due{Key: "continued", Event: hitlv1.EventContinued, At: q.Status.ContinuedAt.Time}, to(hitlv1.EventContinued))
		}
		if hasFinished && !finished.Before(p.CreationTimestamp.Time) {
			e := hitlv1.EventSettled
			if state == hitlv1.StateCancelled {
				e = hitlv1.EventCancelled
			}
			add(Due{Key: strings.ToLower(string(state)), Event: e, At: finished}, to(e))
		}
		if unanswered {
			for _, t := range p.Spec.Escalation {
				chs := t.Channels
				if p.Spec.Sends(hitlv1.EventEscalated) {
					chs = append(slices.Clone(p.Spec.Channels), chs...)
				}
				add(Due{Key: "escalated-" + strconv.FormatInt(int64(t.After.Seconds()), 10), Event: hitlv1.EventEscalated,
					At: start.Add(t.After.Duration), Escalation: &channel.Escalation{After: t.After.Duration.String()}}, chs)
			}
		}
	}
	slices.SortStableFunc(due, func(a, b Due) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return order[a.Event] - order[b.Event]
	})
	return due, next
}

// voteKey is the key of the QuorumProgress of vote v: by its reply's UID,
// which no other vote of any question shares, so that a vote that is
// withdrawn (a queued deciding reply deleted) and replaced is not taken
// for the one that replaced it. A vote without a reply UID is keyed by
// its reply's name, unique within the question.
func voteKey(v hitlv1.Vote) string {
	if v.ReplyUID != "" {
		return "vote-" + string(v.ReplyUID)
	}
	return "vote-reply-" + v.Reply
}

// reminders calls add with each reminder of r for q, due or not: the
// percents of an Open timed question's window; every, in the phase q is
// in (Open without a window, or Continued).
func reminders(q *hitlv1.UserQuestion, r *hitlv1.Reminders, add func(Due)) {
	start := q.WindowStart()
	switch q.State() {
	case hitlv1.StateOpen:
		if q.Spec.Timeout != nil {
			for _, pct := range r.Percents {
				at := start.Add(time.Duration(int64(q.Spec.Timeout.Duration) * int64(pct) / 100))
				add(Due{Key: fmt.Sprintf("reminder-%d", pct), Event: hitlv1.EventReminder, At: at, Reminder: &channel.Reminder{Percent: pct}})
			}
			return
		}
		repeated(r, "open", start, add)
	case hitlv1.StateContinued:
		if c := q.Status.ContinuedAt; c != nil {
			repeated(r, "continued", c.Time, add)
		}
	}
}

func repeated(r *hitlv1.Reminders, phase string, from time.Time, add func(Due)) {
	if r.Every == nil || r.Every.Duration <= 0 {
		return
	}
	for n := 1; n <= r.MaxOr(); n++ {
		add(Due{Key: fmt.Sprintf("reminder-%s-%d", phase, n), Event: hitlv1.EventReminder,
			At: from.Add(time.Duration(n) * r.Every.Duration), Reminder: &channel.Reminder{Count: n}})
	}
}
