package notify

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify/channel"
)

// SecretsRole is the ClusterRole (config/notify) that lets the notifier
// read the Secrets of a namespace, bound there with a RoleBinding.
const SecretsRole = "hitl-notify-secrets"

// NotReady is why a channel cannot send: the reason of its Ready
// condition (SecretNotFound, SecretKeyMissing, SecretForbidden, BadURL)
// and a message that says what to fix.
type NotReady struct {
	Reason, Message string
}

func (e *NotReady) Error() string { return e.Message }

// Resolver builds a channel's sender, reading its Secrets with Reader:
// hitl-notify's, and `kubectl hitl notify test`'s as the caller.
type Resolver struct {
	Reader       client.Reader
	HTTPClient   *http.Client
	EmailTLS     *tls.Config
	EmailTimeout time.Duration
	// Forbidden is the message of a Secret Reader may not read (name, the
	// channel's field that refers to it, the namespace); nil: the
	// notifier's, which names the ClusterRole to bind.
	Forbidden func(name, field, namespace string) string
}

// Sender returns the sender of ch, or a *NotReady that says what to fix
// (the Secret missing, its key missing or unreadable, a bad URL), or
// another error when the API server could not be asked.
func (r *Resolver) Sender(ctx context.Context, ch *hitlv1.NotificationChannel) (channel.Sender, error) {
	s := &ch.Spec
	switch s.Type() {
	case hitlv1.ChannelWebhook:
		key, err := r.secret(ctx, ch, "spec.webhook.secretRef", &s.Webhook.SecretRef, hitlv1.DefaultWebhookSecretKey)
		if err != nil {
			return nil, err
		}
		if err := checkURL(s.Webhook.URL, false); err != nil {
			return nil, &NotReady{hitlv1.ReasonBadURL, "spec.webhook.url " + err.Error()}
		}
		return &channel.Webhook{URL: s.Webhook.URL, Key: key, Client: r.HTTPClient}, nil
	case hitlv1.ChannelSlack, hitlv1.ChannelTeams:
		field, ref := "spec.slack.webhookSecretRef", &s.Slack
		if s.Teams != nil {
			field, ref = "spec.teams.webhookSecretRef", &s.Teams
		}
		u, err := r.secret(ctx, ch, field, &(*ref).WebhookSecretRef, hitlv1.DefaultURLSecretKey)
		if err != nil {
			return nil, err
		}
		if err := checkURL(string(u), true); err != nil {
			// Never the URL itself: it is the secret.
			return nil, &NotReady{hitlv1.ReasonBadURL, fmt.Sprintf("the webhook URL in Secret %s, key %s (%s), %s",
				(*ref).WebhookSecretRef.Name, (*ref).WebhookSecretRef.KeyOr(hitlv1.DefaultURLSecretKey), field, err)}
		}
		if s.Slack != nil {
			return &channel.Slack{URL: string(u), Client: r.HTTPClient}, nil
		}
		return &channel.Teams{URL: string(u), Client: r.HTTPClient}, nil
	case hitlv1.ChannelEmail:
		e := s.Email
		out := &channel.Email{Address: e.Address, From: e.From, To: e.To, StartTLS: e.StartTLS != hitlv1.StartTLSDisabled, TLSConfig: r.EmailTLS, Timeout: r.EmailTimeout}
		if ref := e.AuthSecretRef; ref != nil {
			user, err := r.secret(ctx, ch, "spec.email.authSecretRef", &hitlv1.SecretKeyReference{Name: ref.Name}, hitlv1.EmailUsernameKey)
			if err != nil {
				return nil, err
			}
			pass, err := r.secret(ctx, ch, "spec.email.authSecretRef", &hitlv1.SecretKeyReference{Name: ref.Name}, hitlv1.EmailPasswordKey)
			if err != nil {
				return nil, err
			}
			out.Username, out.Password = string(user), string(pass)
		}
		return out, nil
	}
	return nil, &NotReady{"NoChannel", "the spec sets none of webhook, slack, teams and email"}
}

// secret reads the value of ref (its key, or def) in ch's namespace.
func (r *Resolver) secret(ctx context.Context, ch *hitlv1.NotificationChannel, field string, ref *hitlv1.SecretKeyReference, def string) ([]byte, error) {
	sec := &corev1.Secret{}
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ch.Namespace, Name: ref.Name}, sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &NotReady{hitlv1.ReasonSecretNotFound, fmt.Sprintf("Secret %s (%s) does not exist in namespace %s", ref.Name, field, ch.Namespace)}
	case apierrors.IsForbidden(err):
		message := fmt.Sprintf("hitl-notify may not read Secret %s (%s) in namespace %s: bind the ClusterRole %s there with a RoleBinding",
			ref.Name, field, ch.Namespace, SecretsRole)
		if r.Forbidden != nil {
			message = r.Forbidden(ref.Name, field, ch.Namespace)
		}
		return nil, &NotReady{hitlv1.ReasonSecretForbidden, message}
	case err != nil:
		return nil, fmt.Errorf("reading Secret %s/%s: %w", ch.Namespace, ref.Name, err)
	}
	key := ref.KeyOr(def)
	if v := sec.Data[key]; len(v) > 0 {
		return v, nil
	}
	return nil, &NotReady{hitlv1.ReasonSecretKeyMissing, fmt.Sprintf("Secret %s (%s) has no key %s, or it is empty", ref.Name, field, key)}
}

// checkURL checks that s is an absolute http(s) URL with a host; https
// only when httpsOnly.
func checkURL(s string, httpsOnly bool) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs() || u.Host == "":
		return fmt.Errorf("is not an absolute URL")
	case httpsOnly && u.Scheme != "https":
		return fmt.Errorf("is not an https URL")
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("is not an http or https URL")
	}
	return nil
}

// readyCondition is the Ready condition of an object of generation gen
// that err (nil, a *NotReady) describes.
func readyCondition(gen int64, err error) metav1.Condition {
	c := metav1.Condition{Type: hitlv1.ConditionReady, Status: metav1.ConditionTrue, Reason: hitlv1.ReasonReady,
		Message: "Notifications can be sent", ObservedGeneration: gen}
	if err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "Error", err.Error()
		if nr, ok := err.(*NotReady); ok {
			c.Reason = nr.Reason
		}
	}
	return c
}

// policyReady is the error, if any, that keeps policy p from sending: the
// first of its channels (spec.channels, then the escalation tiers') that
// is missing or not ready, by the errors of the namespace's channels.
func policyReady(p *hitlv1.NotificationPolicy, channels map[string]error) error {
	names := append([]string(nil), p.Spec.Channels...)
	for _, t := range p.Spec.Escalation {
		names = append(names, t.Channels...)
	}
	for _, name := range names {
		err, found := channels[name]
		if !found {
			return &NotReady{hitlv1.ReasonChannelNotFound, fmt.Sprintf("NotificationChannel %s does not exist in namespace %s", name, p.Namespace)}
		}
		if err != nil {
			nr := &NotReady{"ChannelNotReady", fmt.Sprintf("NotificationChannel %s: %v", name, err)}
			if r, ok := err.(*NotReady); ok {
				nr.Reason = r.Reason
			}
			return nr
		}
	}
	return nil
}
