package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// claimReadMaxAge is how old a read of the claims may be to close a
// window: a close is never dated more than this before it is written, and
// through a long burst the claims are read again this often.
const claimReadMaxAge = 2 * time.Second

// claimReads reads the claims of a namespace from the API server, around
// the cache, and shares each read between the windows it can close. A
// window may close only on claims read no earlier than the moment it
// closes: a read sent at or after a question's deadline tells whether a
// claim held its window then. A thousand questions sharing a deadline
// share one read, instead of a read each: the API server answers a
// consistent list only once its own watch cache has caught up with etcd,
// which for Leases, seldom written, takes up to a tenth of a second (its
// progress requests), and a read per window made each close wait that long.
type claimReads struct {
	reader client.Reader
	clock  clock.PassiveClock

	mu sync.Mutex
	// reads holds, per namespace, the reads in flight and the last one
	// that succeeded, newest last.
	reads map[string][]*claimRead
}

// claimRead is one read of a namespace's claims.
type claimRead struct {
	// at is when the read was sent: it holds every claim the API server
	// held then.
	at time.Time
	// done is closed once leases or err is set.
	done   chan struct{}
	leases []coordinationv1.Lease
	err    error
}

func newClaimReads(reader client.Reader, clk clock.PassiveClock) *claimReads {
	return &claimReads{reader: reader, clock: clk, reads: map[string][]*claimRead{}}
}

// since returns a read of the namespace's claims sent no earlier than t,
// nor claimReadMaxAge ago: one in flight or done, else a new one.
func (c *claimReads) since(ctx context.Context, namespace string, t time.Time) (*claimRead, error) {
	if oldest := c.clock.Now().Add(-claimReadMaxAge); t.Before(oldest) {
		t = oldest
	}
	read, sent := c.join(namespace, t)
	if sent {
		claimReadsTotal.WithLabelValues("sent").Inc()
		c.send(ctx, namespace, read)
	} else {
		claimReadsTotal.WithLabelValues("shared").Inc()
	}
	select {
	case <-read.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if read.err != nil {
		return nil, read.err
	}
	return read, nil
}

// join finds a read sent at or after t, or makes a new one that the
// caller sends.
func (c *claimReads) join(namespace string, t time.Time) (read *claimRead, send bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reads := c.reads[namespace]
	for i := len(reads) - 1; i >= 0; i-- {
		if !reads[i].at.Before(t) {
			return reads[i], false
		}
	}
	c.forgetIdle()
	read = &claimRead{at: c.clock.Now(), done: make(chan struct{})}
	c.reads[namespace] = append(reads, read)
	return read, true
}

// send lists the namespace's claims and keeps the read for later closes,
// with the reads still in flight.
func (c *claimReads) send(ctx context.Context, namespace string, read *claimRead) {
	var list coordinationv1.LeaseList
	err := c.reader.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{hitlv1.ClaimLabel: "true"})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		read.err = fmt.Errorf("reading the claims from the API server: %w", err)
	} else {
		read.leases = list.Items
	}
	close(read.done)
	// Keep the reads in flight and the newest that succeeded; an older one
	// serves nobody a newer one cannot.
	kept := c.reads[namespace][:0]
	var newest *claimRead
	for _, r := range c.reads[namespace] {
		if !isDone(r) {
			kept = append(kept, r)
		} else if r.err == nil && (newest == nil || r.at.After(newest.at)) {
			newest = r
		}
	}
	if newest != nil {
		kept = append(kept, newest)
		slices.SortFunc(kept, func(a, b *claimRead) int { return a.at.Compare(b.at) })
	}
	if len(kept) == 0 {
		delete(c.reads, namespace)
		return
	}
	c.reads[namespace] = kept
}

// forgetIdle drops the namespaces whose last read is old and has nothing
// in flight. Called with mu held.
func (c *claimReads) forgetIdle() {
	now := c.clock.Now()
	for ns, reads := range c.reads {
		last := reads[len(reads)-1]
		if isDone(last) && now.Sub(last.at) > claimReadMaxAge {
			delete(c.reads, ns)
		}
	}
}

// of returns the read's claims of one question.
func (r *claimRead) of(question string) []coordinationv1.Lease {
	var out []coordinationv1.Lease
	for i := range r.leases {
		if r.leases[i].Labels[hitlv1.QuestionLabel] == question {
			out = append(out, r.leases[i])
		}
	}
	return out
}

func isDone(r *claimRead) bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}
