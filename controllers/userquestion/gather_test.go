package userquestion

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func TestGatherHoldsOnlyVotesThatDecideNothing(t *testing.T) {
	governed := func(state hitlv1.QuestionState) *hitlv1.UserQuestion {
		q := &hitlv1.UserQuestion{}
		q.Status.State = state
		q.Status.Approval = &hitlv1.EffectiveApproval{Approvals: 2}
		q.Status.Tally = "0/2"
		return q
	}
	counting := func(q *hitlv1.UserQuestion) Decision {
		d := Decision{Status: *q.Status.DeepCopy(), Replies: []ReplyChange{{Name: "alice", Outcome: hitlv1.OutcomeCounted}}}
		d.Status.Votes = []hitlv1.Vote{{Reply: "alice", By: hitlv1.UserInfo{Username: "alice"}, Choice: hitlv1.VoteApprove}}
		d.Status.Tally = "1/2"
		return d
	}
	// firstLook makes d a governed question's first status, Open, which
	// fixes its rule, counting the vote.
	firstLook := func(d *Decision) {
		d.Status.State = hitlv1.StateOpen
		d.Status.Approval = &hitlv1.EffectiveApproval{Approvals: 2}
	}
	const window = 25 * time.Millisecond
	now := time.Unix(1_800_000_000, 0)
	cases := []struct {
		name   string
		q      *hitlv1.UserQuestion
		change func(*Decision)
		want   time.Duration
	}{
		{name: "a vote that decides nothing waits", q: governed(hitlv1.StateOpen), want: window},
		{name: "on a Continued question too", q: governed(hitlv1.StateContinued), want: window},
		{name: "a sooner deadline comes first", q: governed(hitlv1.StateOpen), change: func(d *Decision) { d.RequeueAfter = 5 * time.Millisecond }, want: 5 * time.Millisecond},
		{name: "a vote that settles is written", q: governed(hitlv1.StateOpen), change: func(d *Decision) {
			d.Transition, d.Status.State = hitlv1.StateSettled, hitlv1.StateSettled
			d.Replies[0].Outcome = hitlv1.OutcomeApplied
		}},
		{name: "a refusal beside it is written", q: governed(hitlv1.StateOpen), change: func(d *Decision) {
			d.Replies = append(d.Replies, ReplyChange{Name: "mallory", Outcome: hitlv1.OutcomeRejected, Reason: hitlv1.CodeDuplicateVote})
		}},
		{name: "a status that changes otherwise is written", q: governed(hitlv1.StateOpen), change: func(d *Decision) { d.Status.ObservedGeneration = 2 }},
		{name: "a new question's first votes wait too", q: &hitlv1.UserQuestion{}, change: firstLook, want: window},
		{name: "a new question's first look without a vote is holdOpen's", q: &hitlv1.UserQuestion{}, change: func(d *Decision) {
			firstLook(d)
			d.Replies = nil
		}},
		{name: "an ungoverned question's first reply is never held here", q: &hitlv1.UserQuestion{}, change: func(d *Decision) {
			firstLook(d)
			d.Status.Approval = nil
		}},
		{name: "a first look that closes the window is written", q: &hitlv1.UserQuestion{}, change: func(d *Decision) {
			firstLook(d)
			d.Transition, d.Status.State = hitlv1.StateContinued, hitlv1.StateContinued
		}},
		{name: "an ungoverned question is never held", q: func() *hitlv1.UserQuestion {
			q := governed(hitlv1.StateOpen)
			q.Status.Approval = nil
			return q
		}()},
		{name: "a finished question is never held", q: governed(hitlv1.StateSettled)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := counting(tc.q)
			if tc.change != nil {
				tc.change(&d)
			}
			g, key := newGatherer(), types.NamespacedName{Namespace: "agents", Name: "ship"}
			if got := g.hold(key, tc.q, &d, now, window); got != tc.want {
				t.Fatalf("hold = %s, want %s", got, tc.want)
			}
			if tc.want == 0 {
				if len(g.since) != 0 {
					t.Errorf("a decision written at once left %d questions held", len(g.since))
				}
				return
			}
			if got := g.hold(key, tc.q, &d, now.Add(10*time.Millisecond), window); got != min(tc.want, window-10*time.Millisecond) {
				t.Errorf("looked at again 10ms later: hold = %s, want what is left of the window", got)
			}
			if got := g.hold(key, tc.q, &d, now.Add(window), window); got != 0 {
				t.Errorf("once the window has passed: hold = %s, want 0 (written)", got)
			}
			if len(g.since) != 0 {
				t.Errorf("a written decision left %d questions held", len(g.since))
			}
			if got := g.hold(key, tc.q, &d, now, 0); got != 0 {
				t.Errorf("with no window: hold = %s, want 0", got)
			}
		})
	}
}

