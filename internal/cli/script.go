package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/agent"
	"github.com/hitl-dev/hitl/pkg/answerer"
)

// result is what `ask`, `wait` and `admit` print for a script to read.
type result struct {
	Question string              `json:"question"`
	CallID   string              `json:"callID"`
	Pending  bool                `json:"pending,omitempty"`
	Answers  []hitlv1.AnswerItem `json:"answers,omitempty"`
	Late     bool                `json:"late,omitempty"`
	// Approval is, on a governed question, the rule it settles by, the
	// votes that decided it (so far, while it is pending) and its tally.
	Approval *agent.Approval `json:"approval,omitempty"`
}

// printResult prints a decided question and returns the exit status a
// script tells the outcomes apart by. On a governed question the votes
// are also said in words, on stderr.
func (c *common) printResult(q *hitlv1.UserQuestion) error {
	r := result{Question: q.Name, CallID: q.CallID(), Approval: agent.ApprovalOf(q)}
	switch q.Status.State {
	case hitlv1.StateSettled:
		r.Answers = q.Status.Answers
		r.Late = q.Status.Settlement != nil && q.Status.Settlement.Late
	case hitlv1.StateContinued:
		r.Pending = true
	case hitlv1.StateCancelled:
		return &ExitError{Code: ExitCancelled, Err: fmt.Errorf("%s: question %s was cancelled", hitlv1.CodeAskAborted, q.Name)}
	}
	printVotes(c.streams.ErrOut, q)
	if err := printValue(c.streams.Out, r, "json"); err != nil {
		return err
	}
	if r.Pending {
		return &ExitError{Code: ExitPending, Err: fmt.Errorf("question %s is pending: the window closed unanswered", q.Name)}
	}
	return nil
}

type askOptions struct {
	*common
	file    string
	agent   string
	name    string
	timeout time.Duration
}

