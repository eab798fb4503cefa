package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NotificationEvent is a moment in a question's life that a
// NotificationPolicy can send to its channels.
// +kubebuilder:validation:Enum=Asked;Reminder;QuorumProgress;Continued;Settled;Cancelled;Escalated
type NotificationEvent string

const (
	// EventAsked: the question is Open and waits for an answer.
	EventAsked NotificationEvent = "Asked"
	// EventReminder: the question is still unanswered at one of the
	// policy's reminder times.
	EventReminder NotificationEvent = "Reminder"
	// EventQuorumProgress: a vote was counted on a governed question
	// (status.approval set) that is still answerable. It carries the tally
	// and who voted what (Approve or Reject), never an answer.
	EventQuorumProgress NotificationEvent = "QuorumProgress"
	// EventContinued: the window of a timed question closed unanswered; the
	// question stays answerable.
	EventContinued NotificationEvent = "Continued"
	// EventSettled: the question was answered. The only event that carries
	// the answers.
	EventSettled NotificationEvent = "Settled"
	// EventCancelled: the agent cancelled the ask.
	EventCancelled NotificationEvent = "Cancelled"
	// EventEscalated: the question was still unanswered after an
	// escalation tier's delay.
	EventEscalated NotificationEvent = "Escalated"
)

// NotificationEvents are the events, in the order a question's life goes
// through them.
func NotificationEvents() []NotificationEvent {
	return []NotificationEvent{EventAsked, EventReminder, EventQuorumProgress, EventContinued, EventSettled, EventCancelled, EventEscalated}
}

// Labels and annotations the notifier writes.
const (
	// NotifiedAnnotation, on a question, records the notifications sent
	// for it (see internal/notify): a restarted notifier reads it and
	// neither loses nor repeats one. Only the notifier writes it; the
	// question-owner admission policy lets a holder of VerbNotify change
	// this annotation and nothing else.
	NotifiedAnnotation = "hitl.dev/notified"
)

