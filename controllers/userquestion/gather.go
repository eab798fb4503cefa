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
}

func newGatherer() *gatherer {
	return &gatherer{since: map[types.NamespacedName]time.Time{}}
}

// hold says how much longer question key's decision d waits for more
// votes before it is written, or zero when it is written now: d only
// counts votes that decide nothing and window has passed since the first
// of them was held, or d does something else. A nil gatherer never holds.
func (g *gatherer) hold(key types.NamespacedName, q *hitlv1.UserQuestion, d *Decision, now time.Time, window time.Duration) time.Duration {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if window <= 0 || !onlyCounts(q, d) {
		delete(g.since, key)
		return 0
	}
	since, held := g.since[key]
	if !held {
		since = now
		g.since[key] = now
	}
	wait := since.Add(window).Sub(now)
	if wait <= 0 {
		delete(g.since, key)
		return 0
	}
	if d.RequeueAfter > 0 && d.RequeueAfter < wait {
		// A deadline or a claim's expiry comes first; the look then
		// decides what it brings.
		wait = d.RequeueAfter
	}
	return wait
}

// forget drops what is held for a question that is gone.
func (g *gatherer) forget(key types.NamespacedName) {
	if g == nil {
		return
	}
	g.mu.Lock()
	delete(g.since, key)
	g.mu.Unlock()
}

// onlyCounts reports whether decision d on q does nothing but count votes
// that decide nothing: the question's state stays, every reply it changes
// becomes Counted, and its status changes in its votes and tally alone.
func onlyCounts(q *hitlv1.UserQuestion, d *Decision) bool {
	if q.Status.Approval == nil || d.Transition != "" || len(d.Replies) == 0 {
		return false
	}
	if s := q.Status.State; s != hitlv1.StateOpen && s != hitlv1.StateContinued {
		return false
	}
	for _, c := range d.Replies {
		if c.Outcome != hitlv1.OutcomeCounted {
			return false
		}
	}
	rest := d.Status
	rest.Votes, rest.Tally = q.Status.Votes, q.Status.Tally
	return equality.Semantic.DeepEqual(q.Status, rest)
}
