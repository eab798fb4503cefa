package userquestion

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func TestGrantCacheForgetsAfterItsTTLAndKeysOnTheWholeIdentity(t *testing.T) {
	c := newGrantCache()
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	alice := &hitlv1.UserInfo{Username: "alice", UID: "u1", Groups: []string{"team"}}
	key := grantKey(alice, "ns", "bot")
	if c.allowed(key, t0) {
		t.Fatal("allowed before anything was recorded")
	}
	c.allow(key, t0)
	if !c.allowed(key, t0.Add(grantTTL-time.Millisecond)) {
		t.Fatal("forgotten before its TTL")
	}
	if c.allowed(key, t0.Add(grantTTL)) {
		t.Fatal("still allowed at its TTL")
	}
	c.allow(key, t0)
	for _, other := range []string{
		grantKey(&hitlv1.UserInfo{Username: "alice", UID: "u1", Groups: []string{"team", "admins"}}, "ns", "bot"),
		grantKey(&hitlv1.UserInfo{Username: "alice", UID: "u2", Groups: []string{"team"}}, "ns", "bot"),
		grantKey(alice, "other", "bot"),
		grantKey(alice, "ns", "other-bot"),
		grantKey(&hitlv1.UserInfo{Username: "alice\x00u1", Groups: []string{"team"}}, "ns", "bot"),
	} {
		if c.allowed(other, t0) {
			t.Errorf("another identity or agent shares alice's grant: %q", other)
		}
	}
}

func TestGrantCacheStaysBounded(t *testing.T) {
	c := newGrantCache()
	t0 := time.Now()
	for i := range maxGrants + 10 {
		c.allow(grantKey(&hitlv1.UserInfo{Username: string(rune('a' + i%26)), UID: time.Duration(i).String()}, "ns", "bot"), t0)
	}
	if n := len(c.expires); n > maxGrants {
		t.Fatalf("%d entries, more than %d", n, maxGrants)
	}
}

func TestGrantCacheRemembersADenialForDenialTTL(t *testing.T) {
	c := newGrantCache()
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	mallory := grantKey(&hitlv1.UserInfo{Username: "mallory", UID: "u9"}, "ns", "bot")
	if c.denied(mallory, t0) {
		t.Fatal("denied before anything was recorded")
	}
	c.deny(mallory, t0)
	if !c.denied(mallory, t0.Add(denialTTL-time.Millisecond)) {
		t.Fatal("a denial forgotten before its TTL")
	}
	if c.allowed(mallory, t0) {
		t.Fatal("a denial reads as a grant")
	}
	if c.denied(mallory, t0.Add(denialTTL)) {
		t.Fatal("still denied at its TTL: a new grant would never take effect")
	}
	if c.denied(mallory, t0) {
		t.Fatal("an expired denial is still kept")
	}
	if denialTTL >= grantTTL {
		t.Errorf("denialTTL %s is not shorter than grantTTL %s: a new grant would wait longer than a revocation", denialTTL, grantTTL)
	}

	c.deny(mallory, t0)
	for _, other := range []string{
		grantKey(&hitlv1.UserInfo{Username: "mallory", UID: "u9", Groups: []string{"answerers"}}, "ns", "bot"),
		grantKey(&hitlv1.UserInfo{Username: "mallory", UID: "u10"}, "ns", "bot"),
		grantKey(&hitlv1.UserInfo{Username: "mallory", UID: "u9"}, "other", "bot"),
		grantKey(&hitlv1.UserInfo{Username: "mallory", UID: "u9"}, "ns", "other-bot"),
	} {
		if c.denied(other, t0) {
			t.Errorf("another identity or agent shares mallory's denial: %q", other)
		}
	}
}

func TestGrantCacheDenialsStayBounded(t *testing.T) {
	c := newGrantCache()
	t0 := time.Now()
	for i := range maxGrants + 10 {
		c.deny(grantKey(&hitlv1.UserInfo{Username: "flood", UID: time.Duration(i).String()}, "ns", "bot"), t0)
	}
	if n := len(c.denials); n > maxGrants {
		t.Fatalf("%d denials kept, more than %d", n, maxGrants)
	}
}