func newAskCommand(c *common) *cobra.Command {
	o := &askOptions{common: c}
	cmd := &cobra.Command{
		Use:   "ask -f FILE",
		Short: "Ask a question from a shell script and wait for the answer",
		Long: `Create a UserQuestion from FILE (a UserQuestion manifest, or a document with
"questions:") and wait. Prints the result as JSON: {"answers": [...]} when it
settles (exit 0), {"pending": true, "callID": ...} when the window closes
unanswered (exit 3), and exits 4 when the agent's question is cancelled
elsewhere. Ctrl-C (SIGINT) or SIGTERM cancels the question (spec.cancelled)
and exits 1 with an ASK_ABORTED message. A question governed by an approval
rule (an ApprovalPolicy, or the file's spec.approval) settles once enough
people voted: the result then also holds "approval": its "rule", its "tally"
and its "votes" (who voted, Approve or Reject); the votes are also printed
on stderr.`,
		Example: `  kubectl hitl ask -f question.yaml --agent deploy-bot --timeout 2m
  answers=$(kubectl hitl ask -f q.yaml) || [ $? -eq 3 ] && echo pending`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	cmd.Flags().StringVarP(&o.file, "filename", "f", "", `file holding the question ("-" for stdin)`)
	cmd.Flags().StringVar(&o.agent, "agent", "", "the asking agent (default: spec.agent of the file)")
	cmd.Flags().StringVar(&o.name, "name", "", "name of the UserQuestion (default: generated)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "foreground window (default: the file's spec.timeout, else blocking)")
	return cmd
}

func (o *askOptions) Complete() error { return o.complete() }

func (o *askOptions) Validate() error {
	if o.file == "" {
		return errors.New("-f FILE is required")
	}
	return nil
}

// askFile is the shape of a question file: a UserQuestion manifest's spec,
// or the same fields at the top level.
type askFile struct {
	Kind     string                  `json:"kind"`
	Metadata metav1.ObjectMeta       `json:"metadata"`
	Spec     hitlv1.UserQuestionSpec `json:"spec"`
	hitlv1.UserQuestionSpec
}

func (o *askOptions) Run(ctx context.Context) error {
	spec, name, err := o.read()
	if err != nil {
		return err
	}
	var timeout *time.Duration
	if spec.Timeout != nil {
		timeout = &spec.Timeout.Duration
	}
	if o.timeout > 0 {
		timeout = &o.timeout
	}
	a := agent.New(o.client, o.namespace, spec.Agent)
	q, err := a.Create(ctx, agent.Request{Name: name, CallID: spec.CallID, Questions: spec.Questions, Approval: spec.Approval}, timeout)
	if err != nil {
		if ctx.Err() != nil {
			// Interrupted while asking: a named question may exist all the same.
			return aborted(ctx, a, name)
		}
		return err
	}
	fmt.Fprintf(o.streams.ErrOut, "asked %s/%s as agent %s; waiting for the answer\n", q.Namespace, q.Name, spec.Agent)
	decidedQ, err := a.Wait(ctx, q.Name, decided)
	if err != nil {
		if ctx.Err() != nil {
			return aborted(ctx, a, q.Name)
		}
		return err
	}
	return o.printResult(decidedQ)
}

// aborted cancels the question of an interrupted ask (SIGINT, SIGTERM end
// ctx), as pkg/agent's Ask does when its context ends, on a fresh context,
// and returns the ASK_ABORTED exit. name may be empty (the question was
// not created) or name a question that does not exist.
func aborted(ctx context.Context, a *agent.Agent, name string) error {
	if name == "" {
		return &ExitError{Code: ExitAborted, Err: fmt.Errorf("%s: the ask was interrupted while its question was being created", hitlv1.CodeAskAborted)}
	}
	cancelCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := a.Cancel(cancelCtx, name); err != nil {
		if validation.IsCode(err, hitlv1.CodeNotAnswerable) || apierrors.IsNotFound(err) {
			return &ExitError{Code: ExitAborted, Err: fmt.Errorf("%s: the ask was interrupted before question %s was created", hitlv1.CodeAskAborted, name)}
		}
		return &ExitError{Code: ExitAborted, Err: fmt.Errorf("%s: the ask was interrupted, and cancelling question %s failed: %w", hitlv1.CodeAskAborted, name, err)}
	}
	return &ExitError{Code: ExitAborted, Err: fmt.Errorf("%s: the ask was interrupted; question %s is cancelled", hitlv1.CodeAskAborted, name)}
}

func (o *askOptions) read() (hitlv1.UserQuestionSpec, string, error) {
	var data []byte
	var err error
	if o.file == "-" {
		data, err = io.ReadAll(o.streams.In)
	} else {
		data, err = os.ReadFile(o.file)
	}
	if err != nil {
		return hitlv1.UserQuestionSpec{}, "", err
	}
	var f askFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return hitlv1.UserQuestionSpec{}, "", fmt.Errorf("reading %s: %w", o.file, err)
	}
	spec, name := f.UserQuestionSpec, o.name
	if f.Kind == "UserQuestion" {
		spec = f.Spec
		if name == "" {
			name = f.Metadata.Name
		}
	}
	if o.agent != "" {
		spec.Agent = o.agent
	}
	if spec.Agent == "" {
		return spec, "", errors.New("no agent: pass --agent or set spec.agent in the file")
	}
	return spec, name, nil
}

// decided is true once a question left Open.
func decided(q *hitlv1.UserQuestion) bool {
	return q.LeftOpen()
}

type waitOptions struct {
	*common
	name string
	for_ string
}

func newWaitCommand(c *common) *cobra.Command {
	o := &waitOptions{common: c}
	cmd := &cobra.Command{
		Use:   "wait NAME",
		Short: "Wait for a question to settle, to leave Open, or to get a queued late reply",
		Example: `  kubectl hitl wait deploy-target                 # until Settled; prints the answers
  kubectl hitl wait lunch-order --for=queued      # until a late reply is queued; prints it
  kubectl hitl wait lunch-order --for=decided     # until Settled or Continued (exit 3 when pending)`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeQuestions(anyQuestion),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.name = args[0]
			return run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.for_, "for", "settled", "settled, decided or queued")
	return cmd
}

func (o *waitOptions) Complete() error { return o.complete() }

func (o *waitOptions) Validate() error {
	switch o.for_ {
	case "settled", "decided", "queued":
		return nil
	}
	return fmt.Errorf("--for must be settled, decided or queued, not %q", o.for_)
}

func (o *waitOptions) Run(ctx context.Context) error {
	q, err := o.question(ctx, o.name)
	if err != nil {
		return err
	}
	done := func(q *hitlv1.UserQuestion) bool { return q.Status.State.Terminal() }
	switch o.for_ {
	case "decided":
		done = decided
	case "queued":
		done = func(q *hitlv1.UserQuestion) bool { return q.Status.QueuedReply != nil || q.Status.State.Terminal() }
	}
	q, err = agent.New(o.client, o.namespace, q.Spec.Agent).Wait(ctx, o.name, done)
	if err != nil {
		return err
	}
	if r := q.Status.QueuedReply; o.for_ == "queued" && r != nil {
		return printValue(o.streams.Out, r, "json")
	}
	return o.printResult(q)
}

type admitOptions struct {
	*common
	name  string
	reply string
}

func newAdmitCommand(c *common) *cobra.Command {
	o := &admitOptions{common: c}
	cmd := &cobra.Command{
		Use:               "admit NAME",
		Short:             "Admit the queued late reply of a Continued question (for script agents); prints the answers",
		Example:           `  kubectl hitl admit lunch-order`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeQuestions(withQueuedReply),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.name = args[0]
			return run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.reply, "reply", "", "the reply to admit (default: the queued one)")
	return cmd
}

func (o *admitOptions) Complete() error { return o.complete() }
func (o *admitOptions) Validate() error { return nil }

func (o *admitOptions) Run(ctx context.Context) error {
	q, err := o.question(ctx, o.name)
	if err != nil {
		return err
	}
	reply := o.reply
	if reply == "" {
		if q.Status.QueuedReply == nil {
			return fmt.Errorf("%s: question %s has no queued reply to admit", hitlv1.CodeNotAnswerable, q.Name)
		}
		reply = q.Status.QueuedReply.Name
	}
	res, err := agent.New(o.client, o.namespace, q.Spec.Agent).Admit(ctx, q.Name, reply)
	if err != nil {
		return err
	}
	return printValue(o.streams.Out, result{Question: res.Question, CallID: res.CallID, Answers: res.Answers, Late: true,
		Approval: res.Approval}, "json")
}

type withdrawOptions struct {
	*common
	reply string
}

func newWithdrawCommand(c *common) *cobra.Command {
	o := &withdrawOptions{common: c}
	return &cobra.Command{
		Use:               "withdraw REPLY",
		Short:             "Withdraw a queued reply before the agent admits it",
		Example:           `  kubectl hitl withdraw lunch-alice`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeQueuedReplies,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.reply = args[0]
			return run(cmd.Context(), o)
		},
	}
}

func (o *withdrawOptions) Complete() error { return o.complete() }
func (o *withdrawOptions) Validate() error { return nil }

func (o *withdrawOptions) Run(ctx context.Context) error {
	if err := answerer.New(o.client, o.namespace, "").Withdraw(ctx, o.reply); err != nil {
		return err
	}
	fmt.Fprintf(o.streams.Out, "reply %s withdrawn\n", o.reply)
	return nil
}
