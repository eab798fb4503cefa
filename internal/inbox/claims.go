package inbox

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/hitl-dev/hitl/pkg/answerer"
)

// heldClaim is a claim the server holds for one open card of one person.
type heldClaim struct {
	id        string
	owner     string // Person.key()
	namespace string
	question  string
	claim     *answerer.Claim
	// seen is when the page last said that the card is open and its
	// person active.
	seen time.Time
}

// claimTable holds the claims of open cards. A page keeps each alive with
// heartbeats; one that stops (the tab closed, the person away) has its
// claim released after idle.
type claimTable struct {
	ctx  context.Context
	idle time.Duration
	log  logr.Logger

	mu     sync.Mutex
	claims map[string]*heldClaim
}

func newClaimTable(ctx context.Context, idle time.Duration, log logr.Logger) *claimTable {
	t := &claimTable{ctx: ctx, idle: idle, log: log, claims: map[string]*heldClaim{}}
	go t.sweep()
	return t
}

// find returns the claim a person holds on a question, if any.
func (t *claimTable) find(owner, namespace, question string) *heldClaim {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.claims {
		if c.owner == owner && c.namespace == namespace && c.question == question {
			c.seen = time.Now()
			return c
		}
	}
	return nil
}

func (t *claimTable) add(c *heldClaim) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.seen = time.Now()
	t.claims[c.id] = c
}

// touch records a heartbeat; it returns the claim, or nil when the person
// holds no claim of that id.
func (t *claimTable) touch(owner, id string) *heldClaim {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.claims[id]
	if c == nil || c.owner != owner {
		return nil
	}
	c.seen = time.Now()
	return c
}

// release closes the claim of that id if the person holds it.
func (t *claimTable) release(owner, id string) bool {
	t.mu.Lock()
	c := t.claims[id]
	if c == nil || c.owner != owner {
		t.mu.Unlock()
		return false
	}
	delete(t.claims, id)
	t.mu.Unlock()
	t.close(c)
	return true
}

// releaseQuestion closes the person's claims on a question (it was answered).
func (t *claimTable) releaseQuestion(owner, namespace, question string) {
	t.mu.Lock()
	var done []*heldClaim
	for id, c := range t.claims {
		if c.owner == owner && c.namespace == namespace && c.question == question {
			delete(t.claims, id)
			done = append(done, c)
		}
	}
	t.mu.Unlock()
	for _, c := range done {
		t.close(c)
	}
}

func (t *claimTable) releaseAll() {
	t.mu.Lock()
	all := t.claims
	t.claims = map[string]*heldClaim{}
	t.mu.Unlock()
	for _, c := range all {
		t.close(c)
	}
}

func (t *claimTable) close(c *heldClaim) {
	if err := c.claim.Close(); err != nil {
		t.log.Error(err, "Releasing a claim", "namespace", c.namespace, "question", c.question, "claim", c.claim.Name)
	}
}

// sweep releases the claims whose pages have gone quiet.
func (t *claimTable) sweep() {
	tick := time.NewTicker(max(t.idle/4, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		}
		t.mu.Lock()
		var idle []*heldClaim
		for id, c := range t.claims {
			if time.Since(c.seen) > t.idle {
				delete(t.claims, id)
				idle = append(idle, c)
			}
		}
		t.mu.Unlock()
		for _, c := range idle {
			t.log.V(1).Info("Releasing the claim of a card whose page went quiet", "namespace", c.namespace, "question", c.question)
			t.close(c)
		}
	}
}
