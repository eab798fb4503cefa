package userquestion

import (
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// seen is when the controller first observes the claims under test; times
// in these tests are written as seconds after it.
var seen = time.Date(2030, time.March, 4, 12, 0, 0, 0, time.UTC)

func seenPlus(n float64) time.Time { return seen.Add(time.Duration(n * float64(time.Second))) }

var (
	claimedQuestion = types.NamespacedName{Namespace: "agents", Name: "deploy-plan"}
	otherQuestion   = types.NamespacedName{Namespace: "agents", Name: "other-plan"}
)

// leaseBuilder builds a claim Lease:
//
//	aLease("inbox-alice").version("2").seconds(30)
type leaseBuilder struct{ l coordinationv1.Lease }

// aLease is a claim held by "inbox/<name>" for 30 seconds, at resourceVersion 1.
func aLease(name string) *leaseBuilder {
	holder := "inbox/" + name
	seconds := int32(30)
	return &leaseBuilder{l: coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: name, ResourceVersion: "1"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds},
	}}
}

func (b *leaseBuilder) version(rv string) *leaseBuilder { b.l.ResourceVersion = rv; return b }

func (b *leaseBuilder) seconds(n int32) *leaseBuilder { b.l.Spec.LeaseDurationSeconds = &n; return b }

func (b *leaseBuilder) noDuration() *leaseBuilder { b.l.Spec.LeaseDurationSeconds = nil; return b }

func (b *leaseBuilder) noHolder() *leaseBuilder { b.l.Spec.HolderIdentity = nil; return b }

// renewedByAnswerer sets the answerer's own renewTime, which the controller
// must not trust.
func (b *leaseBuilder) renewedByAnswerer(t time.Time) *leaseBuilder {
	at := metav1.NewMicroTime(t)
	b.l.Spec.RenewTime = &at
	return b
}

func leases(bs ...*leaseBuilder) []coordinationv1.Lease {
	out := []coordinationv1.Lease{}
	for _, b := range bs {
		out = append(out, *b.l.DeepCopy())
	}
	return out
}

// look is one observation of a question's claims and what it must judge.
type look struct {
	at     time.Time
	leases []coordinationv1.Lease
	claims []Claim
	held   time.Time
}

