package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// claimReadMaxAge is how old a read of the claims may be to close a
// window: a close is never dated more than this before it is written, and
// through a long burst the claims are read again this often.
const claimReadMaxAge = 2 * time.Second

// claimReads reads the claims of every namespace from the API server,
// around the cache, and shares each read between the windows it can close.
// A window may close only on claims read no earlier than the moment it
// closes: a read sent at or after a question's deadline tells whether a
// claim held its window then. A thousand questions sharing a deadline
// share one read, instead of a read each: the API server answers a
// consistent list only once its own watch cache has caught up with etcd,
// which for Leases, seldom written, takes up to a tenth of a second (its
// progress requests), and a read per window made each close wait that
// long. The read covers every namespace, so that windows closing across
// many namespaces share it too: read per namespace, deadlines spread over
// a thousand namespaces cost a read each, and a worker that fell behind
// waited for a fresh read at every close instead of using the last one.
// A read holds the claims alone (Leases labelled as claims), which live
// only while people work on questions.
//
// One read is in flight at a time. Windows due after it was sent wait for
// the next, sent as soon as it returns and shared by all of them: deadlines
// spread over a minute (167 a second) sent a read each as each fell due,
// and those reads of every claim in the cluster, in flight side by side,
// slowed the API server and with it every status write.
type claimReads struct {
	reader client.Reader
	clock  clock.PassiveClock

	mu sync.Mutex
	// reads holds the read in flight and the last one that succeeded,
	// newest last.
	reads []*claimRead
	// next is the read the windows due after the one in flight was sent
	// wait for; it is sent, with nextCtx, when that one returns.
	next    *claimRead
	nextCtx context.Context
}

// claimRead is one read of the claims.
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
	return &claimReads{reader: reader, clock: clk}
}

// since returns a read of the claims sent no earlier than t, nor
// claimReadMaxAge ago: one in flight or done, or the next one once the
// one in flight returns, else a new one.
func (c *claimReads) since(ctx context.Context, t time.Time) (*claimRead, error) {
	if oldest := c.clock.Now().Add(-claimReadMaxAge); t.Before(oldest) {
		t = oldest
	}
	read, asked := c.join(ctx, t)
	if asked {
		claimReadsTotal.WithLabelValues("sent").Inc()
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

// join finds a read sent at or after t, or the next read, sent when the
// one in flight returns, or makes a new one that the caller sends. It
// reports whether the caller sent the read or asked for the next one.
func (c *claimReads) join(ctx context.Context, t time.Time) (read *claimRead, asked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inFlight := false
	for i := len(c.reads) - 1; i >= 0; i-- {
		if !c.reads[i].at.Before(t) {
			return c.reads[i], false
		}
		inFlight = inFlight || !isDone(c.reads[i])
	}
	if inFlight {
		if c.next != nil {
			return c.next, false
		}
		c.next, c.nextCtx = &claimRead{done: make(chan struct{})}, ctx
		return c.next, true
	}
	read = &claimRead{at: c.clock.Now(), done: make(chan struct{})}
	c.reads = append(c.reads, read)
	go c.send(ctx, read)
	return read, true
}

// send lists the claims of every namespace and keeps the read for later
// closes, then sends the next read if windows wait for one.
func (c *claimReads) send(ctx context.Context, read *claimRead) {
	var list coordinationv1.LeaseList
	err := c.reader.List(ctx, &list, client.MatchingLabels{hitlv1.ClaimLabel: "true"})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		read.err = fmt.Errorf("reading the claims from the API server: %w", err)
	} else {
		read.leases = list.Items
	}
	// One read is in flight at a time, so all the others are done: keep
	// the newest that succeeded; an older one serves nobody a newer one
	// cannot.
	var newest *claimRead
	for _, r := range c.reads {
		if r.err == nil && (newest == nil || r.at.After(newest.at)) {
			newest = r
		}
	}
	clear(c.reads)
	c.reads = c.reads[:0]
	if newest != nil {
		c.reads = append(c.reads, newest)
	}
	if c.next != nil {
		next, ctx := c.next, c.nextCtx
		c.next, c.nextCtx = nil, nil
		next.at = c.clock.Now()
		c.reads = append(c.reads, next)
		go c.send(ctx, next)
	}
	// Last, so that whoever waited on it finds the reads in order.
	close(read.done)
}

// of returns the read's claims of one question.
func (r *claimRead) of(question types.NamespacedName) []coordinationv1.Lease {
	var out []coordinationv1.Lease
	for i := range r.leases {
		if r.leases[i].Namespace == question.Namespace && r.leases[i].Labels[hitlv1.QuestionLabel] == question.Name {
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
