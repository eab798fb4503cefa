package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// +kubebuilder:webhook:path=/mutate-hitl-dev-v1alpha1-userquestion,mutating=true,failurePolicy=fail,sideEffects=None,groups=hitl.dev,resources=userquestions,verbs=create;update,versions=v1alpha1,name=muserquestion.hitl.dev,admissionReviewVersions=v1,timeoutSeconds=5

// QuestionWebhook defaults UserQuestions in webhook mode, as the
// question-agent-label admission policy does in the default install. Who may
// ask, a conflicting label and the largest timeout are checked by the
// validating admission policies in both modes. It also refuses, on
// creation, an approval rule of the question's own (spec.approval) weaker
// than an ApprovalPolicy that governs it (POLICY_WEAKENED), as the
// question-approval admission policy does after it.
type QuestionWebhook struct {
	// Clock stamps spec.askedAt; nil means the real clock.
	Clock clock.PassiveClock
	// Client lists the ApprovalPolicies of a question's namespace (the
	// manager's client: from its cache). Without one a question with a
	// spec.approval is refused.
	Client client.Reader
}

// SetupWithManager registers the defaulting webhook.
func (w *QuestionWebhook) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &hitlv1.UserQuestion{}).WithDefaulter(w).Complete()
}

// Default sets the hitl.dev/agent label from spec.agent when it is missing
// (a conflicting label is left for the validating policy to refuse), and, on
// creation, stamps spec.askedAt with the time it saw the request when the
// client did not record one: a window measured from the whole-second
// creationTimestamp alone could close up to a second early. On creation it
// refuses a spec.approval weaker than a governing ApprovalPolicy
// (PolicyWeakened, on the labels as defaulted).
func (w *QuestionWebhook) Default(ctx context.Context, q *hitlv1.UserQuestion) error {
	if _, set := q.Labels[hitlv1.AgentLabel]; !set && q.Spec.Agent != "" {
		if q.Labels == nil {
			q.Labels = map[string]string{}
		}
		q.Labels[hitlv1.AgentLabel] = q.Spec.Agent
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("no admission request in context: %w", err))
	}
	switch req.Operation {
	case admissionv1.Create:
		if q.Spec.AskedAt == nil {
			q.Spec.AskedAt = ptr.To(metav1.NewMicroTime(w.now()))
		}
		q.Spec.AskedBy = userInfo(req.UserInfo)
		if q.Spec.Approval != nil {
			if err := w.checkApproval(ctx, req.Namespace, q); err != nil {
				return err
			}
		}
	case admissionv1.Update:
		// An update that leaves spec.askedBy out keeps the stamped one. A
		// stored question that does not decode keeps nothing here: the
		// CRD's rule refuses an update that drops spec.askedBy.
		old := &hitlv1.UserQuestion{}
		if q.Spec.AskedBy == nil && json.Unmarshal(req.OldObject.Raw, old) == nil {
			q.Spec.AskedBy = old.Spec.AskedBy
		}
	}
	return nil
}

// checkApproval refuses q when its spec.approval is weaker than an
// ApprovalPolicy of namespace ns (the request's) that governs it.
func (w *QuestionWebhook) checkApproval(ctx context.Context, ns string, q *hitlv1.UserQuestion) error {
	if ns == "" {
		ns = q.Namespace
	}
	if w.Client == nil {
		return apierrors.NewInternalError(errors.New("the question webhook has no client to read ApprovalPolicies with"))
	}
	var list hitlv1.ApprovalPolicyList
	if err := w.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("listing the ApprovalPolicies of namespace %s: %w", ns, err))
	}
	if weakened := PolicyWeakened(q, list.Items); weakened != nil {
		return validation.Denial(questionKind, q.Name, weakened)
	}
	return nil
}

// questionKind is the kind the question webhook's denials name.
var questionKind = hitlv1.GroupVersion.WithKind("UserQuestion").GroupKind()

func (w *QuestionWebhook) now() time.Time {
	if w.Clock == nil {
		return time.Now()
	}
	return w.Clock.Now()
}
