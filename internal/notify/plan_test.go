package notify

import (
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	. "github.com/hitl-dev/hitl/test/builders"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func timed(d time.Duration) *hitlv1.UserQuestion {
	q := Question("q", "ns").Agent("bot").Ask("a", "A?", "x", "y").Timeout(d).Obj()
	q.CreationTimestamp = metav1.NewTime(t0)
	q.Status.State = hitlv1.StateOpen
	return q
}

func blocking() *hitlv1.UserQuestion {
	q := timed(time.Minute)
	q.Spec.Timeout = nil
	return q
}

func continued(q *hitlv1.UserQuestion, when time.Time) *hitlv1.UserQuestion {
	q.Status.State = hitlv1.StateContinued
	q.Status.ContinuedAt = &metav1.MicroTime{Time: when}
	return q
}

func settledAt(q *hitlv1.UserQuestion, when time.Time) *hitlv1.UserQuestion {
	q.Status.State = hitlv1.StateSettled
	q.Status.Settlement = &hitlv1.Settlement{Reply: "r", At: metav1.NewMicroTime(when)}
	return q
}

// governed puts q under a rule of two approvals with votes.
func governed(q *hitlv1.UserQuestion, votes ...hitlv1.Vote) *hitlv1.UserQuestion {
	q.Status.Approval = &hitlv1.EffectiveApproval{Approvals: 2}
	q.Status.Votes = votes
	q.Status.Tally = q.Status.Approval.Tally(votes)
	return q
}

// vote is a vote by user, counted at when, with reply UID "u-<user>".
func vote(user string, c hitlv1.VoteChoice, when time.Time) hitlv1.Vote {
	return hitlv1.Vote{Reply: "r-" + user, ReplyUID: types.UID("u-" + user), By: hitlv1.UserInfo{Username: user},
		Choice: c, At: metav1.NewMicroTime(when)}
}

type policyOpt func(*hitlv1.NotificationPolicy)

func policy(opts ...policyOpt) *hitlv1.NotificationPolicy {
	p := &hitlv1.NotificationPolicy{Spec: hitlv1.NotificationPolicySpec{Channels: []string{"hook"}}}
	p.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	for _, o := range opts {
		o(p)
	}
	return p
}

func percents(p ...int32) policyOpt {
	return func(np *hitlv1.NotificationPolicy) {
		if np.Spec.Reminders == nil {
			np.Spec.Reminders = &hitlv1.Reminders{}
		}
		np.Spec.Reminders.Percents = p
	}
}

func every(d time.Duration, max int32) policyOpt {
	return func(np *hitlv1.NotificationPolicy) {
		if np.Spec.Reminders == nil {
			np.Spec.Reminders = &hitlv1.Reminders{}
		}
		np.Spec.Reminders.Every, np.Spec.Reminders.Max = &metav1.Duration{Duration: d}, max
	}
}

func on(e ...hitlv1.NotificationEvent) policyOpt {
	return func(np *hitlv1.NotificationPolicy) { np.Spec.On = e }
}

func escalate(after time.Duration, chs ...string) policyOpt {
	return func(np *hitlv1.NotificationPolicy) {
		np.Spec.Escalation = append(np.Spec.Escalation, hitlv1.EscalationTier{After: metav1.Duration{Duration: after}, Channels: chs})
	}
}

func created(t time.Time) policyOpt {
	return func(np *hitlv1.NotificationPolicy) { np.CreationTimestamp = metav1.NewTime(t) }
}

// keys is due as "key>channel" in order.
func keys(due []Due) string {
	var out []string
	for _, d := range due {
		out = append(out, d.Key+">"+d.Channel)
	}
	return strings.Join(out, " ")
}

func TestPlan(t *testing.T) {
	cases := []struct {
		name     string
		q        *hitlv1.UserQuestion
		policies []*hitlv1.NotificationPolicy
		sent     Record
		now      time.Time
		want     string
		next     time.Time
	}{
		{name: "asked at once, the first reminder next",
			q: timed(10 * time.Second), policies: []*hitlv1.NotificationPolicy{policy(percents(50, 90))}, now: at(time.Second),
			want: "asked>hook", next: at(5 * time.Second)},
		{name: "asked sent: the reminder at 50%",
			q: timed(10 * time.Second), policies: []*hitlv1.NotificationPolicy{policy(percents(50, 90))}, sent: Record{"hook": {"asked"}},
			now: at(6 * time.Second), want: "reminder-50>hook", next: at(9 * time.Second)},
		{name: "a restart past both reminders sends both, in order",
			q: timed(10 * time.Second), policies: []*hitlv1.NotificationPolicy{policy(percents(90, 50))}, sent: Record{"hook": {"asked"}},
			now: at(9500 * time.Millisecond), want: "reminder-50>hook reminder-90>hook"},
		{name: "continued: no more percent reminders, continued",
			q: continued(timed(10*time.Second), at(10*time.Second)), policies: []*hitlv1.NotificationPolicy{policy(percents(50, 90))},
			sent: Record{"hook": {"asked", "reminder-50", "reminder-90"}}, now: at(10 * time.Second), want: "continued>hook"},
		{name: "continued with every: reminders after the window closed, up to max",
			q: continued(timed(10*time.Second), at(10*time.Second)), policies: []*hitlv1.NotificationPolicy{policy(every(time.Minute, 2))},
			sent: Record{"hook": {"asked", "continued"}}, now: at(5 * time.Minute), want: "reminder-continued-1>hook reminder-continued-2>hook"},
		{name: "blocking with every: the next reminder",
			q: blocking(), policies: []*hitlv1.NotificationPolicy{policy(every(time.Minute, 3))}, sent: Record{"hook": {"asked"}},
			now: at(90 * time.Second), want: "reminder-open-1>hook", next: at(2 * time.Minute)},
		{name: "a queued late reply stops reminders and escalation",
			q: func() *hitlv1.UserQuestion {
				q := continued(blocking(), at(time.Minute))
				q.Status.QueuedReply = &hitlv1.QueuedReply{Name: "r"}
				return q
			}(),
			policies: []*hitlv1.NotificationPolicy{policy(every(time.Minute, 3), escalate(time.Minute, "oncall"))},
			sent:     Record{"hook": {"asked", "continued"}}, now: at(time.Hour)},
		{name: "escalation goes to the tier's channels, and the policy's when on has it",
			q: blocking(), policies: []*hitlv1.NotificationPolicy{
				policy(on(hitlv1.EventAsked), escalate(time.Minute, "oncall"), escalate(time.Hour, "boss")),
				policy(escalate(time.Minute, "oncall")),
			}, sent: Record{"hook": {"asked"}}, now: at(2 * time.Minute),
			want: "escalated-60>oncall escalated-60>hook", next: at(time.Hour)},
		{name: "settled after the policy was created",
			q:        settledAt(timed(time.Minute), at(time.Second)),
			policies: []*hitlv1.NotificationPolicy{policy(percents(50), escalate(time.Second, "oncall"))}, now: at(time.Hour),
			want: "settled>hook"},
		{name: "settled before the policy was created: no news",
			q:        settledAt(timed(time.Minute), at(time.Second)),
			policies: []*hitlv1.NotificationPolicy{policy(created(at(time.Minute)))}, now: at(time.Hour)},
		{name: "cancelled, with on limited to it",
			q: func() *hitlv1.UserQuestion {
				q := timed(time.Minute)
				q.Status.State = hitlv1.StateCancelled
				q.Status.Conditions = []metav1.Condition{{Type: hitlv1.ConditionStalled, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at(time.Second))}}
				return q
			}(),
			policies: []*hitlv1.NotificationPolicy{policy(on(hitlv1.EventCancelled))}, now: at(time.Hour), want: "cancelled>hook"},
		{name: "each vote counted on a governed question, once, after the ask",
			q:        governed(blocking(), vote("alice", hitlv1.VoteApprove, at(time.Second)), vote("bob", hitlv1.VoteReject, at(2*time.Second))),
			policies: []*hitlv1.NotificationPolicy{policy()}, now: at(time.Minute),
			want: "asked>hook vote-u-alice>hook vote-u-bob>hook"},
		{name: "a restart sends the votes not recorded, not those that were",
			q:        governed(blocking(), vote("alice", hitlv1.VoteApprove, at(time.Second)), vote("bob", hitlv1.VoteApprove, at(time.Second))),
			policies: []*hitlv1.NotificationPolicy{policy()}, sent: Record{"hook": {"asked", "vote-u-alice"}}, now: at(time.Minute),
			want: "vote-u-bob>hook"},
		{name: "votes while Continued, after the continuation",
			q:        governed(continued(timed(10*time.Second), at(10*time.Second)), vote("alice", hitlv1.VoteApprove, at(20*time.Second))),
			policies: []*hitlv1.NotificationPolicy{policy()}, sent: Record{"hook": {"asked"}}, now: at(time.Minute),
			want: "continued>hook vote-u-alice>hook"},
		{name: "on without QuorumProgress: no votes; on with it: only votes",
			q: governed(blocking(), vote("alice", hitlv1.VoteApprove, at(time.Second))),
			policies: []*hitlv1.NotificationPolicy{
				policy(on(hitlv1.EventAsked, hitlv1.EventSettled)),
				func() *hitlv1.NotificationPolicy {
					p := policy(on(hitlv1.EventQuorumProgress))
					p.Spec.Channels = []string{"approvers"}
					return p
				}(),
			}, now: at(time.Minute), want: "asked>hook vote-u-alice>approvers"},
		{name: "votes counted before the policy was created are not news",
			q:        governed(blocking(), vote("alice", hitlv1.VoteApprove, at(time.Second)), vote("bob", hitlv1.VoteApprove, at(time.Minute))),
			policies: []*hitlv1.NotificationPolicy{policy(created(at(30 * time.Second)))}, sent: Record{"hook": {"asked"}}, now: at(time.Hour),
			want: "vote-u-bob>hook"},
		{name: "a queued deciding vote: no progress, the question is not answerable",
			q: func() *hitlv1.UserQuestion {
				q := governed(continued(blocking(), at(time.Minute)), vote("alice", hitlv1.VoteApprove, at(2*time.Minute)), vote("bob", hitlv1.VoteApprove, at(3*time.Minute)))
				q.Status.QueuedReply = &hitlv1.QueuedReply{Name: "r-bob"}
				return q
			}(),
			policies: []*hitlv1.NotificationPolicy{policy()}, sent: Record{"hook": {"asked", "continued"}}, now: at(time.Hour)},
		{name: "settled by the deciding vote: Settled tells it, not QuorumProgress",
			q:        settledAt(governed(blocking(), vote("alice", hitlv1.VoteApprove, at(time.Second)), vote("bob", hitlv1.VoteApprove, at(2*time.Second))), at(2*time.Second)),
			policies: []*hitlv1.NotificationPolicy{policy()}, sent: Record{"hook": {"asked"}}, now: at(time.Minute),
			want: "settled>hook"},
		{name: "votes on a question without a rule are not planned",
			q: func() *hitlv1.UserQuestion {
				q := governed(blocking(), vote("alice", hitlv1.VoteApprove, at(time.Second)))
				q.Status.Approval = nil
				return q
			}(),
			policies: []*hitlv1.NotificationPolicy{policy()}, sent: Record{"hook": {"asked"}}, now: at(time.Minute)},
		{name: "one channel in two policies hears each event once",
			q: timed(10 * time.Second), policies: []*hitlv1.NotificationPolicy{policy(percents(50)), policy(percents(50, 90))},
			now: at(6 * time.Second), want: "asked>hook reminder-50>hook", next: at(9 * time.Second)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sent := c.sent
			if sent == nil {
				sent = Record{}
			}
			due, next := Plan(c.q, c.policies, sent, c.now)
			if got := keys(due); got != c.want || !next.Equal(c.next) {
				t.Errorf("Plan = %q, next %v; want %q, next %v", got, next, c.want, c.next)
			}
			// Once what was due is recorded, nothing is due until next.
			for _, d := range due {
				sent.Add(d.Channel, d.Key)
			}
			if again, _ := Plan(c.q, c.policies, sent, c.now); len(again) > 0 {
				t.Errorf("due again after recording: %s", keys(again))
			}
		})
	}
}