func TestClaimTrackerObserve(t *testing.T) {
	claim := func(lease string, expires time.Time) Claim {
		return Claim{Lease: lease, Holder: "inbox/" + lease, ExpiresAt: expires}
	}
	cases := []struct {
		name  string
		looks []look
	}{
		{
			name: "a claim seen for the first time counts as just renewed",
			looks: []look{
				{at: seenPlus(0), leases: leases(aLease("amy")), claims: []Claim{claim("amy", seenPlus(30))}},
			},
		},
		{
			name: "the answerer's renewTime is not trusted",
			looks: []look{
				{at: seenPlus(0), leases: leases(aLease("amy").renewedByAnswerer(seenPlus(-3600))), claims: []Claim{claim("amy", seenPlus(30))}},
			},
		},
		{
			name: "an unchanged resourceVersion keeps the old expiry",
			looks: []look{
				{at: seenPlus(0), leases: leases(aLease("amy")), claims: []Claim{claim("amy", seenPlus(30))}},
				{at: seenPlus(10), leases: leases(aLease("amy")), claims: []Claim{claim("amy", seenPlus(30))}},
			},
		},
		{
			name: "a new resourceVersion renews the claim from the time it is observed",
			looks: []look{
				{at: seenPlus(0), leases: leases(aLease("amy")), claims: []Claim{claim("amy", seenPlus(30))}},
				{at: seenPlus(20), leases: leases(aLease("amy").version("2")), claims: []Claim{claim("amy", seenPlus(50))}},
			},
		},
		{
			name: "a renewal with a new duration takes the new duration",
			looks: []look{
				{at: seenPlus(0), leases: leases(aLease("amy")), claims: []Claim{claim("amy", seenPlus(30))}},
				{at: seenPlus(10), leases: leases(aLease("amy").version("2").seconds(5)), claims: []Claim{claim("amy", seenPlus(15))}},
			},
		},
		{
			name: "an expired claim held the window until its expiry",
			looks: []look{
				{at: seenPlus(0), leases: leases(aLease("amy").seconds(5)), claims: []Claim{claim("amy", seenPlus(5))}},
				{at: seenPlus(4), leases: leases(aLease("amy").seconds(5)), claims: []Claim{claim("amy", seenPlus(5))}},
				{at: seenPlus(5), leases: leases(aLease("amy").seconds(5)), claims: []Claim{claim("amy", seenPlus(5))}, held: seenPlus(5)},
				{at: seenPlus(60), leases: leases(aLease("amy").seconds(5)), claims: []Claim{claim("amy", seenPlus(5))}, held: seenPlus(5)},
			},
		},
		{
			name: "an expired claim renewed again is live again, and the time it held the window stays",
			looks: []look{
				{at: seenPlus(0), leases: leases(aLease("amy").seconds(5)), claims: []Claim{claim("amy", seenPlus(5))}},
				{at: seenPlus(8), leases: leases(aLease("amy").seconds(5)), claims: []Claim{claim("amy", seenPlus(5))}, held: seenPlus(5)},
				{at: seenPlus(9), leases: leases(aLease("amy").seconds(5).version("2")), claims: []Claim{claim("amy", seenPlus(14))}, held: seenPlus(5)},
			},
		},
		{
			name: "a live claim deleted held the window until it was seen gone",
			looks: []look{
				{at: seenPlus(0), leases: leases(aLease("amy")), claims: []Claim{claim("amy", seenPlus(30))}},
				{at: seenPlus(10), leases: leases(), held: seenPlus(10)},
				{at: seenPlus(100), leases: leases(), held: seenPlus(10)},
			},
		},
		{
			name: "an expired claim deleted held the window until its expiry, not until it was seen gone",
			looks: []look{
				{at: seenPlus(0), leases: leases(aLease("amy").seconds(5)), claims: []Claim{claim("amy", seenPlus(5))}},
				{at: seenPlus(20), leases: leases(), held: seenPlus(5)},
			},
		},
		{
			name: "the time past claims held the window never moves back",
			looks: []look{
				{at: seenPlus(0), leases: leases(aLease("amy"), aLease("bob").seconds(5)),
					claims: []Claim{claim("amy", seenPlus(30)), claim("bob", seenPlus(5))}},
				{at: seenPlus(10), leases: leases(aLease("bob").seconds(5)), claims: []Claim{claim("bob", seenPlus(5))}, held: seenPlus(10)},
				{at: seenPlus(20), leases: leases(), held: seenPlus(10)},
			},
		},
		{
			name: "one claim deleted while another stays live",
			looks: []look{
				{at: seenPlus(0), leases: leases(aLease("amy"), aLease("bob").seconds(60)),
					claims: []Claim{claim("amy", seenPlus(30)), claim("bob", seenPlus(60))}},
				{at: seenPlus(10), leases: leases(aLease("bob").seconds(60)), claims: []Claim{claim("bob", seenPlus(60))}, held: seenPlus(10)},
			},
		},
		{
			name: "a claim without a holder is reported with an empty holder",
			looks: []look{
				{at: seenPlus(0), leases: leases(aLease("amy").noHolder()), claims: []Claim{{Lease: "amy", ExpiresAt: seenPlus(30)}}},
			},
		},
		{
			name: "a question without claims has none",
			looks: []look{
				{at: seenPlus(0), leases: leases()},
				{at: seenPlus(10), leases: nil},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newClaimTracker()
			for i, l := range tc.looks {
				claims, held := tr.observe(claimedQuestion, l.leases, l.at)
				if len(claims) != 0 || len(l.claims) != 0 {
					if !reflect.DeepEqual(claims, l.claims) {
						t.Errorf("look %d at %v: claims = %+v, want %+v", i, l.at.Sub(seen), claims, l.claims)
					}
				}
				if !held.Equal(l.held) {
					t.Errorf("look %d at %v: held until %v, want %v", i, l.at.Sub(seen), held, l.held)
				}
			}
		})
	}
}

func TestClaimTrackerLeaseDuration(t *testing.T) {
	cases := []struct {
		name  string
		lease *leaseBuilder
		want  time.Duration
	}{
		{"no duration counts as the shortest", aLease("amy").noDuration(), 5 * time.Second},
		{"a negative duration is clamped to 5s", aLease("amy").seconds(-3), 5 * time.Second},
		{"zero is clamped to 5s", aLease("amy").seconds(0), 5 * time.Second},
		{"4s is clamped to 5s", aLease("amy").seconds(4), 5 * time.Second},
		{"5s is kept", aLease("amy").seconds(5), 5 * time.Second},
		{"6s is kept", aLease("amy").seconds(6), 6 * time.Second},
		{"300s is kept", aLease("amy").seconds(300), 300 * time.Second},
		{"301s is clamped to 300s", aLease("amy").seconds(301), 300 * time.Second},
		{"a huge duration is clamped to 300s", aLease("amy").seconds(1 << 30), 300 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claims, _ := newClaimTracker().observe(claimedQuestion, leases(tc.lease), seen)
			if len(claims) != 1 {
				t.Fatalf("claims = %+v, want one", claims)
			}
			if got := claims[0].ExpiresAt.Sub(seen); got != tc.want {
				t.Errorf("expires %v after it was seen, want %v", got, tc.want)
			}
		})
	}
}