func TestHoldOpenWaitsOnlyForANewQuestionsFirstStatus(t *testing.T) {
	const window = 25 * time.Millisecond
	now := time.Unix(1_800_000_000, 0)
	fresh := func() *hitlv1.UserQuestion {
		q := &hitlv1.UserQuestion{}
		q.CreationTimestamp.Time = now.Truncate(time.Second)
		return q
	}
	opening := func() Decision {
		return Decision{Status: hitlv1.UserQuestionStatus{State: hitlv1.StateOpen}}
	}
	cases := []struct {
		name   string
		q      *hitlv1.UserQuestion
		change func(*Decision)
		want   time.Duration
	}{
		{name: "a new question waits for a reply", q: fresh(), want: window},
		{name: "a sooner deadline comes first", q: fresh(), change: func(d *Decision) { d.RequeueAfter = 5 * time.Millisecond }, want: 5 * time.Millisecond},
		{name: "a reply in settles it at once", q: fresh(), change: func(d *Decision) {
			d.Transition, d.Status.State = hitlv1.StateSettled, hitlv1.StateSettled
			d.Replies = []ReplyChange{{Name: "alice", Outcome: hitlv1.OutcomeApplied}}
		}},
		{name: "a governed question's first vote that decides nothing waits too", q: fresh(), change: func(d *Decision) {
			d.Replies = []ReplyChange{{Name: "alice", Outcome: hitlv1.OutcomeCounted}}
		}, want: window},
		{name: "a refused reply is written at once", q: fresh(), change: func(d *Decision) {
			d.Replies = []ReplyChange{{Name: "mallory", Outcome: hitlv1.OutcomeRejected, Reason: hitlv1.CodeForbidden}}
		}},
		{name: "a question asked while the manager was away is written at once", q: func() *hitlv1.UserQuestion {
			q := fresh()
			q.CreationTimestamp.Time = now.Add(-time.Minute)
			return q
		}()},
		{name: "an Open question's later looks are never held", q: func() *hitlv1.UserQuestion {
			q := fresh()
			q.Status.State = hitlv1.StateOpen
			return q
		}()},
		{name: "a window that closes at once is written", q: fresh(), change: func(d *Decision) {
			d.Transition, d.Status.State = hitlv1.StateContinued, hitlv1.StateContinued
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := opening()
			if tc.change != nil {
				tc.change(&d)
			}
			g, key := newGatherer(), types.NamespacedName{Namespace: "agents", Name: "ship"}
			if got := g.holdOpen(key, tc.q, &d, now, window); got != tc.want {
				t.Fatalf("holdOpen = %v, want %v", got, tc.want)
			}
			if tc.want == 0 {
				return
			}
			if got := g.holdOpen(key, tc.q, &d, now.Add(10*time.Millisecond), window); got != min(tc.want, window-10*time.Millisecond) {
				t.Fatalf("10ms later: holdOpen = %v", got)
			}
			if got := g.holdOpen(key, tc.q, &d, now.Add(window), window); got != 0 {
				t.Fatalf("once the window has passed: holdOpen = %v, want 0", got)
			}
			if got := g.holdOpen(key, tc.q, &d, now, 0); got != 0 {
				t.Fatalf("without a window: holdOpen = %v, want 0", got)
			}
			g.forget(key)
			if got := g.holdOpen(key, tc.q, &d, now.Add(time.Second), window); got != min(tc.want, window) {
				t.Fatalf("forgotten, a look starts a new wait: holdOpen = %v", got)
			}
		})
	}
}

// A governed question's first votes wait their own window, from the first
// of them, not only what is left of the Open status's, which began at the
// question's first look, before any vote was sent: the votes sent together
// are counted in one status write even when the first arrives as the Open
// window ends. The looks run as Reconcile runs them: hold, then holdOpen.
func TestFirstVotesWaitTheirOwnWindow(t *testing.T) {
	const window = 25 * time.Millisecond
	asked := time.Unix(1_800_000_000, 0)
	q := &hitlv1.UserQuestion{}
	q.CreationTimestamp.Time = asked.Truncate(time.Second)
	key := types.NamespacedName{Namespace: "agents", Name: "ship"}
	g := newGatherer()
	look := func(at time.Duration, votes ...string) time.Duration {
		t.Helper()
		d := Decision{Status: hitlv1.UserQuestionStatus{State: hitlv1.StateOpen, Approval: &hitlv1.EffectiveApproval{Approvals: 2}}}
		for _, v := range votes {
			d.Replies = append(d.Replies, ReplyChange{Name: v, Outcome: hitlv1.OutcomeCounted})
		}
		now := asked.Add(at)
		if wait := g.hold(key, q, &d, now, window); wait > 0 {
			return wait
		}
		return g.holdOpen(key, q, &d, now, window)
	}
	if got := look(0); got != window {
		t.Fatalf("the first look, no vote yet: wait %s, want %s", got, window)
	}
	if got := look(20*time.Millisecond, "alice"); got != window {
		t.Fatalf("the first vote, 20ms in: wait %s, want its own window, %s", got, window)
	}
	if got := look(30*time.Millisecond, "alice"); got != 15*time.Millisecond {
		t.Fatalf("30ms in, the Open window over: wait %s, want the rest of the vote's, 15ms", got)
	}
	if got := look(45*time.Millisecond, "alice"); got != 0 {
		t.Fatalf("45ms in, both windows over: wait %s, want 0 (written)", got)
	}
	if len(g.since) != 0 || len(g.opening) != 0 {
		t.Errorf("a written decision left questions held: %d votes, %d opening", len(g.since), len(g.opening))
	}
}
