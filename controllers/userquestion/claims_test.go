package userquestion

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// seen is when the controller first observes the claims under test; times
// in these tests are written as seconds after it.
var seen = time.Date(2030, time.March, 4, 12, 0, 0, 0, time.UTC)

func seenPlus(n float64) time.Time { return seen.Add(time.Duration(n * float64(time.Second))) }

// claimedQuestion and otherQuestion are the questions the claims under
// test name: both of agent "coder", in namespace "agents".
var (
	claimedQuestion = claimable("deploy-plan")
	otherQuestion   = claimable("other-plan")
)

func claimable(name string) *hitlv1.UserQuestion {
	return &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: name, UID: types.UID("uid-" + name)},
		Spec:       hitlv1.UserQuestionSpec{Agent: "coder"},
	}
}

func keyOf(q *hitlv1.UserQuestion) types.NamespacedName {
	return types.NamespacedName{Namespace: q.Namespace, Name: q.Name}
}

// claimBuilder builds a QuestionClaim:
//
//	aClaim("amy").version("2").seconds(30).on(otherQuestion)
type claimBuilder struct{ c hitlv1.QuestionClaim }

// aClaim is a claim on claimedQuestion held by "inbox/<name>" (as
// admission stamps it) for 30 seconds, at resourceVersion 1.
func aClaim(name string) *claimBuilder {
	return &claimBuilder{c: hitlv1.QuestionClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: name, ResourceVersion: "1"},
		Spec: hitlv1.QuestionClaimSpec{
			QuestionRef:     hitlv1.QuestionReference{Name: claimedQuestion.Name},
			Agent:           claimedQuestion.Spec.Agent,
			Holder:          &hitlv1.UserInfo{Username: "inbox/" + name, UID: "uid-" + name},
			DurationSeconds: 30,
		},
	}}
}

// on makes it a claim on q.
func (b *claimBuilder) on(q *hitlv1.UserQuestion) *claimBuilder {
	b.c.Namespace, b.c.Spec.QuestionRef.Name, b.c.Spec.Agent = q.Namespace, q.Name, q.Spec.Agent
	return b
}

func (b *claimBuilder) version(rv string) *claimBuilder { b.c.ResourceVersion = rv; return b }

func (b *claimBuilder) seconds(n int32) *claimBuilder { b.c.Spec.DurationSeconds = n; return b }

// noDuration leaves spec.durationSeconds unset, which the CRD forbids.
func (b *claimBuilder) noDuration() *claimBuilder { b.c.Spec.DurationSeconds = 0; return b }

// noHolder leaves spec.holder unset, as a claim admitted without hitl's
// admission would.
func (b *claimBuilder) noHolder() *claimBuilder { b.c.Spec.Holder = nil; return b }

func (b *claimBuilder) holder(u *hitlv1.UserInfo) *claimBuilder { b.c.Spec.Holder = u; return b }

func (b *claimBuilder) agent(agent string) *claimBuilder { b.c.Spec.Agent = agent; return b }

func (b *claimBuilder) questionUID(uid types.UID) *claimBuilder {
	b.c.Spec.QuestionRef.UID = uid
	return b
}

func (b *claimBuilder) namespace(ns string) *claimBuilder { b.c.Namespace = ns; return b }

// renewedByAnswerer sets the answerer's own renewTime, which the controller
// must not trust.
func (b *claimBuilder) renewedByAnswerer(t time.Time) *claimBuilder {
	at := metav1.NewMicroTime(t)
	b.c.Spec.RenewTime = &at
	return b
}

func claims(bs ...*claimBuilder) []hitlv1.QuestionClaim {
	out := []hitlv1.QuestionClaim{}
	for _, b := range bs {
		out = append(out, *b.c.DeepCopy())
	}
	return out
}

// look is one observation of a question's claims and what it must judge.
type look struct {
	at     time.Time
	claims []hitlv1.QuestionClaim
	judged []Claim
	held   time.Time
}

