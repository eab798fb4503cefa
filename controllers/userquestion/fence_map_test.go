package userquestion

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/controllers/claimreads"
)

// Only the manager's own fence is passed over: a tenant's claim of a
// question that happens to bear the fence's name is still observed.
func TestOnlyTheManagersFenceIsNotAClaimToObserve(t *testing.T) {
	r := &Reconciler{ClaimFenceNamespace: "hitl-system"}
	claim := func(ns string) *hitlv1.QuestionClaim {
		return &hitlv1.QuestionClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimreads.FenceName},
			Spec: hitlv1.QuestionClaimSpec{QuestionRef: hitlv1.QuestionReference{Name: claimreads.FenceName}}}
	}
	if got := r.claimQuestion(context.Background(), claim("hitl-system")); len(got) != 0 {
		t.Fatalf("the manager's fence enqueued %v", got)
	}
	got := r.claimQuestion(context.Background(), claim("team"))
	if len(got) != 1 || got[0].Namespace != "team" || got[0].Name != claimreads.FenceName {
		t.Fatalf("a tenant's claim enqueued %v, want its question team/%s", got, claimreads.FenceName)
	}
}