func TestClaimTrackerForget(t *testing.T) {
	tr := newClaimTracker()
	tr.observe(claimedQuestion, leases(aLease("amy").seconds(5)), seenPlus(0))
	tr.observe(otherQuestion, leases(aLease("amy").seconds(60)), seenPlus(0))
	if _, held := tr.observe(claimedQuestion, leases(), seenPlus(3)); !held.Equal(seenPlus(3)) {
		t.Fatalf("held until %v, want 3s", held.Sub(seen))
	}

	tr.forget(claimedQuestion)
	t.Run("the question's past claims are forgotten", func(t *testing.T) {
		if claims, held := tr.observe(claimedQuestion, nil, seenPlus(4)); len(claims) != 0 || !held.IsZero() {
			t.Errorf("observe after forget = %+v, held until %v; want no claims and no hold", claims, held)
		}
	})
	t.Run("a claim seen again after forget counts as just renewed", func(t *testing.T) {
		claims, _ := tr.observe(claimedQuestion, leases(aLease("amy").seconds(5)), seenPlus(10))
		if want := []Claim{{Lease: "amy", Holder: "inbox/amy", ExpiresAt: seenPlus(15)}}; !reflect.DeepEqual(claims, want) {
			t.Errorf("claims = %+v, want %+v", claims, want)
		}
	})
	t.Run("other questions are kept", func(t *testing.T) {
		claims, held := tr.observe(otherQuestion, leases(aLease("amy").seconds(60)), seenPlus(10))
		if want := []Claim{{Lease: "amy", Holder: "inbox/amy", ExpiresAt: seenPlus(60)}}; !reflect.DeepEqual(claims, want) || !held.IsZero() {
			t.Errorf("claims = %+v, held until %v; want %+v and no hold", claims, held, want)
		}
	})
	t.Run("forgetting an unknown question is harmless", func(t *testing.T) {
		tr.forget(types.NamespacedName{Namespace: "agents", Name: "never-seen"})
		if n := tr.live(seenPlus(10)); n != 2 {
			t.Errorf("live = %d, want 2", n)
		}
	})
}

func TestClaimTrackerLive(t *testing.T) {
	tr := newClaimTracker()
	if n := tr.live(seen); n != 0 {
		t.Fatalf("live on a new tracker = %d, want 0", n)
	}
	tr.observe(claimedQuestion, leases(aLease("amy"), aLease("bob").seconds(5)), seenPlus(0))
	// The same lease name on another question is another claim.
	tr.observe(otherQuestion, leases(aLease("amy").seconds(60)), seenPlus(2))

	cases := []struct {
		name string
		at   time.Time
		want int
	}{
		{"every claim is live after it was seen", seenPlus(3), 3},
		{"a claim is no longer live at its expiry", seenPlus(5), 2},
		{"claims of every question count", seenPlus(29), 2},
		{"the longest claim outlives the others", seenPlus(30), 1},
		{"none are live once all expired", seenPlus(62), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if n := tr.live(tc.at); n != tc.want {
				t.Errorf("live at %v = %d, want %d", tc.at.Sub(seen), n, tc.want)
			}
		})
	}

	t.Run("deleted and forgotten claims do not count", func(t *testing.T) {
		tr.observe(claimedQuestion, leases(aLease("bob").seconds(5)), seenPlus(4))
		if n := tr.live(seenPlus(4)); n != 2 {
			t.Errorf("live after amy's claim was deleted = %d, want 2", n)
		}
		tr.forget(otherQuestion)
		if n := tr.live(seenPlus(4)); n != 1 {
			t.Errorf("live after the other question was forgotten = %d, want 1", n)
		}
	})
}

func TestClaimTrackerKeepsNothingForQuestionsWithoutClaims(t *testing.T) {
	tr := newClaimTracker()
	claims, held := tr.observe(claimedQuestion, nil, seen)
	if claims != nil || !held.IsZero() || len(tr.questions) != 0 {
		t.Errorf("observe = %+v, held until %v, %d questions tracked; want nothing", claims, held, len(tr.questions))
	}
}
