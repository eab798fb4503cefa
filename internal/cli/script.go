package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/agent"
	"github.com/hitl-dev/hitl/pkg/answerer"
	"github.com/hitl-dev/hitl/pkg/sealed"
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
	// Sensitive holds, by question id, the opened answers of the sensitive
	// questions (their answers items hold only the sealed text), when the
	// command has the key they were sealed to: the agent's own result,
	// printed on stdout only.
	Sensitive map[string]string `json:"sensitive,omitempty"`
}

// printResult prints a decided question and returns the exit status a
// script tells the outcomes apart by. On a governed question the votes
// are also said in words, on stderr. opener, the Agent that holds the key
// the question's sensitive answers were sealed to (nil when the command
// has none), opens them into the result.
func (c *common) printResult(q *hitlv1.UserQuestion, opener *agent.Agent) error {
	r := result{Question: q.Name, CallID: q.CallID(), Approval: agent.ApprovalOf(q)}
	switch q.Status.State {
	case hitlv1.StateSettled:
		r.Answers = q.Status.Answers
		r.Late = q.Status.Settlement != nil && q.Status.Settlement.Late
		r.Sensitive = c.openSensitive(q, opener)
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

// openSensitive opens the sealed answers of q, a settled question, with
// opener's key. Without a key, or with one they do not open with, it says
// so on stderr (never a value) and opens nothing.
func (c *common) openSensitive(q *hitlv1.UserQuestion, opener *agent.Agent) map[string]string {
	var ids []string
	for _, a := range q.Status.Answers {
		if a.Sealed != "" {
			ids = append(ids, a.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if opener == nil {
		fmt.Fprintf(c.streams.ErrOut, "note: the answers to %s of question %s are sensitive, sealed to the key it was asked with: "+
			"give that key with --sealing-key-file to read them\n", strings.Join(ids, ", "), q.Name)
		return nil
	}
	res, err := opener.ResultOf(q)
	if err != nil {
		fmt.Fprintf(c.streams.ErrOut, "warning: %v (was it asked with another --sealing-key-file?)\n", err)
	}
	return res.Sensitive
}

// sealingKeyUsage is the help of ask --sealing-key-file.
const sealingKeyUsage = "file holding the agent's sealing key (made there, mode 0600, by an ask when it does not exist): the key the answers of sensitive questions are sealed to, kept to read them after this process ends"

// readSealingKey reads the sealing key in path; with create, a missing
// file is made first, with a new key, readable by its owner only.
func readSealingKey(path string, create bool) (*sealed.Key, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		k, err := sealed.NewKey()
		if err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("--sealing-key-file: %w", err)
		}
		_, err = f.Write(append(k.Bytes(), '\n'))
		if closeErr := f.Close(); err == nil {
			err = closeErr
		}
		if err != nil {
			return nil, fmt.Errorf("--sealing-key-file: writing %s: %w", path, err)
		}
		return k, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--sealing-key-file: %w", err)
	}
	k, err := sealed.ParseKey(data)
	if err != nil {
		return nil, fmt.Errorf("--sealing-key-file %s: %w", path, err)
	}
	return k, nil
}

// keyedAgent is agent.New with the key of keyFile, when given.
func (c *common) keyedAgent(name, keyFile string, create bool) (*agent.Agent, error) {
	a := agent.New(c.client, c.namespace, name)
	if keyFile == "" {
		return a, nil
	}
	k, err := readSealingKey(keyFile, create)
	if err != nil {
		return nil, err
	}
	a.UseSealingKey(k)
	return a, nil
}

type askOptions struct {
	*common
	file    string
	agent   string
	name    string
	timeout time.Duration
	keyFile string
	inline  inlineQuestion
}

// inlineQuestion is the one question `ask --question` asks, from flags.
type inlineQuestion struct {
	text, id, typ, min, max, pattern string
	options                          []string
	minLength, maxLength             int32
	required, sensitive              bool
	// set names the flags given, to tell --min-length 0 from none.
	set func(name string) bool
}

// inputFlags make the input rule of the question of --question;
// inlineFlags are all the flags that shape that question, which -f does
// not take.
var (
	inputFlags  = []string{"type", "min", "max", "min-length", "max-length", "pattern", "required"}
	inlineFlags = append([]string{"id", "option", "sensitive"}, inputFlags...)
)

func newAskCommand(c *common) *cobra.Command {
	o := &askOptions{common: c}
	cmd := &cobra.Command{
		Use:   "ask (-f FILE | --agent A --question TEXT)",
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
on stderr.

--question asks one question from flags instead of a file: free text, or
--option labels; --type, --min, --max, --min-length, --max-length,
--pattern and --required give its answer a rule (the prompts of answer and
inbox check it), --sensitive makes it sensitive. A sensitive question's
answer is sealed to a key of this command (kept in memory, or in
--sealing-key-file to read the answer later with wait or admit): the result
holds it opened in "sensitive": {"id": "value"}, on stdout only.`,
		Example: `  kubectl hitl ask -f question.yaml --agent deploy-bot --timeout 2m
  answers=$(kubectl hitl ask -f q.yaml) || [ $? -eq 3 ] && echo pending
  kubectl hitl ask --agent deploy-bot --question "How many replicas?" --id replicas --type integer --min 1 --max 10 --required
  kubectl hitl ask --agent deploy-bot --question "The registry token?" --id token --sensitive --sealing-key-file ~/.hitl/key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	cmd.Flags().StringVarP(&o.file, "filename", "f", "", `file holding the question ("-" for stdin)`)
	cmd.Flags().StringVar(&o.agent, "agent", "", "the asking agent (default: spec.agent of the file)")
	cmd.Flags().StringVar(&o.name, "name", "", "name of the UserQuestion (default: generated)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "foreground window (default: the file's spec.timeout, else blocking)")
	cmd.Flags().StringVar(&o.keyFile, "sealing-key-file", "", sealingKeyUsage)
	q := &o.inline
	q.set = func(name string) bool { return cmd.Flags().Changed(name) }
	cmd.Flags().StringVar(&q.text, "question", "", "ask this one question instead of a file's (with --agent)")
	cmd.Flags().StringVar(&q.id, "id", "answer", "with --question: the question's id, which its answer names")
	cmd.Flags().StringArrayVar(&q.options, "option", nil, "with --question: an option label (repeatable; without, the question takes free text)")
	cmd.Flags().StringVar(&q.typ, "type", "", "with --question: the free-text answer's type: string, number, integer, boolean, date, dateTime, email or uri")
	cmd.Flags().StringVar(&q.min, "min", "", "with --question: the smallest number or integer accepted")
	cmd.Flags().StringVar(&q.max, "max", "", "with --question: the largest number or integer accepted")
	cmd.Flags().Int32Var(&q.minLength, "min-length", 0, "with --question: the fewest characters of a string, email or uri")
	cmd.Flags().Int32Var(&q.maxLength, "max-length", 0, "with --question: the most characters of a string, email or uri")
	cmd.Flags().StringVar(&q.pattern, "pattern", "", "with --question: a regular expression (RE2) a string answer must match")
	cmd.Flags().BoolVar(&q.required, "required", false, "with --question: the question may not be skipped")
	cmd.Flags().BoolVar(&q.sensitive, "sensitive", false, "with --question: the answer is sealed to this ask's key; only this command prints it, on stdout")
	return cmd
}

// question is the Question of --question and its flags.
func (iq *inlineQuestion) question() hitlv1.Question {
	q := hitlv1.Question{ID: iq.id, Question: iq.text, Sensitive: iq.sensitive}
	for _, l := range iq.options {
		q.Options = append(q.Options, hitlv1.QuestionOption{Label: l})
	}
	if !slices.ContainsFunc(inputFlags, iq.set) {
		return q
	}
	var in hitlv1.AnswerInput
	in.Type = hitlv1.InputType(iq.typ)
	if in.Type == "" {
		in.Type = hitlv1.InputString
	}
	in.Minimum, in.Maximum = bound(iq.min), bound(iq.max)
	if iq.set("min-length") {
		in.MinLength = &iq.minLength
	}
	if iq.set("max-length") {
		in.MaxLength = &iq.maxLength
	}
	in.Pattern, in.Required = iq.pattern, iq.required
	q.Input = &in
	return q
}

// bound is --min or --max: an integer, or a decimal as a string; nil for "".
func bound(s string) *intstr.IntOrString {
	if s == "" {
		return nil
	}
	if n, err := strconv.ParseInt(s, 10, 32); err == nil {
		v := intstr.FromInt32(int32(n))
		return &v
	}
	v := intstr.FromString(s)
	return &v
}

func (o *askOptions) Complete() error { return o.complete() }

func (o *askOptions) Validate() error {
	switch {
	case o.file == "" && o.inline.text == "":
		return errors.New("-f FILE or --question TEXT is required")
	case o.file != "" && o.inline.text != "":
		return errors.New("-f FILE and --question TEXT do not go together: give one")
	case o.inline.text == "":
		for _, f := range inlineFlags {
			if o.inline.set(f) {
				return fmt.Errorf("--%s goes with --question; in a file, set the question's fields (input, sensitive, options)", f)
			}
		}
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
	a, err := o.keyedAgent(spec.Agent, o.keyFile, true)
	if err != nil {
		return err
	}
	if o.keyFile == "" && slices.ContainsFunc(spec.Questions, func(q hitlv1.Question) bool { return q.Sensitive }) {
		fmt.Fprintln(o.streams.ErrOut, "note: the sensitive answers are sealed to a key this process keeps in memory only: "+
			"if it ends before they come (pending, interrupted), they cannot be read; --sealing-key-file keeps the key")
	}
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
	return o.printResult(decidedQ, a)
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
	if o.inline.text != "" {
		spec := hitlv1.UserQuestionSpec{Agent: o.agent, Questions: []hitlv1.Question{o.inline.question()}}
		if spec.Agent == "" {
			return spec, "", errors.New("no agent: pass --agent")
		}
		return spec, o.name, nil
	}
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
	name    string
	for_    string
	keyFile string
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
	cmd.Flags().StringVar(&o.keyFile, "sealing-key-file", "", "the sealing key file the question was asked with (ask --sealing-key-file), to read its sensitive answers")
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
	var opener *agent.Agent
	if o.keyFile != "" {
		if opener, err = o.keyedAgent(q.Spec.Agent, o.keyFile, false); err != nil {
			return err
		}
	}
	q, err = agent.New(o.client, o.namespace, q.Spec.Agent).Wait(ctx, o.name, done)
	if err != nil {
		return err
	}
	if r := q.Status.QueuedReply; o.for_ == "queued" && r != nil {
		return printValue(o.streams.Out, r, "json")
	}
	return o.printResult(q, opener)
}

type admitOptions struct {
	*common
	name    string
	reply   string
	keyFile string
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
	cmd.Flags().StringVar(&o.keyFile, "sealing-key-file", "", "the sealing key file the question was asked with (ask --sealing-key-file), to read its sensitive answers")
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
	a, err := o.keyedAgent(q.Spec.Agent, o.keyFile, false)
	if err != nil {
		return err
	}
	res, err := a.Admit(ctx, q.Name, reply)
	switch {
	case errors.Is(err, sealed.ErrNotOpened) && res.Question != "":
		// Admitted; only the sensitive answers did not open (no key, or
		// another): say so, never a value, and print the rest.
		if o.keyFile == "" {
			err = errors.New("they are sealed to the key the question was asked with: give it with --sealing-key-file to read them")
		}
		fmt.Fprintf(o.streams.ErrOut, "warning: the sensitive answers of question %s were not opened: %v\n", q.Name, err)
	case err != nil:
		return err
	}
	return printValue(o.streams.Out, result{Question: res.Question, CallID: res.CallID, Answers: res.Answers, Late: true,
		Approval: res.Approval, Sensitive: res.Sensitive}, "json")
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
