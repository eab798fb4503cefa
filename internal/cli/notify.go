package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify"
	"github.com/hitl-dev/hitl/internal/notify/channel"
)

// notifyTestOptions are the options of `kubectl hitl notify test`.
type notifyTestOptions struct {
	*common
	channel string
	timeout time.Duration
}

func newNotifyCommand(c *common) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "notify",
		Short: "Check the NotificationChannels that hitl-notify sends to",
		Long: `Commands for the NotificationChannels of hitl-notify, which tells people of
questions in Slack, Teams, email or a signed webhook (docs/notifications.md).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newNotifyTestCommand(c))
	return cmd
}

func newNotifyTestCommand(c *common) *cobra.Command {
	o := &notifyTestOptions{common: c}
	cmd := &cobra.Command{
		Use:   "test CHANNEL",
		Short: "Send a test message to a NotificationChannel, to check its setup",
		Long: `Send one test message (event Test) to the NotificationChannel CHANNEL of the
namespace, as hitl-notify would send a notification, and say what happened:
delivered, or why not (the Secret missing or without its key, a bad URL, the
receiver's HTTP status, the SMTP server's refusal). It exits 1 when the
message was not delivered.

It reads the channel and its Secrets as you, not as hitl-notify: you need get
on notificationchannels.hitl.dev and on the channel's Secrets in the namespace
(the ClusterRole hitl-notification-admin of config/rbac/examples grants both).
The message is tried once; hitl-notify itself retries what may pass (408,
429, 5xx, timeouts, refused connections, SMTP 4xx). It names no question and
carries no link.`,
		Example: `  kubectl hitl notify test audit-webhook -n team-a
  kubectl hitl notify test oncall-email -n team-a --timeout 30s`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeChannels,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.channel = args[0]
			return run(cmd.Context(), o)
		},
	}
	cmd.Flags().DurationVar(&o.timeout, "timeout", 15*time.Second, "how long the attempt may take")
	return cmd
}

func (o *notifyTestOptions) Complete() error { return o.complete() }

func (o *notifyTestOptions) Validate() error {
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, not %s", o.timeout)
	}
	return nil
}

func (o *notifyTestOptions) Run(ctx context.Context) error {
	ch := &hitlv1.NotificationChannel{}
	err := o.client.Get(ctx, types.NamespacedName{Namespace: o.namespace, Name: o.channel}, ch)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("NotificationChannel %s does not exist in namespace %s", o.channel, o.namespace)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("you may not read NotificationChannel %s in namespace %s: notify test needs get on notificationchannels.hitl.dev there: %w",
			o.channel, o.namespace, err)
	case err != nil:
		return fmt.Errorf("reading NotificationChannel %s: %w", o.channel, err)
	}
	what := fmt.Sprintf("NotificationChannel %s/%s", ch.Namespace, ch.Name)
	notifierSays(o.streams.ErrOut, ch)
	sender, dest, err := o.sender(ctx, ch)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	me, _ := o.whoAmI(ctx) // only to sign the message; it goes without
	m := testMessage(ch, me, time.Now())
	fmt.Fprintf(o.streams.Out, "Sending a test message to %s: %s\n", what, dest)
	sctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := sender.Send(sctx, m); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within --timeout %s", o.timeout)
		}
		msg := fmt.Sprintf("%s: not delivered: %v", what, err)
		if channel.Transient(err) || errors.Is(sctx.Err(), context.DeadlineExceeded) {
			msg += " (a failure hitl-notify retries, with backoff, before it gives up)"
		}
		return errors.New(msg)
	}
	fmt.Fprintf(o.streams.Out, "Delivered: %s accepted the test message (delivery id %s)\n", dest, m.ID)
	return nil
}

// notifierSays prints, when hitl-notify has found the channel not Ready,
// what it says: the channel may work for the caller (who may read its
// Secrets) and still not for the notifier.
func notifierSays(w io.Writer, ch *hitlv1.NotificationChannel) {
	c := meta.FindStatusCondition(ch.Status.Conditions, hitlv1.ConditionReady)
	if c != nil && c.Status != "True" {
		fmt.Fprintf(w, "note: hitl-notify reports the channel not Ready (%s): %s\n", c.Reason, c.Message)
	}
}

// testMessage is the message notify test sends: event Test, with a unique
// id (so that a receiver that drops repeated ids takes each test), about
// no real question.
func testMessage(ch *hitlv1.NotificationChannel, sender string, now time.Time) *channel.Message {
	text := fmt.Sprintf("This is a test of NotificationChannel %s/%s, sent with kubectl hitl notify test", ch.Namespace, ch.Name)
	if sender != "" {
		text += " by " + sender
	}
	return &channel.Message{
		Version: channel.SchemaVersion,
		ID:      fmt.Sprintf("test/%s/%s/%d", ch.Namespace, ch.Name, now.UnixNano()),
		Event:   channel.EventTest,
		Time:    now.UTC(),
		// Settled: no question waits for an answer.
		Question: channel.Question{Namespace: ch.Namespace, Name: "notify-test", Agent: "kubectl-hitl",
			State: hitlv1.StateSettled, AskedAt: now.UTC(),
			Items: []channel.Item{{ID: "test", Question: text + ". No question is waiting."}}},
	}
}

// sender builds the sender of ch with hitl-notify's resolver, its Secrets
// read as the caller, and says where it sends, without a secret (a chat
// webhook's URL is one). What keeps the channel from sending reads as the
// notifier's Ready condition names it: "SecretNotFound: Secret ...".
func (o *notifyTestOptions) sender(ctx context.Context, ch *hitlv1.NotificationChannel) (channel.Sender, string, error) {
	r := &notify.Resolver{Reader: o.client, HTTPClient: channel.NewHTTPClient(o.timeout), EmailTimeout: o.timeout,
		Forbidden: func(name, field, namespace string) string {
			return fmt.Sprintf("you may not read Secret %s (%s) in namespace %s: notify test reads the channel's Secrets as you and needs get on secrets there",
				name, field, namespace)
		}}
	sender, err := r.Sender(ctx, ch)
	if nr := (*notify.NotReady)(nil); errors.As(err, &nr) {
		return nil, "", fmt.Errorf("%s: %s", nr.Reason, nr.Message)
	} else if err != nil {
		return nil, "", err
	}
	s := &ch.Spec
	switch {
	case s.Webhook != nil:
		return sender, "a signed webhook POST to " + s.Webhook.URL, nil
	case s.Slack != nil:
		return sender, fmt.Sprintf("the Slack incoming webhook in Secret %s, key %s", s.Slack.WebhookSecretRef.Name, s.Slack.WebhookSecretRef.KeyOr(hitlv1.DefaultURLSecretKey)), nil
	case s.Teams != nil:
		return sender, fmt.Sprintf("the Teams workflow webhook in Secret %s, key %s", s.Teams.WebhookSecretRef.Name, s.Teams.WebhookSecretRef.KeyOr(hitlv1.DefaultURLSecretKey)), nil
	}
	dest := fmt.Sprintf("an email to %s through %s", strings.Join(s.Email.To, ", "), s.Email.Address)
	if e, ok := sender.(*channel.Email); ok && e.Username != "" {
		dest += " as " + e.Username
	}
	return sender, dest, nil
}