// TestPlanQuorumCarriesTheTallyAtEachVote: each vote's notification
// carries the tally as it stood after that vote, so a resend tells the
// same.
func TestPlanQuorumCarriesTheTallyAtEachVote(t *testing.T) {
	q := governed(blocking(), vote("alice", hitlv1.VoteApprove, at(time.Second)), vote("bob", hitlv1.VoteReject, at(2*time.Second)))
	due, _ := Plan(q, []*hitlv1.NotificationPolicy{policy(on(hitlv1.EventQuorumProgress))}, Record{}, at(time.Minute))
	var got []string
	for _, d := range due {
		if d.Event != hitlv1.EventQuorumProgress || d.Quorum == nil || !d.At.Equal(d.Quorum.Vote.At) {
			t.Fatalf("due %+v", d)
		}
		got = append(got, d.Quorum.Tally+" "+d.Quorum.Vote.By+" "+string(d.Quorum.Vote.Choice)+" of "+strconv.Itoa(len(d.Quorum.Votes)))
	}
	if want := "1/2 alice Approve of 1|1/2 (1 no) bob Reject of 2"; strings.Join(got, "|") != want {
		t.Errorf("quorum %q, want %q", strings.Join(got, "|"), want)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := Record{}
	r.Add("b", "asked")
	r.Add("a", "asked")
	r.Add("a", "reminder-50")
	r.Add("a", "asked")
	q := timed(time.Minute)
	q.Annotations = map[string]string{hitlv1.NotifiedAnnotation: r.String()}
	if got := RecordOf(q); !got.Equal(r) || r.String() != `{"a":["asked","reminder-50"],"b":["asked"]}` {
		t.Errorf("%s read back as %v", r, got)
	}
	q.Annotations[hitlv1.NotifiedAnnotation] = "not json"
	if got := RecordOf(q); len(got) != 0 {
		t.Errorf("a bad annotation read as %v", got)
	}
}
