// Package eventbudget writes the controller's Events off its workers, from
// a bounded queue, and keeps each namespace's budget of routine Events
// (Continued): over it, they are folded into one summary Event.
package eventbudget

import (
	"fmt"
	"strings"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

const (
	// ContinuedEventsPerMinute is how many Continued Events a namespace
	// gets a minute by default, all at once if its windows close together.
	ContinuedEventsPerMinute = 60
	// summaryDelay is how long the Continued Events over a namespace's
	// budget gather before the one Event that sums them up is written.
	summaryDelay = 5 * time.Second
)

// eventBudget limits one routine kind of Event (Continued: a window closed
// unanswered, which changes nothing people must act on) per namespace: a
// token bucket of perMinute Events refilled over a minute. Over budget,
// the Events of a namespace are folded into one summary Event, written
// summaryDelay after the first of them; the state, the condition and the
// metrics of every question are written as always.
type eventBudget struct {
	reason    string
	perMinute int
	clock     clock.WithDelayedExecution
	// summarize is called with a namespace's summary when it is due.
	summarize func(*eventSummary)

	mu         sync.Mutex
	namespaces map[string]*namespaceBudget
}

type namespaceBudget struct {
	tokens float64
	at     time.Time
	// summary gathers the Events folded since the last summary, if any.
	summary *eventSummary
}

// eventSummary is the Events of one namespace folded into one.
type eventSummary struct {
	// first is the first Event folded: the summary regards its object.
	first *eventsv1.Event
	// names are the names of the objects of the Events folded, in order.
	names []string
	// uids are their uids, pending until the summary is written.
	uids  []types.UID
	since time.Time
}

func newEventBudget(reason string, perMinute int, clk clock.WithDelayedExecution, summarize func(*eventSummary)) *eventBudget {
	return &eventBudget{reason: reason, perMinute: perMinute, clock: clk, summarize: summarize, namespaces: map[string]*namespaceBudget{}}
}

// fold reports whether e is over its namespace's budget, and if so adds it
// to the namespace's summary. Events of other reasons are never folded.
func (b *eventBudget) fold(e *eventsv1.Event) bool {
	if b == nil || e.Reason != b.reason {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	nb := b.namespaces[e.Namespace]
	if nb == nil {
		b.forgetIdle(now)
		nb = &namespaceBudget{tokens: float64(b.perMinute), at: now}
		b.namespaces[e.Namespace] = nb
	}
	nb.refill(now, b.perMinute)
	if nb.tokens >= 1 {
		nb.tokens--
		return false
	}
	if nb.summary == nil {
		nb.summary = &eventSummary{first: e, since: now}
		ns := e.Namespace
		// On its own goroutine: a fake clock calls this with its lock held.
		b.clock.AfterFunc(summaryDelay, func() { go b.flush(ns) })
	}
	nb.summary.names = append(nb.summary.names, e.Regarding.Name)
	nb.summary.uids = append(nb.summary.uids, e.Regarding.UID)
	return true
}

func (nb *namespaceBudget) refill(now time.Time, perMinute int) {
	if elapsed := now.Sub(nb.at); elapsed > 0 {
		nb.tokens = min(float64(perMinute), nb.tokens+elapsed.Minutes()*float64(perMinute))
	}
	nb.at = now
}

// forgetIdle drops the namespaces whose bucket is full again and that have
// no summary to write. Called with mu held.
func (b *eventBudget) forgetIdle(now time.Time) {
	for ns, nb := range b.namespaces {
		if nb.summary == nil && nb.tokens+now.Sub(nb.at).Minutes()*float64(b.perMinute) >= float64(b.perMinute) {
			delete(b.namespaces, ns)
		}
	}
}

// flush hands the namespace's summary, if any, to summarize.
func (b *eventBudget) flush(namespace string) {
	b.mu.Lock()
	var s *eventSummary
	if nb := b.namespaces[namespace]; nb != nil {
		s, nb.summary = nb.summary, nil
	}
	b.mu.Unlock()
	if s != nil {
		b.summarize(s)
	}
}

// flushAll hands every pending summary to summarize (when the writer stops).
func (b *eventBudget) flushAll() {
	if b == nil {
		return
	}
	b.mu.Lock()
	namespaces := make([]string, 0, len(b.namespaces))
	for ns := range b.namespaces {
		namespaces = append(namespaces, ns)
	}
	b.mu.Unlock()
	for _, ns := range namespaces {
		b.flush(ns)
	}
}

// note is what the summary Event says: how many Events it stands for, over
// what time, and the names of as many of their objects as fit.
func (s *eventSummary) note(perMinute int, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d windows in this namespace closed unanswered within %s over the budget of %d %s Events a minute, without an Event of their own; each question's status says %s: ",
		len(s.names), now.Sub(s.since).Round(time.Millisecond), perMinute, s.first.Reason, hitlv1.StateContinued)
	tail := fmt.Sprintf(" and %d more", len(s.names))
	listed := 0
	for i, name := range s.names {
		sep := ""
		if i > 0 {
			sep = ", "
		}
		if b.Len()+len(sep)+len(name)+len(tail) > hitlv1.MaxMessageLength {
			break
		}
		b.WriteString(sep + name)
		listed++
	}
	if listed < len(s.names) {
		fmt.Fprintf(&b, " and %d more", len(s.names)-listed)
	}
	return b.String()
}
