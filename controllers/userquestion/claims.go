package userquestion

import (
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
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
	leases map[string]observation
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

// observe records the question's current claim Leases at now and returns
// them judged, with the time until which past claims held the window.
func (t *claimTracker) observe(question types.NamespacedName, leases []coordinationv1.Lease, now time.Time) ([]Claim, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	qc := t.questions[question]
	if qc == nil {
		if len(leases) == 0 {
			return nil, time.Time{}
		}
		qc = &questionClaims{leases: map[string]observation{}}
		t.questions[question] = qc
	}

	seen := make(map[string]observation, len(leases))
	claims := make([]Claim, 0, len(leases))
	for i := range leases {
		l := &leases[i]
		obs, known := qc.leases[l.Name]
		if !known || obs.resourceVersion != l.ResourceVersion {
			obs = observation{resourceVersion: l.ResourceVersion, expiresAt: now.Add(leaseDuration(l))}
		}
		seen[l.Name] = obs
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		claims = append(claims, Claim{Lease: l.Name, Holder: holder, ExpiresAt: obs.expiresAt})
		if !obs.expiresAt.After(now) && obs.expiresAt.After(qc.heldUntil) {
			qc.heldUntil = obs.expiresAt
		}
	}
	for name, obs := range qc.leases {
		if _, still := seen[name]; !still {
			// A claim deleted while live held the window until now.
			end := obs.expiresAt
			if now.Before(end) {
				end = now
			}
			if end.After(qc.heldUntil) {
				qc.heldUntil = end
			}
		}
	}
	qc.leases = seen
	return claims, qc.heldUntil
}

// live counts the claims currently live across all questions.
func (t *claimTracker) live(now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, qc := range t.questions {
		for _, obs := range qc.leases {
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

func leaseDuration(l *coordinationv1.Lease) time.Duration {
	return hitlv1.ClaimLeaseDuration(l.Spec.LeaseDurationSeconds)
}