func TestClaimTrackerObserve(t *testing.T) {
	claim := func(name string, expires time.Time) Claim {
		return Claim{Name: name, Holder: "inbox/" + name, ExpiresAt: expires}
	}
	cases := []struct {
		name  string
		looks []look
	}{
		{
			name: "a claim seen for the first time counts as just renewed",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy")), judged: []Claim{claim("amy", seenPlus(30))}},
			},
		},
		{
			name: "the answerer's renewTime is not trusted",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy").renewedByAnswerer(seenPlus(-3600))), judged: []Claim{claim("amy", seenPlus(30))}},
			},
		},
		{
			name: "an unchanged resourceVersion keeps the old expiry",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy")), judged: []Claim{claim("amy", seenPlus(30))}},
				{at: seenPlus(10), claims: claims(aClaim("amy")), judged: []Claim{claim("amy", seenPlus(30))}},
			},
		},
		{
			name: "a new resourceVersion renews the claim from the time it is observed",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy")), judged: []Claim{claim("amy", seenPlus(30))}},
				{at: seenPlus(20), claims: claims(aClaim("amy").version("2")), judged: []Claim{claim("amy", seenPlus(50))}},
			},
		},
		{
			name: "a renewal with a new duration takes the new duration",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy")), judged: []Claim{claim("amy", seenPlus(30))}},
				{at: seenPlus(10), claims: claims(aClaim("amy").version("2").seconds(5)), judged: []Claim{claim("amy", seenPlus(15))}},
			},
		},
		{
			name: "an expired claim held the window until its expiry",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy").seconds(5)), judged: []Claim{claim("amy", seenPlus(5))}},
				{at: seenPlus(4), claims: claims(aClaim("amy").seconds(5)), judged: []Claim{claim("amy", seenPlus(5))}},
				{at: seenPlus(5), claims: claims(aClaim("amy").seconds(5)), judged: []Claim{claim("amy", seenPlus(5))}, held: seenPlus(5)},
				{at: seenPlus(60), claims: claims(aClaim("amy").seconds(5)), judged: []Claim{claim("amy", seenPlus(5))}, held: seenPlus(5)},
			},
		},
		{
			name: "an expired claim renewed again is live again, and the time it held the window stays",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy").seconds(5)), judged: []Claim{claim("amy", seenPlus(5))}},
				{at: seenPlus(8), claims: claims(aClaim("amy").seconds(5)), judged: []Claim{claim("amy", seenPlus(5))}, held: seenPlus(5)},
				{at: seenPlus(9), claims: claims(aClaim("amy").seconds(5).version("2")), judged: []Claim{claim("amy", seenPlus(14))}, held: seenPlus(5)},
			},
		},
		{
			name: "a live claim deleted held the window until it was seen gone",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy")), judged: []Claim{claim("amy", seenPlus(30))}},
				{at: seenPlus(10), claims: claims(), held: seenGone(10)},
				{at: seenPlus(100), claims: claims(), held: seenGone(10)},
			},
		},
		{
			name: "an expired claim deleted held the window until its expiry, not until it was seen gone",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy").seconds(5)), judged: []Claim{claim("amy", seenPlus(5))}},
				{at: seenPlus(20), claims: claims(), held: seenPlus(5)},
			},
		},
		{
			name: "the time past claims held the window never moves back",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy"), aClaim("bob").seconds(5)),
					judged: []Claim{claim("amy", seenPlus(30)), claim("bob", seenPlus(5))}},
				{at: seenPlus(10), claims: claims(aClaim("bob").seconds(5)), judged: []Claim{claim("bob", seenPlus(5))}, held: seenGone(10)},
				{at: seenPlus(20), claims: claims(), held: seenGone(10)},
			},
		},
		{
			name: "one claim deleted while another stays live",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy"), aClaim("bob").seconds(60)),
					judged: []Claim{claim("amy", seenPlus(30)), claim("bob", seenPlus(60))}},
				{at: seenPlus(10), claims: claims(aClaim("bob").seconds(60)), judged: []Claim{claim("bob", seenPlus(60))}, held: seenGone(10)},
			},
		},
		{
			name: "a claim without a holder holds nothing",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy").noHolder())},
			},
		},
		{
			name: "a claim whose holder has no username holds nothing",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy").holder(&hitlv1.UserInfo{UID: "uid-amy"}))},
			},
		},
		{
			name: "a claim naming another agent than the question's holds nothing",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy").agent("other-bot"), aClaim("bob")),
					judged: []Claim{claim("bob", seenPlus(30))}},
			},
		},
		{
			name: "a claim naming another question of the same name (another UID) holds nothing",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy").questionUID("uid-earlier"), aClaim("bob").questionUID(claimedQuestion.UID)),
					judged: []Claim{claim("bob", seenPlus(30))}},
			},
		},
		{
			name: "a claim on another question, or in another namespace, holds nothing",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy").on(otherQuestion), aClaim("bob").namespace("elsewhere"))},
			},
		},
		{
			name: "a claim that holds nothing never held the window: it leaves no hold when it goes",
			looks: []look{
				{at: seenPlus(0), claims: claims(aClaim("amy").agent("other-bot"))},
				{at: seenPlus(10), claims: claims()},
			},
		},
		{
			name: "a question without claims has none",
			looks: []look{
				{at: seenPlus(0), claims: claims()},
				{at: seenPlus(10), claims: nil},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newClaimTracker()
			for i, l := range tc.looks {
				judged, held := tr.observe(claimedQuestion, l.claims, l.at)
				if len(judged) != 0 || len(l.judged) != 0 {
					if !reflect.DeepEqual(judged, l.judged) {
						t.Errorf("look %d at %v: claims = %+v, want %+v", i, l.at.Sub(seen), judged, l.judged)
					}
				}
				if !held.Equal(l.held) {
					t.Errorf("look %d at %v: held until %v, want %v", i, l.at.Sub(seen), held, l.held)
				}
			}
		})
	}
}

