package controlplane

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RequestAudienceToken is RequestToken for a token minted for audiences (e.g.
// "hitl-mcp"), as a projected volume or `kubectl create token SA --audience
// A` mints it: the API server accepts it only from a TokenReview that asks
// for one of those audiences.
func RequestAudienceToken(ctx context.Context, c client.Client, namespace, name string, expiration time.Duration, audiences ...string) (string, time.Time, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         audiences,
		ExpirationSeconds: ptr.To(int64(expiration / time.Second)),
	}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", time.Time{}, fmt.Errorf("requesting a token for ServiceAccount %s/%s with audiences %v: %w", namespace, name, audiences, err)
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}
