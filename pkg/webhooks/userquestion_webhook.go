package webhooks

import (
	"context"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/validation"
)

// +kubebuilder:webhook:path=/mutate-hitl-dev-v1alpha1-userquestion,mutating=true,failurePolicy=fail,sideEffects=None,groups=hitl.dev,resources=userquestions,verbs=create;update,versions=v1alpha1,name=muserquestion.hitl.dev,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-hitl-dev-v1alpha1-userquestion,mutating=false,failurePolicy=fail,sideEffects=None,groups=hitl.dev,resources=userquestions,verbs=create;update,versions=v1alpha1,name=vuserquestion.hitl.dev,admissionReviewVersions=v1,timeoutSeconds=5

// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// QuestionWebhook defaults and checks UserQuestions.
type QuestionWebhook struct {
	// Client creates SubjectAccessReviews.
	Client client.Client
	// Reader reads ServiceAccounts, around the cache, which need not hold them all.
	Reader client.Reader
	// MaxTimeout is the largest spec.timeout accepted.
	MaxTimeout time.Duration
	// Clock stamps spec.askedAt; nil means the real clock.
	Clock clock.PassiveClock
}

// SetupWithManager registers the defaulting and validating webhooks.
func (w *QuestionWebhook) SetupWithManager(mgr ctrl.Manager) error {
	if w.Reader == nil {
		w.Reader = mgr.GetAPIReader()
	}
	return ctrl.NewWebhookManagedBy(mgr, &hitlv1.UserQuestion{}).WithDefaulter(w).WithValidator(w).Complete()
}

// Default sets the hitl.dev/agent label from spec.agent when it is missing
// (a conflicting label is left for the validator to refuse), and, on
// creation, stamps spec.askedAt with the time it saw the request when the
// client did not record one: a window measured from the whole-second
// creationTimestamp alone could close up to a second early.
func (w *QuestionWebhook) Default(ctx context.Context, q *hitlv1.UserQuestion) error {
	if _, set := q.Labels[hitlv1.AgentLabel]; !set && q.Spec.Agent != "" {
		if q.Labels == nil {
			q.Labels = map[string]string{}
		}
		q.Labels[hitlv1.AgentLabel] = q.Spec.Agent
	}
	if req, err := admission.RequestFromContext(ctx); err == nil && req.Operation == admissionv1.Create && q.Spec.AskedAt == nil {
		q.Spec.AskedAt = ptr.To(metav1.NewMicroTime(w.now()))
	}
	return nil
}

func (w *QuestionWebhook) now() time.Time {
	if w.Clock == nil {
		return time.Now()
	}
	return w.Clock.Now()
}

// ValidateCreate checks the ask and that its creator may ask as spec.agent.
func (w *QuestionWebhook) ValidateCreate(ctx context.Context, q *hitlv1.UserQuestion) (admission.Warnings, error) {
	if err := checkAgentLabel(q); err != nil {
		return nil, err
	}
	if err := validation.ValidateAsk(&q.Spec, w.MaxTimeout); err != nil {
		return nil, err
	}
	return nil, w.mayAsk(ctx, q.Namespace, q.Spec.Agent)
}

// ValidateUpdate keeps the agent label true; the CRD keeps the spec immutable.
func (w *QuestionWebhook) ValidateUpdate(_ context.Context, _, q *hitlv1.UserQuestion) (admission.Warnings, error) {
	return nil, checkAgentLabel(q)
}

// ValidateDelete allows every deletion.
func (w *QuestionWebhook) ValidateDelete(context.Context, *hitlv1.UserQuestion) (admission.Warnings, error) {
	return nil, nil
}

func checkAgentLabel(q *hitlv1.UserQuestion) error {
	if label, set := q.Labels[hitlv1.AgentLabel]; set && label != q.Spec.Agent {
		return denial(hitlv1.CodeAgentMismatch, "label %s=%q conflicts with spec.agent %q", hitlv1.AgentLabel, label, q.Spec.Agent)
	}
	return nil
}

// mayAsk allows a ServiceAccount of the question's own namespace to ask as
// the agent its hitl.dev/agent annotation names, or, without one, as its own
// name; everyone else (a ServiceAccount of another namespace, or asking as
// another agent) needs RBAC verb "ask" on agents/<agent>.
func (w *QuestionWebhook) mayAsk(ctx context.Context, namespace, agent string) error {
	user, err := requestUser(ctx)
	if err != nil {
		return err
	}
	if saNamespace, saName, ok := serviceAccount(user.Username); ok && saNamespace == namespace {
		var sa corev1.ServiceAccount
		err := w.Reader.Get(ctx, types.NamespacedName{Namespace: saNamespace, Name: saName}, &sa)
		switch {
		case err == nil:
			own, annotated := sa.Annotations[hitlv1.AgentAnnotation]
			if !annotated {
				own = saName
			}
			if own == agent {
				return nil
			}
		case !apierrors.IsNotFound(err):
			return apierrors.NewInternalError(err)
		}
	}
	allowed, err := authorizer{w.Client}.allowed(ctx, user, VerbAsk, namespace, agent)
	if err != nil {
		return err
	}
	if !allowed {
		return denial(hitlv1.CodeAgentMismatch, "user %q may not ask as agent %q (spec.agent) in namespace %s: a ServiceAccount of the question's namespace asks as its %s annotation or its own name; others need RBAC verb %q on %s.%s/%s",
			user.Username, agent, namespace, hitlv1.AgentAnnotation, VerbAsk, AgentsResource, hitlv1.GroupVersion.Group, agent)
	}
	return nil
}