func TestClaimTrackerClaimDuration(t *testing.T) {
	cases := []struct {
		name  string
		claim *claimBuilder
		want  time.Duration
	}{
		{"no duration counts as the shortest", aClaim("amy").noDuration(), 5 * time.Second},
		{"a negative duration is clamped to 5s", aClaim("amy").seconds(-3), 5 * time.Second},
		{"4s is clamped to 5s", aClaim("amy").seconds(4), 5 * time.Second},
		{"5s is kept", aClaim("amy").seconds(5), 5 * time.Second},
		{"6s is kept", aClaim("amy").seconds(6), 6 * time.Second},
		{"300s is kept", aClaim("amy").seconds(300), 300 * time.Second},
		{"301s is clamped to 300s", aClaim("amy").seconds(301), 300 * time.Second},
		{"a huge duration is clamped to 300s", aClaim("amy").seconds(1 << 30), 300 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			judged, _ := newClaimTracker().observe(claimedQuestion, claims(tc.claim), seen)
			if len(judged) != 1 {
				t.Fatalf("claims = %+v, want one", judged)
			}
			if got := judged[0].ExpiresAt.Sub(seen); got != tc.want {
				t.Errorf("expires %v after it was seen, want %v", got, tc.want)
			}
		})
	}
}

// A flood of claims on one question costs the tracker (and the status) no
// more than MaxClaims: the first by name of those that hold the question,
// whatever the others are.
func TestClaimTrackerCountsAtMostMaxClaimsPerQuestion(t *testing.T) {
	flood := func(q *hitlv1.UserQuestion) []hitlv1.QuestionClaim {
		var bs []*claimBuilder
		// Claims that hold nothing sort first: they take no place.
		for i := range 20 {
			bs = append(bs, aClaim(fmt.Sprintf("a-%03d", i)).on(q).agent("other-bot"))
		}
		for i := 99; i >= 0; i-- {
			bs = append(bs, aClaim(fmt.Sprintf("c-%03d", i)).on(q))
		}
		return claims(bs...)
	}
	tr := newClaimTracker()
	judged, _ := tr.observe(claimedQuestion, flood(claimedQuestion), seen)
	if len(judged) != hitlv1.MaxClaims {
		t.Fatalf("%d of 100 claims judged, want %d", len(judged), hitlv1.MaxClaims)
	}
	names := map[string]bool{}
	for _, c := range judged {
		names[c.Name] = true
	}
	for i := range hitlv1.MaxClaims {
		if name := fmt.Sprintf("c-%03d", i); !names[name] {
			t.Errorf("claim %s, among the first %d by name, was not judged: %v", name, hitlv1.MaxClaims, names)
		}
	}
	if n := len(tr.questions[keyOf(claimedQuestion)].claims); n != hitlv1.MaxClaims {
		t.Errorf("the tracker keeps %d claims of one question, want %d", n, hitlv1.MaxClaims)
	}
	tr.observe(otherQuestion, flood(otherQuestion), seen)
	if n := tr.live(seen); n != 2*hitlv1.MaxClaims {
		t.Errorf("live = %d for two flooded questions, want %d", n, 2*hitlv1.MaxClaims)
	}

	t.Run("the decision counts what the tracker judged", func(t *testing.T) {
		d := Decide(Inputs{Question: claimedQuestion.DeepCopy(), Claims: judged, Now: seen})
		if d.Status.ClaimCount != hitlv1.MaxClaims || len(d.Status.Claims) != hitlv1.MaxClaims ||
			d.Status.Claims[0].Name != "c-000" || d.Status.Claims[hitlv1.MaxClaims-1].Name != "c-063" {
			t.Errorf("claimCount %d, claims %s; want %d claims, c-000 to c-063", d.Status.ClaimCount, dump(d.Status.Claims), hitlv1.MaxClaims)
		}
	})
}

