package userquestion

import (
	"context"
	"strings"
	"sync"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// grantTTL is how long the controller reuses an authorizer's "allowed" for
// an author answering an agent. A revoked grant stops letting new replies
// through within it.
const grantTTL = 5 * time.Second

// grantRefreshAfter is how old a remembered "allowed" grows before the
// next reply by its author, still judged by it, also asks the authorizer
// again, off that reply's path: a person answering question after question
// never waits for a review while their grant holds, and a revocation is
// still seen within grantTTL.
const grantRefreshAfter = grantTTL / 2

// denialTTL is how long it reuses a "denied": a flood of refused replies
// from one author costs one SubjectAccessReview per denialTTL, and a new
// grant takes effect within it.
const denialTTL = 2 * time.Second

// maxGrants bounds the cache; past it, the cache starts afresh.
const maxGrants = 10000

// grantCache remembers, for a short while, which authors the API server's
// authorizer let answer which agents, so that a person answering one
// question after another costs one SubjectAccessReview every grantTTL
// instead of one per reply.
type grantCache struct {
	mu      sync.Mutex
	expires map[string]time.Time
	denials map[string]time.Time
	// inFlight are the reviews under way, by key: a burst of replies from
	// one author to many questions (a GitOps engine applying a merge)
	// judged at once costs one review, not one per worker.
	inFlight map[string]*review
	// refreshing are the keys whose refresh is under way.
	refreshing map[string]bool
}

// review is one SubjectAccessReview under way; done is closed when its
// answer is in.
type review struct {
	done    chan struct{}
	allowed bool
	err     error
}

func newGrantCache() *grantCache {
	return &grantCache{expires: map[string]time.Time{}, denials: map[string]time.Time{}, inFlight: map[string]*review{},
		refreshing: map[string]bool{}}
}

// shared returns ask's answer for key, asking only when no review of key is
// under way, else waiting for that one's answer: it started moments ago,
// fresher than the answers the cache reuses for grantTTL. ctx ending stops
// the wait.
func (c *grantCache) shared(ctx context.Context, key string, ask func() (bool, error)) (bool, error) {
	c.mu.Lock()
	if r, ok := c.inFlight[key]; ok {
		c.mu.Unlock()
		select {
		case <-r.done:
			return r.allowed, r.err
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	r := &review{done: make(chan struct{})}
	c.inFlight[key] = r
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.inFlight, key)
		c.mu.Unlock()
		close(r.done)
	}()
	r.allowed, r.err = ask()
	return r.allowed, r.err
}

// grantKey names an author (all of its stamped identity) answering agent in
// namespace.
func grantKey(by *hitlv1.UserInfo, namespace, agent string) string {
	return strings.Join(append([]string{by.Username, by.UID, namespace, agent}, by.Groups...), "\x00")
}

// allowed reports whether key was allowed less than grantTTL before now.
func (c *grantCache) allowed(key string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.expires[key]
	if ok && !now.Before(exp) {
		delete(c.expires, key)
		return false
	}
	return ok
}

// allow records that key was allowed at now.
func (c *grantCache) allow(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.expires) >= maxGrants {
		c.expires = map[string]time.Time{}
	}
	c.expires[key] = now.Add(grantTTL)
}

// refreshDue reports whether key's remembered grant, still valid, is at
// least grantRefreshAfter old with no refresh under way; it then counts
// one as under way until refreshed.
func (c *grantCache) refreshDue(key string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.expires[key]
	// A grant recorded at t expires at t+grantTTL.
	if !ok || !now.Before(exp) || c.refreshing[key] || exp.Sub(now) > grantTTL-grantRefreshAfter {
		return false
	}
	if len(c.refreshing) >= maxGrants {
		return false
	}
	c.refreshing[key] = true
	return true
}

// refreshed records a refresh's answer, asked at now: a grant renewed, a
// revocation remembered as a denial at once, an error leaving the grant to
// lapse at its time.
func (c *grantCache) refreshed(key string, allowed bool, err error, now time.Time) {
	c.mu.Lock()
	delete(c.refreshing, key)
	c.mu.Unlock()
	switch {
	case err != nil:
	case allowed:
		c.allow(key, now)
	default:
		c.mu.Lock()
		delete(c.expires, key)
		c.mu.Unlock()
		c.deny(key, now)
	}
}

// denied reports whether key was denied less than denialTTL before now.
func (c *grantCache) denied(key string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.denials[key]
	if ok && !now.Before(exp) {
		delete(c.denials, key)
		return false
	}
	return ok
}

// deny records that key was denied at now.
func (c *grantCache) deny(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.denials) >= maxGrants {
		c.denials = map[string]time.Time{}
	}
	c.denials[key] = now.Add(denialTTL)
}
