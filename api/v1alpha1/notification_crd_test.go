package v1alpha1_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func webhookSpec(url string) hitlv1.NotificationChannelSpec {
	return hitlv1.NotificationChannelSpec{Webhook: &hitlv1.WebhookChannel{URL: url, SecretRef: hitlv1.SecretKeyReference{Name: "hmac"}}}
}

var _ = Describe("NotificationChannel", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("accepts each kind of channel and defaults email's startTLS to Required", func() {
		ref := hitlv1.SecretKeyReference{Name: "s"}
		for name, spec := range map[string]hitlv1.NotificationChannelSpec{
			"webhook": webhookSpec("https://hooks.example.com/hitl"),
			"slack":   {Slack: &hitlv1.ChatChannel{WebhookSecretRef: ref}, RateLimit: &hitlv1.RateLimit{PerMinute: 30, Burst: 5}},
			"teams":   {Teams: &hitlv1.ChatChannel{WebhookSecretRef: ref}},
			"email":   {Email: &hitlv1.EmailChannel{Address: "smtp.example.com:587", From: "hitl@example.com", To: []string{"sre@example.com"}, AuthSecretRef: &ref}},
		} {
			ch := &hitlv1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
			Expect(k8s.Create(ctx, ch)).To(Succeed(), name)
			if name == "email" {
				Expect(ch.Spec.Email.StartTLS).To(Equal(hitlv1.StartTLSRequired))
			}
		}
	})

	DescribeTable("denies a bad channel with BAD_NOTIFICATION",
		func(fragment string, spec hitlv1.NotificationChannelSpec) {
			ch := &hitlv1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Spec: spec}
			Expect(deniedWith(k8s.Create(ctx, ch), hitlv1.CodeBadNotification)).To(ContainSubstring(fragment))
		},
		Entry("none", "exactly one of webhook, slack, teams and email", hitlv1.NotificationChannelSpec{}),
		Entry("two", "exactly one of", func() hitlv1.NotificationChannelSpec {
			s := webhookSpec("https://hooks.example.com")
			s.Slack = &hitlv1.ChatChannel{WebhookSecretRef: hitlv1.SecretKeyReference{Name: "s"}}
			return s
		}()),
		Entry("a relative webhook URL", "webhook.url must be an absolute http or https URL", webhookSpec("/hitl")),
		Entry("a webhook URL of another scheme", "webhook.url must be an absolute http or https URL", webhookSpec("ftp://example.com/x")),
		Entry("an SMTP address without a port", "email.address must be host:port", hitlv1.NotificationChannelSpec{
			Email: &hitlv1.EmailChannel{Address: "smtp.example.com", From: "a@example.com", To: []string{"b@example.com"}}}),
		Entry("credentials without STARTTLS", "credentials are never sent in clear text", hitlv1.NotificationChannelSpec{
			Email: &hitlv1.EmailChannel{Address: "relay:25", From: "a@example.com", To: []string{"b@example.com"},
				StartTLS: hitlv1.StartTLSDisabled, AuthSecretRef: &hitlv1.SecretKeyReference{Name: "smtp"}}}),
	)
})

var _ = Describe("NotificationPolicy", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	policy := func(spec hitlv1.NotificationPolicySpec) *hitlv1.NotificationPolicy {
		return &hitlv1.NotificationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, Spec: spec}
	}

	It("accepts every event, reminders, escalation tiers and a selector", func() {
		Expect(k8s.Create(ctx, policy(hitlv1.NotificationPolicySpec{
			Selector:  hitlv1.ApprovalSelector{Agents: []string{"release-bot"}, Intents: []hitlv1.IntentType{hitlv1.IntentApproval}},
			Channels:  []string{"slack"},
			On:        hitlv1.NotificationEvents(), // all seven fit on
			Reminders: &hitlv1.Reminders{Percents: []int32{50, 90}, Every: &metav1.Duration{Duration: 30 * time.Minute}, Max: 4},
			Escalation: []hitlv1.EscalationTier{{After: metav1.Duration{Duration: time.Hour}, Channels: []string{"oncall"}},
				{After: metav1.Duration{Duration: 4 * time.Hour}, Channels: []string{"boss"}}},
		}))).To(Succeed())
	})

	DescribeTable("denies a bad policy with BAD_NOTIFICATION",
		func(fragment string, spec hitlv1.NotificationPolicySpec) {
			Expect(deniedWith(k8s.Create(ctx, policy(spec)), hitlv1.CodeBadNotification)).To(ContainSubstring(fragment))
		},
		Entry("empty reminders", "reminders need percents or every",
			hitlv1.NotificationPolicySpec{Channels: []string{"c"}, Reminders: &hitlv1.Reminders{}}),
		Entry("a sub-second reminder", "reminders.every must be a duration of whole seconds, at least 1s",
			hitlv1.NotificationPolicySpec{Channels: []string{"c"}, Reminders: &hitlv1.Reminders{Every: &metav1.Duration{Duration: 500 * time.Millisecond}}}),
		Entry("two tiers after the same delay", "escalation tiers have distinct after delays",
			hitlv1.NotificationPolicySpec{Channels: []string{"c"}, Escalation: []hitlv1.EscalationTier{
				{After: metav1.Duration{Duration: time.Hour}, Channels: []string{"a"}}, {After: metav1.Duration{Duration: time.Hour}, Channels: []string{"b"}}}}),
	)
})
