package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// completionTimeout bounds the read behind one shell completion: a slow or
// unreachable API server must not hang the shell.
const completionTimeout = 5 * time.Second

// Which questions a command's argument completes to.
var (
	anyQuestion = func(*hitlv1.UserQuestion) bool { return true }
	// (*hitlv1.UserQuestion).Answerable: Open or Continued, nothing queued.
	// withQueuedReply: a late reply waits for admission.
	withQueuedReply = func(q *hitlv1.UserQuestion) bool { return q.Active() && q.Status.QueuedReply != nil }
)

// completeQuestions is a cobra ValidArgsFunction for a command whose one
// argument is a question name: the names, in the command's namespace (-n,
// --context and the other kubeconfig flags apply), of the questions keep
// accepts.
func (c *common) completeQuestions(keep func(*hitlv1.UserQuestion) bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 || c.complete() != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(completionContext(cmd), completionTimeout)
		defer cancel()
		var list hitlv1.UserQuestionList
		if err := c.client.List(ctx, &list, client.InNamespace(c.namespace)); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for i := range list.Items {
			q := &list.Items[i]
			if strings.HasPrefix(q.Name, toComplete) && keep(q) {
				names = append(names, cobra.CompletionWithDesc(q.Name, q.Spec.Agent+", "+string(q.State())))
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeQueuedReplies completes the name of a reply that is queued, the
// only kind withdraw takes.
func (c *common) completeQueuedReplies(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 || c.complete() != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(completionContext(cmd), completionTimeout)
	defer cancel()
	var list hitlv1.QuestionReplyList
	if err := c.client.List(ctx, &list, client.InNamespace(c.namespace)); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	var names []cobra.Completion
	for _, r := range list.Items {
		if strings.HasPrefix(r.Name, toComplete) && r.Status.Outcome == hitlv1.OutcomeQueued {
			names = append(names, cobra.CompletionWithDesc(r.Name, "queued on question "+r.Spec.QuestionRef.Name))
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

func completionContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// completeChannels completes the name of a NotificationChannel of the
// command's namespace, with its kind.
func (c *common) completeChannels(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 || c.complete() != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(completionContext(cmd), completionTimeout)
	defer cancel()
	var list hitlv1.NotificationChannelList
	if err := c.client.List(ctx, &list, client.InNamespace(c.namespace)); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	var names []cobra.Completion
	for _, ch := range list.Items {
		if strings.HasPrefix(ch.Name, toComplete) {
			names = append(names, cobra.CompletionWithDesc(ch.Name, string(ch.Spec.Type())))
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