// SecretKeyReference names one key of a Secret in the object's namespace.
type SecretKeyReference struct {
	// name is the Secret's name, in the namespace of the object that
	// refers to it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`

	// key is the key of the Secret's data that holds the value; each
	// field that refers to a Secret says its default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// KeyOr is key, or def when key is empty.
func (r *SecretKeyReference) KeyOr(def string) string {
	if r.Key == "" {
		return def
	}
	return r.Key
}

// The default keys of the Secrets that channels read.
const (
	// DefaultWebhookSecretKey holds a webhook channel's HMAC key.
	DefaultWebhookSecretKey = "key"
	// DefaultURLSecretKey holds a Slack or Teams webhook URL.
	DefaultURLSecretKey = "url"
	// EmailUsernameKey and EmailPasswordKey hold an email channel's SMTP
	// credentials.
	EmailUsernameKey = "username"
	EmailPasswordKey = "password"
)

// WebhookChannel posts each notification as a signed JSON document.
type WebhookChannel struct {
	// url is where the notifications are POSTed, an absolute http or https
	// URL. It is not secret: the receiver checks the signature.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="BAD_NOTIFICATION: webhook.url must be an absolute http or https URL"
	URL string `json:"url"`

	// secretRef names the Secret key (default "key") that holds the HMAC
	// key: each request carries X-Hitl-Signature: t=<unix time>,v1=<hex
	// HMAC-SHA256 of "<unix time>.<body>">.
	// +required
	SecretRef SecretKeyReference `json:"secretRef"`
}

// ChatChannel posts to a chat's incoming webhook, whose URL is a secret.
type ChatChannel struct {
	// webhookSecretRef names the Secret key (default "url") that holds the
	// incoming webhook's URL: a Slack incoming webhook, or a Teams
	// workflow's "When a Teams webhook request is received" URL.
	// +required
	WebhookSecretRef SecretKeyReference `json:"webhookSecretRef"`
}

// StartTLSMode says whether an email channel upgrades its SMTP connection
// to TLS.
// +kubebuilder:validation:Enum=Required;Disabled
type StartTLSMode string

const (
	// StartTLSRequired: STARTTLS, with the server's certificate verified;
	// a server that does not offer it gets no mail.
	StartTLSRequired StartTLSMode = "Required"
	// StartTLSDisabled: plain SMTP, for a relay on a trusted network. No
	// credentials are sent over it.
	StartTLSDisabled StartTLSMode = "Disabled"
)

// EmailChannel sends each notification as an email, plain text and HTML.
//
// +kubebuilder:validation:XValidation:rule="!has(self.authSecretRef) || !has(self.startTLS) || self.startTLS != 'Disabled'",message="BAD_NOTIFICATION: email.authSecretRef needs startTLS Required: credentials are never sent in clear text",fieldPath=".authSecretRef"
type EmailChannel struct {
	// address is the SMTP server, host:port (e.g. smtp.example.com:587).
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=260
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?:[0-9]{1,5}$') || self.matches('^\\\\[[0-9A-Fa-f:.]+\\\\]:[0-9]{1,5}$')",message="BAD_NOTIFICATION: email.address must be host:port"
	Address string `json:"address"`

	// from is the sender's address.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=254
	// +kubebuilder:validation:Pattern=`^[^@\s<>]+@[^@\s<>]+$`
	From string `json:"from"`

	// to are the recipients' addresses, 1 to 32.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=254
	// +kubebuilder:validation:items:Pattern=`^[^@\s<>]+@[^@\s<>]+$`
	To []string `json:"to"`

	// startTLS is Required (the default: STARTTLS with the server's
	// certificate verified) or Disabled (plain SMTP to a trusted relay,
	// without credentials).
	// +optional
	// +kubebuilder:default=Required
	StartTLS StartTLSMode `json:"startTLS,omitempty"`

	// authSecretRef names a Secret whose keys username and password are
	// the SMTP credentials (PLAIN authentication, after STARTTLS). Unset:
	// no authentication. Its key field is not used.
	// +optional
	AuthSecretRef *SecretKeyReference `json:"authSecretRef,omitempty"`
}

// RateLimit bounds how fast a channel sends.
type RateLimit struct {
	// perMinute is how many notifications the channel sends a minute at
	// most, 1 to 6000; the rest wait their turn.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=6000
	PerMinute int32 `json:"perMinute"`

	// burst is how many it may send at once after a quiet time, 1 to 1000
	// (default 10, and never more than perMinute).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Burst int32 `json:"burst,omitempty"`
}

// DefaultRateLimit is a channel's rate limit when spec.rateLimit is unset:
// 60 a minute, 10 at once.
var DefaultRateLimit = RateLimit{PerMinute: 60, Burst: 10}

// NotificationChannelSpec says where and how notifications are sent:
// exactly one of webhook, slack, teams and email.
//
// +kubebuilder:validation:XValidation:rule="[has(self.webhook), has(self.slack), has(self.teams), has(self.email)].filter(x, x).size() == 1",message="BAD_NOTIFICATION: a channel has exactly one of webhook, slack, teams and email"
type NotificationChannelSpec struct {
	// webhook posts signed JSON to a URL.
	// +optional
	Webhook *WebhookChannel `json:"webhook,omitempty"`

	// slack posts a Block Kit message to a Slack incoming webhook.
	// +optional
	Slack *ChatChannel `json:"slack,omitempty"`

	// teams posts an Adaptive Card to a Microsoft Teams workflow webhook.
	// +optional
	Teams *ChatChannel `json:"teams,omitempty"`

	// email sends mail over SMTP.
	// +optional
	Email *EmailChannel `json:"email,omitempty"`

	// rateLimit bounds how fast the channel sends; default 60 a minute,
	// 10 at once.
	// +optional
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
}

// ChannelType names the kind of a channel.
type ChannelType string

// The channel types, as the notifier's metrics and the webhook body name
// them.
const (
	ChannelWebhook ChannelType = "webhook"
	ChannelSlack   ChannelType = "slack"
	ChannelTeams   ChannelType = "teams"
	ChannelEmail   ChannelType = "email"
)

// Type is the kind of channel the spec sets ("" when none is set).
func (s *NotificationChannelSpec) Type() ChannelType {
	switch {
	case s.Webhook != nil:
		return ChannelWebhook
	case s.Slack != nil:
		return ChannelSlack
	case s.Teams != nil:
		return ChannelTeams
	case s.Email != nil:
		return ChannelEmail
	}
	return ""
}

// Limit is spec.rateLimit with its defaults.
func (s *NotificationChannelSpec) Limit() RateLimit {
	l := DefaultRateLimit
	if s.RateLimit != nil {
		l.PerMinute = s.RateLimit.PerMinute
		if s.RateLimit.Burst > 0 {
			l.Burst = s.RateLimit.Burst
		}
	}
	l.Burst = min(l.Burst, l.PerMinute)
	return l
}

// NotificationStatus is what the notifier observed of a channel or policy.
type NotificationStatus struct {
	// observedGeneration is the spec generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions holds Ready: True when the notifier can send (every
	// Secret read, every URL well formed, every channel found); False
	// with the reason and a message that names what to fix.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NotificationChannel is a place notifications go: a signed webhook, a
// Slack or Teams channel, or email recipients. Its secrets (the HMAC key,
// the chat webhook URL, the SMTP credentials) are read from Secrets of its
// namespace, never written in the spec. NotificationPolicies of the
// namespace refer to it by name. Written by the platform team.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=nc,categories=hitl
// +kubebuilder:printcolumn:name="Webhook",type=string,JSONPath=`.spec.webhook.url`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NotificationChannel struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the channel.
	// +required
	Spec NotificationChannelSpec `json:"spec"`

	// status says whether the notifier can send to it.
	// +optional
	Status NotificationStatus `json:"status,omitempty"`
}

// NotificationChannelList is a list of NotificationChannels.
//
// +kubebuilder:object:root=true
type NotificationChannelList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NotificationChannel `json:"items"`
}

