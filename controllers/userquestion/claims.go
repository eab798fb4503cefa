package userquestion

import (
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// claimTracker judges claim liveness from when the controller observed each
// renewal, never from the answerer's clock. It forgets everything on
// restart, so that every existing claim then counts as just renewed.
type claimTracker struct {
	mu        sync.Mutex
	questions map[types.NamespacedName]*questionClaims
}

type questionClaims struct {
	claims map[string]observation
	// heldUntil is the latest time a claim that is now gone or expired
	// was known to hold the window.
	heldUntil time.Time
}

type observation struct {
	resourceVersion string
	expiresAt       time.Time
}

func newClaimTracker() *claimTracker {
	return &claimTracker{questions: map[types.NamespacedName]*questionClaims{}}
}

// observe records question q's current claims at now and returns them
// judged, with the time until which past claims held the window. Only the
// claims that may hold q count (see QuestionClaim.Holds), and of those the
// first MaxClaims by name: a flood of claims costs the tracker no more
// than that per question.
func (t *claimTracker) observe(q *hitlv1.UserQuestion, all []hitlv1.QuestionClaim, now time.Time) ([]Claim, time.Time) {
	question := types.NamespacedName{Namespace: q.Namespace, Name: q.Name}
	held := make([]*hitlv1.QuestionClaim, 0, min(len(all), hitlv1.MaxClaims))
	for i := range all {
		if all[i].Holds(q) {
			held = append(held, &all[i])
		}
	}
	if len(held) > hitlv1.MaxClaims {
		sort.Slice(held, func(i, j int) bool { return held[i].Name < held[j].Name })
		held = held[:hitlv1.MaxClaims]
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	qc := t.questions[question]
	if qc == nil {
		if len(held) == 0 {
			return nil, time.Time{}
		}
		qc = &questionClaims{claims: map[string]observation{}}
		t.questions[question] = qc
	}

	seen := make(map[string]observation, len(held))
	claims := make([]Claim, 0, len(held))
	for _, c := range held {
		obs, known := qc.claims[c.Name]
		if !known || obs.resourceVersion != c.ResourceVersion {
			obs = observation{resourceVersion: c.ResourceVersion, expiresAt: now.Add(hitlv1.ClaimDuration(c))}
		}
		seen[c.Name] = obs
		claims = append(claims, Claim{Name: c.Name, Holder: c.Spec.Holder.Username, ExpiresAt: obs.expiresAt})
		if !obs.expiresAt.After(now) && obs.expiresAt.After(qc.heldUntil) {
			qc.heldUntil = obs.expiresAt
		}
	}
	for name, obs := range qc.claims {
		if _, still := seen[name]; !still {
			// A claim deleted while live held the window until now: just
			// past now, so that a read of the claims sent at this very
			// instant, which may predate the deletion, does not decide
			// the close (a clock that stands still, or a coarse one,
			// gives both the same time).
			end := obs.expiresAt
			if now.Before(end) {
				end = now.Add(time.Nanosecond)
			}
			if end.After(qc.heldUntil) {
				qc.heldUntil = end
			}
		}
	}
	qc.claims = seen
	return claims, qc.heldUntil
}

// live counts the claims currently live across all questions.
func (t *claimTracker) live(now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, qc := range t.questions {
		for _, obs := range qc.claims {
			if obs.expiresAt.After(now) {
				n++
			}
		}
	}
	return n
}

// forget drops what is known of a question's claims.
func (t *claimTracker) forget(question types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.questions, question)
}
