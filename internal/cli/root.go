package cli

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
)

// NewCommand returns `kubectl hitl` with all its subcommands.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	c := &common{flags: flags, streams: streams, qps: defaultQPS, burst: defaultBurst}
	flags.WrapConfigFn = func(cfg *rest.Config) *rest.Config {
		cfg.QPS, cfg.Burst = c.qps, c.burst
		return cfg
	}
	return newRootCommand(c)
}

// newRootCommand builds the commands around c; a test may give a c whose
// client is already made.
func newRootCommand(c *common) *cobra.Command {
	flags := c.flags
	root := &cobra.Command{
		Use:   "kubectl-hitl",
		Short: "Ask people questions from agents, and answer them, through the Kubernetes API",
		Long: `kubectl hitl lists, shows and answers the UserQuestions that agents ask,
runs an interactive inbox for answerers, and lets shell-script agents ask and wait.

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flags.AddFlags(root.PersistentFlags())
	root.AddCommand(
		newListCommand(c), newShowCommand(c), newAnswerCommand(c),
		newDecideCommand(c, true), newDecideCommand(c, false),
		newInboxCommand(c), newAskCommand(c), newWaitCommand(c),
		newAdmitCommand(c), newWithdrawCommand(c),
		newMCPCommand(c), newNotifyCommand(c),
	)
	root.SetOut(c.streams.Out)
	root.SetErr(c.streams.ErrOut)
	addCompletion(root)
	return root
}
