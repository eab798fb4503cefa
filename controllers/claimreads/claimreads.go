// Package claimreads reads the claims (QuestionClaims) from the API server, around the cache, before a window closes, and shares each
// read among the windows it can close.
package claimreads

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// claimReadMaxAge is how old a read of the claims may be to close a
// window: a close is never dated more than this before it is written, and
// through a long burst the claims are read again this often.
const claimReadMaxAge = 2 * time.Second

// Reads reads the claims of every namespace from the API server,
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
// A read holds the QuestionClaims, which live only while people work on
// questions, a page of claimReadPage at a time (a namespace can bound its
// claims with a ResourceQuota on count/questionclaims.hitl.dev).
//
// Reads overlap, a few at a time: a window due after the newest read was
// sent waits for a read sent at most claimReadSpacing later, or sooner if
// a read returns first. The API server answers the reads sent between two
// of its progress requests together, at the second, so a window waits for
// about one of them. One read at a time made a window that fell due while
// a read was in flight wait for that read and then for the next: up to
// two. A read for every window, as each fell due (deadlines spread over a
// minute fall due 167 a second), slowed the API server and with it every
// status write; spaced, they are at most 40 a second, and never more than
// claimReadsInFlight at once.
type Reads struct {
	reader client.Reader
	clock  clock.Clock
	// fence, when set, makes the manager's cache current instead of
	// listing from the API server (see Fence); fenceOffUntil (UnixNano) is
	// when to try it again after it could not be written.
	fence         *Fence
	fenceOffUntil atomic.Int64

	mu sync.Mutex
	// reads holds the reads in flight, in the order they were sent, and
	// the newest one that returned and succeeded, anywhere among them.
	reads []*Read
	// next is the read the windows due after the newest read was sent
	// wait for; it is sent, with nextCtx, claimReadSpacing after that one
	// or when a read returns, whichever comes first.
	next    *Read
	nextCtx context.Context
}

const (
	// claimReadSpacing is how often reads are sent while windows keep
	// falling due after the newest was sent.
	claimReadSpacing = 25 * time.Millisecond
	// claimReadsInFlight is how many reads may be in flight at once.
	claimReadsInFlight = 8
)

// Read is one read of the claims.
type Read struct {
	// at is when the read was sent: it holds every claim the API server
	// held then.
	at time.Time
	// done is closed once claims or err is set.
	done   chan struct{}
	claims []hitlv1.QuestionClaim
	err    error
}

// New returns the claims reads of reader, timed by clk.
func New(reader client.Reader, clk clock.Clock) *Reads {
	registerMetrics()
	return &Reads{reader: reader, clock: clk}
}

// fenceRetry is how long the reads list from the API server after the
// fence could not be written for want of grants, before they try it again.
const fenceRetry = time.Minute

// UseFence reads the claims from the manager's cache made current by f,
// and from the API server only when that fails. Call it before the reads
// start.
func (c *Reads) UseFence(f *Fence) { c.fence = f }

