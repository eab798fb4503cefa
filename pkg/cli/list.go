package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

type listOptions struct {
	*common
	allNamespaces bool
	agent         string
	state         string
	output        string
}

func newListCommand(c *common) *cobra.Command {
	o := &listOptions{common: c}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List questions: active ones in ask order, then settled ones in settlement order",
		Example: `  kubectl hitl list
  kubectl hitl list -A --agent release-bot
  kubectl hitl list --state Continued -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list the questions of every namespace")
	cmd.Flags().StringVar(&o.agent, "agent", "", "only the questions of this agent")
	cmd.Flags().StringVar(&o.state, "state", "", "only questions in this state: Open, Continued, Settled or Cancelled")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json or yaml")
	return cmd
}

// runner is the kubectl Options pattern: Complete, Validate, Run.
type runner interface {
	Complete() error
	Validate() error
	Run(ctx context.Context) error
}

func run(ctx context.Context, r runner) error {
	if err := r.Complete(); err != nil {
		return err
	}
	if err := r.Validate(); err != nil {
		return err
	}
	return r.Run(ctx)
}

func (o *listOptions) Complete() error { return o.complete() }

func (o *listOptions) Validate() error {
	switch hitlv1.QuestionState(o.state) {
	case "", hitlv1.StateOpen, hitlv1.StateContinued, hitlv1.StateSettled, hitlv1.StateCancelled:
	default:
		return fmt.Errorf("--state must be Open, Continued, Settled or Cancelled, not %q", o.state)
	}
	return validOutput(o.output, "json", "yaml")
}

func (o *listOptions) Run(ctx context.Context) error {
	var opts []client.ListOption
	if !o.allNamespaces {
		opts = append(opts, client.InNamespace(o.namespace))
	}
	if o.agent != "" {
		opts = append(opts, client.MatchingLabels{hitlv1.AgentLabel: o.agent})
	}
	var list hitlv1.UserQuestionList
	if err := o.client.List(ctx, &list, opts...); err != nil {
		return fmt.Errorf("listing questions: %w", err)
	}
	if o.state != "" {
		kept := list.Items[:0]
		for _, q := range list.Items {
			if string(q.State()) == o.state {
				kept = append(kept, q)
			}
		}
		list.Items = kept
	}
	if o.output != "" {
		return printObject(o.streams.Out, &list, o.output)
	}
	writeList(o.streams.Out, list.Items, o.allNamespaces, o.state, time.Now())
	return nil
}

func writeList(w interface{ Write([]byte) (int, error) }, items []hitlv1.UserQuestion, allNamespaces bool, state string, now time.Time) {
	active, settled := hitlv1.Views(items)
	if state == string(hitlv1.StateCancelled) {
		printTable(w, "CANCELLED", items, allNamespaces, now)
		return
	}
	if state != string(hitlv1.StateSettled) {
		printTable(w, "ACTIVE", active, allNamespaces, now)
	}
	if state == "" || state == string(hitlv1.StateSettled) {
		printTable(w, "SETTLED", settled, allNamespaces, now)
	}
}
