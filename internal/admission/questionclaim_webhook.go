package admission

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// +kubebuilder:webhook:path=/mutate-hitl-dev-v1alpha1-questionclaim,mutating=true,failurePolicy=fail,sideEffects=None,groups=hitl.dev,resources=questionclaims,verbs=create;update,versions=v1alpha1,name=mquestionclaim.hitl.dev,admissionReviewVersions=v1,timeoutSeconds=5

// ClaimWebhook stamps QuestionClaims in webhook mode, as the claim-holder
// admission policy does in the default install; the claim-identity and
// claim-owner policies check them in both modes.
type ClaimWebhook struct{}

// SetupWithManager registers the defaulting webhook.
func (w *ClaimWebhook) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &hitlv1.QuestionClaim{}).WithDefaulter(w).Complete()
}

// Default stamps spec.holder from the request's authenticated user on every
// create and update, overwriting whatever the client sent, and sets the
// question and agent labels from the spec.
func (w *ClaimWebhook) Default(ctx context.Context, c *hitlv1.QuestionClaim) error {
	user, err := requestUser(ctx)
	if err != nil {
		return err
	}
	c.Spec.Holder = userInfo(user)
	if c.Spec.QuestionRef.Name != "" && c.Spec.Agent != "" {
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		c.Labels[hitlv1.QuestionLabel] = c.Spec.QuestionRef.Name
		c.Labels[hitlv1.AgentLabel] = c.Spec.Agent
	}
	return nil
}
