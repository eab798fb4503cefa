package cli

import (
	"github.com/spf13/cobra"
)

// addCompletion adds `kubectl hitl completion SHELL` (cobra's), with what a
// kubectl plugin needs for `kubectl hitl <TAB>` to complete too. Question
// and reply names complete from the cluster (ValidArgsFunction of show,
// answer, approve, deny, wait, admit and withdraw).
func addCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Long = `Generate the autocompletion script of kubectl-hitl for a shell (bash, zsh,
fish or powershell); "kubectl-hitl completion SHELL --help" says how to load it.

For "kubectl hitl <TAB>" (kubectl's completion of plugins, kubectl 1.26 and
later), put an executable named kubectl_complete-hitl on your PATH that runs:

  kubectl-hitl __complete "$@"

Question and reply names are completed from the cluster, in the namespace
that -n or the kubeconfig selects; -o completes the output formats of its
command (markdown for show).`
	}
}