// Since returns a read of the claims sent no earlier than t, nor
// claimReadMaxAge ago: one that returned or is in flight, or the next one,
// else a new one.
func (c *Reads) Since(ctx context.Context, t time.Time) (*Read, error) {
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

// join finds a read sent at or after t, or the next read, or makes a new
// one that it sends. It reports whether the caller sent a read or asked
// for the next one.
func (c *Reads) join(ctx context.Context, t time.Time) (read *Read, asked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A read that returned serves at once; of those in flight, the one
	// sent first returns first.
	inFlight := 0
	var lastSent time.Time
	var soonest *Read
	for _, r := range c.reads {
		done := isDone(r)
		if !r.at.Before(t) {
			if done {
				return r, false
			}
			if soonest == nil {
				soonest = r
			}
		}
		if !done {
			inFlight++
			lastSent = r.at
		}
	}
	if soonest != nil {
		return soonest, false
	}
	if c.next != nil {
		return c.next, false
	}
	now := c.clock.Now()
	wait := lastSent.Add(claimReadSpacing).Sub(now)
	if inFlight == 0 || (wait <= 0 && inFlight < claimReadsInFlight) {
		read = &Read{done: make(chan struct{})}
		c.start(ctx, read)
		return read, true
	}
	next := &Read{done: make(chan struct{})}
	c.next, c.nextCtx = next, ctx
	if inFlight < claimReadsInFlight {
		timer := c.clock.NewTimer(wait)
		go func() {
			<-timer.C()
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.next == next {
				c.sendNext()
			}
		}()
	}
	return next, true
}

// sendNext sends the next read, if windows wait for one. c.mu is held.
func (c *Reads) sendNext() {
	if c.next == nil {
		return
	}
	next, ctx := c.next, c.nextCtx
	c.next, c.nextCtx = nil, nil
	c.start(ctx, next)
}

// start sends a read now. c.mu is held.
func (c *Reads) start(ctx context.Context, read *Read) {
	read.at = c.clock.Now()
	c.reads = append(c.reads, read)
	go c.send(ctx, read)
}

// send lists the claims of every namespace and keeps the read for later
// closes, then sends the next read if windows wait for one.
func (c *Reads) send(ctx context.Context, read *Read) {
	claims, err := c.list(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		read.err = fmt.Errorf("reading the claims from the API server: %w", err)
	} else {
		read.claims = claims
	}
	// Keep the reads in flight and the newest that returned and
	// succeeded: an older one serves nobody a newer one cannot.
	var newest *Read
	kept := c.reads[:0]
	for _, r := range c.reads {
		switch {
		case r != read && !isDone(r):
			kept = append(kept, r)
		case r.err == nil && (newest == nil || r.at.After(newest.at)):
			newest = r
		}
	}
	if newest != nil {
		kept = append(kept, newest)
	}
	clear(c.reads[len(kept):])
	c.reads = kept
	c.sendNext()
	// Last, so that whoever waited on it finds the reads in order.
	close(read.done)
}

// claimReadPage is how many claims one list call returns at most.
const claimReadPage = 1000

// list reads every namespace's claims, a page at a time: the pages after
// the first are served at the first's resourceVersion, so together they
// are one consistent read.
func (c *Reads) list(ctx context.Context) ([]hitlv1.QuestionClaim, error) {
	if c.fence != nil && c.clock.Now().UnixNano() >= c.fenceOffUntil.Load() {
		claims, err := c.fence.read(ctx)
		if err == nil {
			claimListsTotal.WithLabelValues("fence").Inc()
			return claims, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		// Without its grants (not granted, or not yet: RBAC applied with
		// the Deployment), or where resourceVersions are not numbers, the
		// reads list from the API server for fenceRetry before the fence
		// is tried again. Other failures fall back for this read only.
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || errors.Is(err, errNotComparable) {
			c.fenceOffUntil.Store(c.clock.Now().Add(fenceRetry).UnixNano())
			log.Info("Reading the claims from the API server: the claims fence cannot be written", "error", err.Error(), "retryAfter", fenceRetry)
		} else {
			log.V(1).Info("Reading the claims from the API server this time", "error", err.Error())
		}
	}
	claimListsTotal.WithLabelValues("list").Inc()
	var claims []hitlv1.QuestionClaim
	cont := ""
	for {
		var page hitlv1.QuestionClaimList
		if err := c.reader.List(ctx, &page, client.Limit(claimReadPage), client.Continue(cont)); err != nil {
			return nil, err
		}
		if claims == nil {
			claims = page.Items
		} else {
			claims = append(claims, page.Items...)
		}
		if cont = page.Continue; cont == "" {
			return claims, nil
		}
	}
}

// At is when the read was sent: it holds every claim the API server held
// then.
func (r *Read) At() time.Time { return r.at }

// Of returns the read's claims of one question.
func (r *Read) Of(question types.NamespacedName) []hitlv1.QuestionClaim {
	var out []hitlv1.QuestionClaim
	for i := range r.claims {
		if r.claims[i].Namespace == question.Namespace && r.claims[i].Spec.QuestionRef.Name == question.Name {
			out = append(out, r.claims[i])
		}
	}
	return out
}

func isDone(r *Read) bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}
