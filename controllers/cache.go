package controllers

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// lastAppliedAnnotation is where client-side `kubectl apply` (and GitOps
// tools using it) keeps a full copy of the applied object.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// CacheOptions keeps the manager's cache small: only the Leases that are
// claims, and each object without what the controller never reads (see
// trimForCache).
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: trimForCache,
		ByObject: map[client.Object]cache.ByObject{
			&coordinationv1.Lease{}: {Label: labels.SelectorFromSet(labels.Set{hitlv1.ClaimLabel: "true"})},
		},
	}
}

// trimForCache drops from an object, before the cache stores it, what the
// controller never reads: managedFields and the last-applied annotation of
// every object, and the answers and conditions of a reply whose outcome is
// final (Applied, Admitted, Rejected). A final outcome never changes, so
// such a reply is only ever compared by outcome, reason and message; the
// answers that settled a question live on in the question's status.
//
// Status writes are safe on trimmed objects: the API server keeps the
// stored metadata on a status update, and replies are written as merge
// patches of their status, only while their outcome is not final.
func trimForCache(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		if m.GetManagedFields() != nil { // setting nil on nil breaks some list types (kubernetes#124337)
			m.SetManagedFields(nil)
		}
		if a := m.GetAnnotations(); a[lastAppliedAnnotation] != "" {
			delete(a, lastAppliedAnnotation)
			m.SetAnnotations(a)
		}
	}
	if r, ok := obj.(*hitlv1.QuestionReply); ok && finalOutcome(r.Status.Outcome) {
		r.Spec.Answers = nil
		r.Status.Conditions = nil
	}
	return obj, nil
}

func finalOutcome(o hitlv1.ReplyOutcome) bool {
	return o == hitlv1.OutcomeApplied || o == hitlv1.OutcomeAdmitted || o == hitlv1.OutcomeRejected
}