// Reminders say when an unanswered question is brought up again.
//
// +kubebuilder:validation:XValidation:rule="(has(self.percents) && size(self.percents) > 0) || has(self.every)",message="BAD_NOTIFICATION: reminders need percents or every",fieldPath=".percents"
type Reminders struct {
	// percents are points of a timed question's window, in percent of its
	// timeout (1 to 99), at which an Open question is reminded of: [50, 90]
	// reminds halfway and when a tenth of the window is left.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=99
	Percents []int32 `json:"percents,omitempty"`

	// every reminds of a question without a window (a blocking question
	// while Open, any question while Continued) this long after it was
	// asked or continued, and again every as long, up to max times. A
	// duration of at least 1s, e.g. "30m".
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+h)?([0-9]+m)?([0-9]+s)?$') && size(self) > 0 && duration(self) >= duration('1s')",message="BAD_NOTIFICATION: reminders.every must be a duration of whole seconds, at least 1s, like 30m or 1h30m"
	Every *metav1.Duration `json:"every,omitempty"`

	// max is how many reminders every sends at most in each of the two
	// phases (Open without a window, Continued), 1 to 20; default 3.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	Max int32 `json:"max,omitempty"`
}

// DefaultReminderMax is reminders.max when unset.
const DefaultReminderMax = 3

// MaxOr is max, or its default.
func (r *Reminders) MaxOr() int {
	if r.Max > 0 {
		return int(r.Max)
	}
	return DefaultReminderMax
}

// EscalationTier sends an Escalated event to further channels when a
// question is still unanswered some time after it was asked.
type EscalationTier struct {
	// after is how long after the question was asked the tier fires, if
	// the question is still unanswered (Open, or Continued with no queued
	// reply); a duration of at least 1s, e.g. "2h".
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+h)?([0-9]+m)?([0-9]+s)?$') && size(self) > 0 && duration(self) >= duration('1s')",message="BAD_NOTIFICATION: escalation[].after must be a duration of whole seconds, at least 1s, like 30m or 2h"
	After metav1.Duration `json:"after"`

	// channels are the NotificationChannels of the namespace, by name, that
	// hear of the escalation.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=253
	Channels []string `json:"channels"`
}

// NotificationPolicySpec selects questions and says whom to tell of them,
// and when.
type NotificationPolicySpec struct {
	// selector says which questions of the namespace the policy notifies
	// of: agents, labels, intents. Empty: every question.
	// +optional
	Selector ApprovalSelector `json:"selector,omitempty"`

	// channels are the NotificationChannels of the namespace, by name, that
	// the events of on go to.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	Channels []string `json:"channels"`

	// on are the events sent to channels; empty means every event,
	// QuorumProgress included. An escalation tier's own channels get its
	// Escalated event whatever on says.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	On []NotificationEvent `json:"on,omitempty"`

	// reminders say when an unanswered question is brought up again.
	// +optional
	Reminders *Reminders `json:"reminders,omitempty"`

	// escalation are tiers that each tell further channels of a question
	// still unanswered after a delay, 1 to 4.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="self.all(t, self.filter(u, duration(u.after) == duration(t.after)).size() == 1)",message="BAD_NOTIFICATION: escalation tiers have distinct after delays (escalation[].after)"
	Escalation []EscalationTier `json:"escalation,omitempty"`
}

// Sends reports whether the policy sends event e to its channels: when on
// lists it, or on is empty (every event).
func (s *NotificationPolicySpec) Sends(e NotificationEvent) bool {
	if len(s.On) == 0 {
		return true
	}
	for _, o := range s.On {
		if o == e {
			return true
		}
	}
	return false
}

// NotificationPolicy tells people of the questions it selects, where they
// already are: when a question is asked, reminded of, voted on, continued,
// settled, cancelled, and escalated when it stays unanswered. The hitl-notify
// service sends its events to the NotificationChannels it names, at least
// once and never twice. Written by the platform team; the agent role has
// no rights on it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=np,categories=hitl
// +kubebuilder:printcolumn:name="Agents",type=string,JSONPath=`.spec.selector.agents`
// +kubebuilder:printcolumn:name="Channels",type=string,JSONPath=`.spec.channels`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NotificationPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the policy.
	// +required
	Spec NotificationPolicySpec `json:"spec"`

	// status says whether the notifier can send what the policy asks.
	// +optional
	Status NotificationStatus `json:"status,omitempty"`
}

// NotificationPolicyList is a list of NotificationPolicies.
//
// +kubebuilder:object:root=true
type NotificationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NotificationPolicy `json:"items"`
}

// Condition reasons of NotificationChannels and NotificationPolicies.
const (
	// ReasonReady: everything the object needs is there.
	ReasonReady = "Ready"
	// ReasonSecretNotFound: a Secret the channel names does not exist.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonSecretKeyMissing: the Secret lacks the key the channel reads.
	ReasonSecretKeyMissing = "SecretKeyMissing"
	// ReasonSecretForbidden: the notifier may not read the Secret (bind
	// the hitl-notify-secrets role in the namespace).
	ReasonSecretForbidden = "SecretForbidden"
	// ReasonBadURL: a webhook URL, read from a Secret, is not an absolute
	// https URL.
	ReasonBadURL = "BadURL"
	// ReasonChannelNotFound: a policy names a channel that does not exist.
	ReasonChannelNotFound = "ChannelNotFound"
)
