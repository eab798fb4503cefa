package admission

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/controllers/provenance"
	"github.com/hitl-dev/hitl/internal/access"
)

// +kubebuilder:webhook:path=/mutate-hitl-dev-v1alpha1-questionreply,mutating=true,failurePolicy=fail,sideEffects=None,groups=hitl.dev,resources=questionreplies,verbs=create,versions=v1alpha1,name=mquestionreply.hitl.dev,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-hitl-dev-v1alpha1-questionreply,mutating=false,failurePolicy=ignore,sideEffects=None,groups=hitl.dev,resources=questionreplies,verbs=create,versions=v1alpha1,name=vquestionreply.hitl.dev,admissionReviewVersions=v1,timeoutSeconds=3

// ReplyWebhook stamps QuestionReplies in webhook mode (as the reply-identity
// admission policy does in the default install), and checks them against
// their question for immediate feedback (failurePolicy Ignore: the
// controller repeats every check before it applies a reply).
type ReplyWebhook struct {
	// Client reads questions (from the cache) and creates SubjectAccessReviews.
	Client client.Client
	// APIReader reads a question the cache does not hold yet.
	APIReader client.Reader
}

// SetupWithManager registers the defaulting and validating webhooks.
func (w *ReplyWebhook) SetupWithManager(mgr ctrl.Manager) error {
	if w.APIReader == nil {
		w.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewWebhookManagedBy(mgr, &hitlv1.QuestionReply{}).WithDefaulter(w).WithValidator(w).Complete()
}

// Default stamps spec.answeredBy from the request's authenticated user,
// overwriting whatever the client sent, and sets the agent and question
// labels and an owner reference from the question.
func (w *ReplyWebhook) Default(ctx context.Context, r *hitlv1.QuestionReply) error {
	user, err := requestUser(ctx)
	if err != nil {
		return err
	}
	r.Spec.AnsweredBy = userInfo(user)

	q, err := w.question(ctx, r)
	if err != nil || q == nil {
		return err // a missing question is refused by the validator
	}
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	if _, set := r.Labels[hitlv1.AgentLabel]; !set {
		// A conflicting label is refused by the validators.
		r.Labels[hitlv1.AgentLabel] = q.Spec.Agent
	}
	r.Labels[hitlv1.QuestionLabel] = q.Name
	r.Adopt(q)
	return nil
}

// ValidateCreate refuses, in this order: a reply to a missing question
// (NOT_ANSWERABLE), from a user who may not answer the agent (FORBIDDEN),
// naming another agent (AGENT_MISMATCH), for a question of another UID
// (NOT_ANSWERABLE), from the identity that asked an Approval or PlanReview
// question (SELF_APPROVAL), to a Settled or Cancelled question
// (NOT_ANSWERABLE), while a reply is queued (REPLY_QUEUED), or with a bad
// batch (BAD_ANSWER). A reply that carries a GitOps engine's mark is not
// refused NOT_ANSWERABLE: the controller closes it.
func (w *ReplyWebhook) ValidateCreate(ctx context.Context, r *hitlv1.QuestionReply) (admission.Warnings, error) {
	q, err := w.question(ctx, r)
	if err != nil {
		return nil, err
	}
	// A reply a GitOps engine applies is never refused for its question
	// being finished or gone: its file outlives the question in Git, and a
	// refusal would turn the engine red at every sync. The controller
	// closes it instead (Closed, NOT_ANSWERABLE), healthy.
	fromGit := provenance.EngineOf(r) != nil
	if q == nil {
		if fromGit {
			return nil, nil
		}
		return nil, denial(r, hitlv1.CodeNotAnswerable, "spec.questionRef.name", "question %s does not exist in namespace %s", r.Spec.QuestionRef.Name, r.Namespace)
	}
	user, err := requestUser(ctx)
	if err != nil {
		return nil, err
	}
	allowed, _, err := access.Allowed(ctx, w.Client, subject(user), hitlv1.VerbAnswer, q.Namespace, q.Spec.Agent)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if !allowed {
		return nil, deny(r, access.ForbiddenAnswer(user.Username, q.Spec.Agent))
	}
	if label, set := r.Labels[hitlv1.AgentLabel]; set && label != q.Spec.Agent {
		return nil, denial(r, hitlv1.CodeAgentMismatch, "metadata.labels", "label %s=%q names another agent than question %s's %q", hitlv1.AgentLabel, label, q.Name, q.Spec.Agent)
	}
	if uid := r.Spec.QuestionRef.UID; uid != "" && uid != q.UID && !fromGit {
		return nil, denial(r, hitlv1.CodeNotAnswerable, "spec.questionRef.uid", "reply answers question %s with UID %s, not the live question's %s", q.Name, uid, q.UID)
	}
	if q.NeedsOtherApprover() && hitlv1.SameUser(userInfo(user), q.Spec.AskedBy) {
		return nil, denial(r, hitlv1.CodeSelfApproval, "spec.answeredBy", "%s asked question %s (spec.askedBy) and may not answer its own Approval or PlanReview question", user.Username, q.Name)
	}
	if code, why := hitlv1.Unanswerable(q.Name, &q.Spec, &q.Status); code != "" && (code != hitlv1.CodeNotAnswerable || !fromGit) {
		if code == hitlv1.CodeReplyQueued {
			why += "; withdraw it or wait for the agent to admit it"
		}
		return nil, denial(r, code, "spec.questionRef.name", "%s", why)
	}
	if err := validation.ValidateAnswers(q.Spec.Questions, r.Spec.Answers); err != nil {
		var broken *validation.Error
		if errors.As(err, &broken) {
			return nil, deny(r, broken)
		}
		return nil, err
	}
	return nil, nil
}

// ValidateUpdate allows updates: the CRD keeps the spec immutable.
func (w *ReplyWebhook) ValidateUpdate(context.Context, *hitlv1.QuestionReply, *hitlv1.QuestionReply) (admission.Warnings, error) {
	return nil, nil
}

// ValidateDelete allows every deletion: deleting a queued reply withdraws it.
func (w *ReplyWebhook) ValidateDelete(context.Context, *hitlv1.QuestionReply) (admission.Warnings, error) {
	return nil, nil
}

// question reads the reply's question from the cache, or from the API
// server when the cache does not hold it yet; nil when it does not exist.
// A name that no object can have (empty, "..", with a slash, ...) names no
// question; it is not looked up, as the API reader would refuse it with an
// error.
func (w *ReplyWebhook) question(ctx context.Context, r *hitlv1.QuestionReply) (*hitlv1.UserQuestion, error) {
	key := types.NamespacedName{Namespace: r.Namespace, Name: r.Spec.QuestionRef.Name}
	if len(utilvalidation.IsDNS1123Subdomain(key.Name)) > 0 {
		return nil, nil
	}
	q := &hitlv1.UserQuestion{}
	err := w.Client.Get(ctx, key, q)
	if apierrors.IsNotFound(err) {
		err = w.APIReader.Get(ctx, key, q)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, apierrors.NewInternalError(fmt.Errorf("reading question %s: %w", key.Name, err))
	}
	return q, nil
}
