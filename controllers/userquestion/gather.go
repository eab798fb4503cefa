package userquestion

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// DefaultVoteGather is how long, by default, a vote that decides nothing
// waits before it is written (see Reconciler.VoteGather).
const DefaultVoteGather = 25 * time.Millisecond

// gatherer remembers since when each question has held back votes that
// decide nothing. Approvers notified together answer together: the votes
// that arrive while the first waits are counted in the same status write,
// so the one that decides is not queued behind the writes of those before
// it (a status write and a reply's outcome each). Nothing is written while
// a vote waits, so a restart or a lost leadership loses nothing: the next
// look counts it again.
type gatherer struct {
	mu    sync.Mutex
	since map[types.NamespacedName]time.Time
	// opening holds since when each new question has waited for its first
	// status (see holdOpen).
	opening map[types.NamespacedName]time.Time
}

func newGatherer() *gatherer {
	return &gatherer{since: map[types.NamespacedName]time.Time{}, opening: map[types.NamespacedName]time.Time{}}
}

// DefaultOpenGather is how long, by default, a new question waits for its
// Open status to be written (see Reconciler.OpenGather).
const DefaultOpenGather = 25 * time.Millisecond

// openGatherAge is the age past which a new question is written Open at
// once: one asked while the manager was away has waited enough.
const openGatherAge = 2 * time.Second

// holdOpen says how much longer a new question's first status, Open, waits
// before it is written, or zero when it is written now. An answerer that
// answers at once (a service, a policy, a person with the inbox open) has
// its reply in before the window ends, and the question goes straight to
// Settled in one status write instead of two; a question not answered by
// then is written Open. A governed question's first votes that decide
// nothing wait with it, and for their own window too (see hold and
// onlyCounts): the later of the two ends the wait. Nothing is written while it
// waits, so a restart loses nothing: the next look decides again. A nil
// gatherer never holds.
func (g *gatherer) holdOpen(key types.NamespacedName, q *hitlv1.UserQuestion, d *Decision, now time.Time, window time.Duration) time.Duration {
	if g == nil {
		return 0
	}
	// The first look at a question is no transition: Decide counts a
	// question without a state as Open.
	holds := q.Status.State == "" && d.Status.State == hitlv1.StateOpen && d.Transition == "" && onlyVotes(d) &&
		now.Sub(q.CreationTimestamp.Time) <= openGatherAge
	return g.wait(g.opening, key, holds, d, now, window)
}

// wait is how much longer what question key holds in held waits: zero when
// it holds nothing (holds is false), or window has passed since it began;
// the decision's own requeue (a deadline, a claim's expiry) when that comes
// first, the look then deciding what it brings.
func (g *gatherer) wait(held map[types.NamespacedName]time.Time, key types.NamespacedName, holds bool, d *Decision, now time.Time, window time.Duration) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if window <= 0 || !holds {
		delete(held, key)
		return 0
	}
	since, ok := held[key]
	if !ok {
		since = now
		held[key] = now
	}
	wait := since.Add(window).Sub(now)
	if wait <= 0 {
		delete(held, key)
		return 0
	}
	if d.RequeueAfter > 0 && d.RequeueAfter < wait {
		wait = d.RequeueAfter
	}
	return wait
}

// hold says how much longer question key's decision d waits for more
// votes before it is written, or zero when it is written now: d only
// counts votes that decide nothing and window has passed since the first
// of them was held, or d does something else. A nil gatherer never holds.
func (g *gatherer) hold(key types.NamespacedName, q *hitlv1.UserQuestion, d *Decision, now time.Time, window time.Duration) time.Duration {
	if g == nil {
		return 0
	}
	return g.wait(g.since, key, onlyCounts(q, d), d, now, window)
}

// onlyVotes reports whether every reply decision d changes is a vote that
// decides nothing (Counted): on a governed question's first look, the
// votes sent with the first wait with it, to be counted in one write.
func onlyVotes(d *Decision) bool {
	for _, c := range d.Replies {
		if c.Outcome != hitlv1.OutcomeCounted {
			return false
		}
	}
	return true
}

// forget drops what is held for a question that is gone.
func (g *gatherer) forget(key types.NamespacedName) {
	if g == nil {
		return
	}
	g.mu.Lock()
	delete(g.since, key)
	delete(g.opening, key)
	g.mu.Unlock()
}

// onlyCounts reports whether decision d on q does nothing but count votes
// that decide nothing: the question's state stays, every reply it changes
// becomes Counted, and its status changes in its votes and tally alone.
//
// A governed question's first look counts too when it does nothing but
// count such votes into its first status, Open (the status holdOpen holds
// anyway): its first votes wait their own window, from the first of them,
// as later votes do, not only what is left of the Open status's, which
// began before any vote was sent. Approvers notified together send their
// votes together, but three creates at once on a busy API server return
// tens of milliseconds apart: with only the rest of the Open window, the
// first vote was written alone (the Open status, then its outcome), and
// the vote that decides waited behind both writes.
func onlyCounts(q *hitlv1.UserQuestion, d *Decision) bool {
	if d.Transition != "" || len(d.Replies) == 0 || !onlyVotes(d) {
		return false
	}
	if q.Status.State == "" {
		return d.Status.Approval != nil && d.Status.State == hitlv1.StateOpen
	}
	if q.Status.Approval == nil {
		return false
	}
	if s := q.Status.State; s != hitlv1.StateOpen && s != hitlv1.StateContinued {
		return false
	}
	rest := d.Status
	rest.Votes, rest.Tally = q.Status.Votes, q.Status.Tally
	return equality.Semantic.DeepEqual(q.Status, rest)
}
