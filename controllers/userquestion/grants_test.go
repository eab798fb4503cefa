package userquestion

import (
	"testing"
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
