package builders

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// ClaimBuilder builds a QuestionClaim.
type ClaimBuilder struct{ c hitlv1.QuestionClaim }

// Claim starts a claim on question q as the answerer SDK makes it: in q's
// namespace, naming q (by name, and by UID once q was created) and q's
// agent, labelled with both, owned by q, for 30 seconds, renewed now. An
// empty name gives the SDK's generated "<question>-claim-<random>". The
// holder is left to admission, which stamps the creating user.
func Claim(name string, q *hitlv1.UserQuestion) *ClaimBuilder {
	b := &ClaimBuilder{c: hitlv1.QuestionClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: q.Namespace,
			Labels:    map[string]string{hitlv1.QuestionLabel: q.Name, hitlv1.AgentLabel: q.Spec.Agent},
		},
		Spec: hitlv1.QuestionClaimSpec{
			QuestionRef:     hitlv1.QuestionReference{Name: q.Name, UID: q.UID},
			Agent:           q.Spec.Agent,
			DurationSeconds: 30,
			RenewTime:       ptr.To(metav1.NewMicroTime(time.Now())),
		},
	}}
	if name == "" {
		b.c.GenerateName = q.Name + "-claim-"
	}
	if q.UID != "" {
		b.c.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: hitlv1.GroupVersion.String(), Kind: "UserQuestion", Name: q.Name, UID: q.UID,
		}}
	}
	return b
}

// For sets spec.durationSeconds to d in whole seconds.
func (b *ClaimBuilder) For(d time.Duration) *ClaimBuilder {
	b.c.Spec.DurationSeconds = int32(d / time.Second)
	return b
}

// RenewedAt sets spec.renewTime.
func (b *ClaimBuilder) RenewedAt(t time.Time) *ClaimBuilder {
	b.c.Spec.RenewTime = ptr.To(metav1.NewMicroTime(t))
	return b
}

// Agent sets spec.agent and the hitl.dev/agent label, for a claim that
// names another agent than its question's.
func (b *ClaimBuilder) Agent(agent string) *ClaimBuilder {
	b.c.Spec.Agent = agent
	b.c.Labels[hitlv1.AgentLabel] = agent
	return b
}

// HeldBy sets spec.holder, as admission stamps it where it runs (and
// overwrites it: suites with admission installed get the creating user).
func (b *ClaimBuilder) HeldBy(username string) *ClaimBuilder {
	b.c.Spec.Holder = &hitlv1.UserInfo{Username: username, Groups: []string{AuthenticatedGroup}}
	return b
}

// Obj returns the built claim.
func (b *ClaimBuilder) Obj() *hitlv1.QuestionClaim { return b.c.DeepCopy() }