func TestGrantReviewsUnderWayAreShared(t *testing.T) {
	// In a bubble, synctest.Wait returns once every goroutine waits: the
	// workers have joined the review before it answers.
	synctest.Test(t, func(t *testing.T) {
		c := newGrantCache()
		key := grantKey(&hitlv1.UserInfo{Username: "system:serviceaccount:team-a:gitops"}, "agents", "release-bot")
		var asked atomic.Int32
		release := make(chan struct{})
		ask := func() (bool, error) {
			asked.Add(1)
			<-release
			return true, nil
		}
		const workers = 8
		answers := make(chan bool, workers)
		for range workers {
			go func() {
				allowed, _ := c.shared(t.Context(), key, ask)
				answers <- allowed
			}()
		}
		synctest.Wait()
		close(release)
		for range workers {
			if !<-answers {
				t.Fatal("a worker that joined the review did not get its answer")
			}
		}
		if n := asked.Load(); n != 1 {
			t.Fatalf("%d reviews for %d workers judging one author at once, want 1", n, workers)
		}
		// Once answered, the next review is a new one.
		if allowed, err := c.shared(t.Context(), key, func() (bool, error) { return false, nil }); allowed || err != nil {
			t.Fatalf("a review after the shared one answered: %t, %v; want its own answer, false", allowed, err)
		}
	})
}

func TestAGrantReviewWaiterStopsWithItsContext(t *testing.T) {
	c := newGrantCache()
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	go func() {
		_, _ = c.shared(t.Context(), "k", func() (bool, error) { close(started); <-release; return true, nil })
	}()
	<-started
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.shared(ctx, "k", func() (bool, error) { return true, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose context ended got %v, want context.Canceled", err)
	}
}

func TestGrantCacheAsksAgainAheadOfItsTTLOnceAndHonoursTheAnswer(t *testing.T) {
	c := newGrantCache()
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	key := grantKey(&hitlv1.UserInfo{Username: "alice", UID: "u1"}, "ns", "bot")
	if c.refreshDue(key, t0) {
		t.Fatal("a refresh is due for a grant never recorded")
	}
	c.allow(key, t0)
	if c.refreshDue(key, t0.Add(grantRefreshAfter-time.Millisecond)) {
		t.Fatal("a refresh is due before grantRefreshAfter")
	}
	at := t0.Add(grantRefreshAfter)
	if !c.refreshDue(key, at) {
		t.Fatal("no refresh due at grantRefreshAfter")
	}
	if c.refreshDue(key, at.Add(time.Millisecond)) {
		t.Fatal("a second refresh is due while the first is under way")
	}
	c.refreshed(key, true, nil, at)
	if !c.allowed(key, at.Add(grantTTL-time.Millisecond)) {
		t.Fatal("a grant the refresh confirmed lapsed at the old TTL")
	}

	// A refresh that fails keeps the grant's expiry and may be tried again.
	at2 := at.Add(grantRefreshAfter)
	if !c.refreshDue(key, at2) {
		t.Fatal("no refresh due after the last one's grantRefreshAfter")
	}
	c.refreshed(key, false, errors.New("the API server is away"), at2)
	if !c.allowed(key, at.Add(grantTTL-time.Millisecond)) || c.allowed(key, at.Add(grantTTL)) {
		t.Fatal("a failed refresh changed the grant's expiry")
	}
	c.allow(key, at2)

	// A refresh that finds the grant revoked ends it at once.
	at3 := at2.Add(grantRefreshAfter)
	if !c.refreshDue(key, at3) {
		t.Fatal("no refresh due")
	}
	c.refreshed(key, false, nil, at3)
	if c.allowed(key, at3) {
		t.Fatal("a grant the refresh found revoked is still allowed")
	}
	if !c.denied(key, at3) {
		t.Fatal("a grant the refresh found revoked is not remembered as denied")
	}
}