func TestClaimTrackerForget(t *testing.T) {
	tr := newClaimTracker()
	tr.observe(claimedQuestion, claims(aClaim("amy").seconds(5)), seenPlus(0))
	tr.observe(otherQuestion, claims(aClaim("amy").seconds(60).on(otherQuestion)), seenPlus(0))
	if _, held := tr.observe(claimedQuestion, claims(), seenPlus(3)); !held.Equal(seenGone(3)) {
		t.Fatalf("held until %v, want 3s", held.Sub(seen))
	}

	tr.forget(keyOf(claimedQuestion))
	t.Run("the question's past claims are forgotten", func(t *testing.T) {
		if judged, held := tr.observe(claimedQuestion, nil, seenPlus(4)); len(judged) != 0 || !held.IsZero() {
			t.Errorf("observe after forget = %+v, held until %v; want no claims and no hold", judged, held)
		}
	})
	t.Run("a claim seen again after forget counts as just renewed", func(t *testing.T) {
		judged, _ := tr.observe(claimedQuestion, claims(aClaim("amy").seconds(5)), seenPlus(10))
		if want := []Claim{{Name: "amy", Holder: "inbox/amy", ExpiresAt: seenPlus(15)}}; !reflect.DeepEqual(judged, want) {
			t.Errorf("claims = %+v, want %+v", judged, want)
		}
	})
	t.Run("other questions are kept", func(t *testing.T) {
		judged, held := tr.observe(otherQuestion, claims(aClaim("amy").seconds(60).on(otherQuestion)), seenPlus(10))
		if want := []Claim{{Name: "amy", Holder: "inbox/amy", ExpiresAt: seenPlus(60)}}; !reflect.DeepEqual(judged, want) || !held.IsZero() {
			t.Errorf("claims = %+v, held until %v; want %+v and no hold", judged, held, want)
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
	tr.observe(claimedQuestion, claims(aClaim("amy"), aClaim("bob").seconds(5)), seenPlus(0))
	// The same claim name on another question is another claim.
	tr.observe(otherQuestion, claims(aClaim("amy").seconds(60).on(otherQuestion)), seenPlus(2))

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
		tr.observe(claimedQuestion, claims(aClaim("bob").seconds(5)), seenPlus(4))
		if n := tr.live(seenPlus(4)); n != 2 {
			t.Errorf("live after amy's claim was deleted = %d, want 2", n)
		}
		tr.forget(keyOf(otherQuestion))
		if n := tr.live(seenPlus(4)); n != 1 {
			t.Errorf("live after the other question was forgotten = %d, want 1", n)
		}
	})
}

func TestClaimTrackerKeepsNothingForQuestionsWithoutClaims(t *testing.T) {
	for name, given := range map[string][]hitlv1.QuestionClaim{
		"no claims":                   nil,
		"only claims holding nothing": claims(aClaim("amy").noHolder(), aClaim("bob").agent("other-bot")),
	} {
		t.Run(name, func(t *testing.T) {
			tr := newClaimTracker()
			judged, held := tr.observe(claimedQuestion, given, seen)
			if judged != nil || !held.IsZero() || len(tr.questions) != 0 {
				t.Errorf("observe = %+v, held until %v, %d questions tracked; want nothing", judged, held, len(tr.questions))
			}
		})
	}
}

// seenGone is when a live claim deleted, and seen gone n seconds after
// seen, held the window until: just past that instant, so that a claim
// read sent at it does not decide.
func seenGone(n float64) time.Time { return seenPlus(n).Add(time.Nanosecond) }
