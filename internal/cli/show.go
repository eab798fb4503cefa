package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

type showOptions struct {
	*common
	name   string
	output *outputFlags
}

func newShowCommand(c *common) *cobra.Command {
	o := &showOptions{common: c, output: newOutputFlags("the card", false).withMarkdown()}
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a question as a card: its questions, options, window, claims, queued reply and answers",
		Long: `Show a question as a card: its questions, options, window, claims, queued
reply and answers.

-o markdown renders it for the description of a pull request that commits
a reply to it (answer --to-file): the question's text is escaped and its
detail shown as markdown source, so that nothing the agent wrote can add
HTML or structure to the page.`,
		Example: `  kubectl hitl show deploy-target
  kubectl hitl show deploy-target -o jsonpath='{.status.state}'
  kubectl hitl show deploy-target -o markdown > pr-description.md`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeQuestions(anyQuestion),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.name = args[0]
			return run(cmd.Context(), o)
		},
	}
	o.output.addFlags(cmd)
	return cmd
}

func (o *showOptions) Complete() error { return o.complete() }
func (o *showOptions) Validate() error { return o.output.validate() }

func (o *showOptions) Run(ctx context.Context) error {
	q, err := o.question(ctx, o.name)
	if err != nil {
		return err
	}
	switch {
	case o.output.isMarkdown():
		printMarkdown(o.streams.Out, q)
	case !o.output.isHuman():
		return o.output.printObject(o.streams.Out, q)
	default:
		printCard(o.streams.Out, q, time.Now())
	}
	return nil
}

// question reads a question in the command's namespace.
func (c *common) question(ctx context.Context, name string) (*hitlv1.UserQuestion, error) {
	q := &hitlv1.UserQuestion{}
	if err := c.client.Get(ctx, types.NamespacedName{Namespace: c.namespace, Name: name}, q); err != nil {
		return nil, fmt.Errorf("reading question %s: %w", name, err)
	}
	return q, nil
}
