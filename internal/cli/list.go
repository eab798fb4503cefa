package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apilabels "k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/follow"
)

type listOptions struct {
	*common
	allNamespaces bool
	agent         string
	state         string
	watch         bool
	output        *outputFlags
}

func newListCommand(c *common) *cobra.Command {
	o := &listOptions{common: c, output: newOutputFlags("the active and settled tables", true)}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List questions: active ones in ask order, then settled ones in settlement order",
		Long: `List questions: active ones (Open, Continued) in ask order, then settled ones
in settlement order; cancelled ones only with --state Cancelled.

-o takes kubectl get's formats; the printed object is a UserQuestionList in
the API server's order. With --watch, the list is printed and then every
change as it happens, one row (or one object in the -o format) per change,
until interrupted.`,
		Example: `  kubectl hitl list
  kubectl hitl list -A --agent release-bot -o wide
  kubectl hitl list --state Continued -o yaml
  kubectl hitl list -o jsonpath='{.items[*].metadata.name}'
  kubectl hitl list -o custom-columns=NAME:.metadata.name,STATE:.status.state
  kubectl hitl list --watch`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list the questions of every namespace")
	cmd.Flags().StringVar(&o.agent, "agent", "", "only the questions of this agent")
	cmd.Flags().StringVar(&o.state, "state", "", "only questions in this state: Open, Continued, Settled or Cancelled")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "after listing, print every change to the listed questions until interrupted")
	o.output.addFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(
		[]string{string(hitlv1.StateOpen), string(hitlv1.StateContinued), string(hitlv1.StateSettled), string(hitlv1.StateCancelled)},
		cobra.ShellCompDirectiveNoFileComp))
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
	return o.output.validate()
}

// namespace is where the command lists: its namespace, or every one ("").
func (o *listOptions) listNamespace() string {
	if o.allNamespaces {
		return ""
	}
	return o.namespace
}

// selector selects the --agent's questions on the server.
func (o *listOptions) selector() apilabels.Selector {
	if o.agent == "" {
		return apilabels.Everything()
	}
	return apilabels.SelectorFromSet(apilabels.Set{hitlv1.AgentLabel: o.agent})
}

// keep reports whether --state lets q through.
func (o *listOptions) keep(q *hitlv1.UserQuestion) bool {
	return o.state == "" || string(q.State()) == o.state
}

func (o *listOptions) Run(ctx context.Context) error {
	if o.watch {
		return o.runWatch(ctx)
	}
	list := &hitlv1.UserQuestionList{}
	if err := o.client.List(ctx, list, client.InNamespace(o.listNamespace()), client.MatchingLabelsSelector{Selector: o.selector()}); err != nil {
		return fmt.Errorf("listing questions: %w", err)
	}
	kept := list.Items[:0]
	for i := range list.Items {
		if o.keep(&list.Items[i]) {
			kept = append(kept, list.Items[i])
		}
	}
	list.Items = kept
	return o.print(list)
}

func (o *listOptions) print(list *hitlv1.UserQuestionList) error {
	if !o.output.isHuman() {
		return o.output.printObject(o.streams.Out, list)
	}
	writeList(o.streams.Out, list.Items, o.style(), o.state, nowFunc())
	return nil
}

func (o *listOptions) style() tableStyle {
	return tableStyle{allNamespaces: o.allNamespaces, wide: o.output.isWide()}
}

// runWatch prints the list, then each change, as kubectl get --watch does:
// one table row, or one object in the -o format, per change. A question
// that leaves the --state asked for is printed once more, in its new
// state, and then no longer.
func (o *listOptions) runWatch(ctx context.Context) error {
	s, err := follow.Start(ctx, follow.Options{
		Client: o.client, Namespace: o.listNamespace(), Labels: o.selector(), StopOnRefusal: true,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted
		}
		return fmt.Errorf("listing questions: %w", err)
	}
	defer s.Stop()
	list := &hitlv1.UserQuestionList{}
	shown := map[string]bool{}
	for _, q := range s.Initial {
		if o.keep(q) {
			list.Items = append(list.Items, *q)
			shown[q.Namespace+"/"+q.Name] = true
		}
	}
	if err := o.print(list); err != nil {
		return err
	}
	rows := tabwriter.NewWriter(o.streams.Out, 0, 4, 3, ' ', 0)
	for ev := range s.Events() {
		q, key := ev.Question, ev.Question.Namespace+"/"+ev.Question.Name
		if !o.keep(q) && !shown[key] {
			continue
		}
		shown[key] = o.keep(q)
		if err := o.printChange(rows, q); err != nil {
			return err
		}
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("watching questions: %w", err)
	}
	return nil
}

// printChange prints one changed question: a row under the tables'
// columns, or the object in the -o format.
func (o *listOptions) printChange(rows *tabwriter.Writer, q *hitlv1.UserQuestion) error {
	if !o.output.isHuman() {
		return o.output.printObject(o.streams.Out, q)
	}
	fmt.Fprintln(rows, o.style().row(q, nowFunc()))
	return rows.Flush()
}

func writeList(w io.Writer, items []hitlv1.UserQuestion, style tableStyle, state string, now time.Time) {
	active, settled := hitlv1.Views(items)
	if state == string(hitlv1.StateCancelled) {
		printTable(w, "CANCELLED", items, style, now)
		return
	}
	if state != string(hitlv1.StateSettled) {
		printTable(w, "ACTIVE", active, style, now)
	}
	if state == "" || state == string(hitlv1.StateSettled) {
		printTable(w, "SETTLED", settled, style, now)
	}
}
