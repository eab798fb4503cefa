package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/answerer"
	"github.com/hitl-dev/hitl/pkg/sealed"
)

// replyOptions are shared by answer, approve and deny: where the reply goes
// and whether it is sent, or prepared as a manifest for a GitOps
// repository (--dry-run=client prints it, --to-file writes it).
type replyOptions struct {
	*common
	target    string // the question's name
	replyName string
	dryRun    string
	toFile    string
	overwrite bool
	output    *outputFlags
}

func (o *replyOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.replyName, "name", "", "name of the QuestionReply (default: generated; for a manifest, QUESTION-<hash of your username>)")
	cmd.Flags().StringVar(&o.dryRun, "dry-run", "none", `"client" prints the reply manifest instead of creating it (for a GitOps repository)`)
	cmd.Flags().StringVar(&o.toFile, "to-file", "", `write the reply manifest, with a comment for its reviewer, to this file ("-": stdout) instead of creating the reply, to commit it to a GitOps repository`)
	cmd.Flags().BoolVar(&o.overwrite, "overwrite", false, "with --to-file: replace the file even if it holds something other than a reply to the same question")
	o.output = newOutputFlags("the outcome (yaml with --dry-run=client)", false)
	o.output.addFlags(cmd)
	cmd.ValidArgsFunction = o.completeQuestions((*hitlv1.UserQuestion).Answerable)
}

func (o *replyOptions) validate() error {
	switch {
	case o.dryRun != "none" && o.dryRun != "client":
		return fmt.Errorf(`--dry-run must be "none" or "client", not %q`, o.dryRun)
	case o.toFile != "" && o.dryRun == "client":
		return errors.New("--to-file writes the manifest that --dry-run=client prints: give one of them")
	case o.toFile != "" && !o.output.isHuman() && o.output.format() != "yaml":
		return fmt.Errorf("--to-file writes YAML: -o %s does not go with it", o.output.format())
	case o.overwrite && o.toFile == "":
		return errors.New("--overwrite goes with --to-file")
	}
	return o.output.validate()
}

// manifest reports whether the reply is prepared as a manifest, applied
// later by whoever applies it, rather than created now.
func (o *replyOptions) manifest() bool { return o.dryRun == "client" || o.toFile != "" }

// submit checks the batch against the question, then prepares the reply
// manifest (writeManifest) or creates the reply and reports its outcome.
// The reply is bound to the question read, by its uid and its spec
// digest: a question replaced or changed since is not answered by it.
func (o *replyOptions) submit(ctx context.Context, q *hitlv1.UserQuestion, answers []hitlv1.AnswerItem) error {
	if err := validation.ValidateAnswers(q.Spec.Questions, answers); err != nil {
		return err
	}
	reply := &hitlv1.QuestionReply{
		ObjectMeta: metav1.ObjectMeta{Name: o.replyName, Namespace: q.Namespace,
			Labels: map[string]string{hitlv1.AgentLabel: q.Spec.Agent, hitlv1.QuestionLabel: q.Name}},
		Spec: hitlv1.QuestionReplySpec{
			QuestionRef: hitlv1.QuestionReference{Name: q.Name, UID: q.UID, SpecDigest: q.Status.SpecDigest},
			Answers:     answers,
		},
	}
	if o.manifest() {
		return o.writeManifest(ctx, q, reply)
	}
	if reply.Name == "" {
		reply.GenerateName = q.Name + "-"
	}
	out, err := answerer.New(o.client, q.Namespace, "", q.Spec.Agent).Create(ctx, reply)
	if err != nil {
		return err
	}
	if o.output.isHuman() {
		return reportOutcome(o.common, out)
	}
	// The created reply, as the API server has it now, goes to stdout in
	// the -o format; the outcome goes to stderr.
	if err := reportOutcomeTo(o.streams.ErrOut, out); err != nil {
		return err
	}
	created := &hitlv1.QuestionReply{}
	if err := o.client.Get(ctx, types.NamespacedName{Namespace: q.Namespace, Name: out.Reply}, created); err != nil {
		return fmt.Errorf("reading reply %s: %w", out.Reply, err)
	}
	return o.output.printObject(o.streams.Out, created)
}

// read reads the question to reply to, and refuses, before the person is
// prompted and before anything is created or written, a reply that could
// not count: a manifest for a question no reply can answer any more
// (checkPreparable), or a second vote of the user on a governed question.
// A manifest's vote is not the user's but that of whoever applies it, so
// it is not checked against the user's.
func (o *replyOptions) read(ctx context.Context) (*hitlv1.UserQuestion, error) {
	q, err := o.question(ctx, o.target)
	if err != nil {
		return nil, err
	}
	if o.manifest() {
		err = o.checkPreparable(q)
	} else {
		err = o.checkVoter(ctx, q)
	}
	if err != nil {
		return nil, err
	}
	return q, nil
}

// checkVoter refuses, before anything is created, a second vote of the
// user on a governed question, which the controller would reject
// (DUPLICATE_VOTE).
func (c *common) checkVoter(ctx context.Context, q *hitlv1.UserQuestion) error {
	if ap, me, ok := c.voter(ctx, q); ok {
		return ap.CheckVoter(me)
	}
	return nil
}

// voter is the approval rule of q and the user's name, when q is governed
// and the API server says who the user is. When it cannot, voter says so
// and leaves the decision to the controller: ok is false.
func (c *common) voter(ctx context.Context, q *hitlv1.UserQuestion) (ap *answerer.Approval, me string, ok bool) {
	if ap = answerer.ApprovalOf(q); ap == nil {
		return nil, "", false
	}
	me, err := c.whoAmI(ctx)
	if err != nil {
		fmt.Fprintf(c.streams.ErrOut, "warning: cannot tell whether you have voted on %s already: %v\n", q.Name, err)
		return nil, "", false
	}
	return ap, me, true
}

func reportOutcome(c *common, out answerer.Outcome) error { return reportOutcomeTo(c.streams.Out, out) }

// reportOutcomeTo writes a reply's outcome to w; a rejection is an
// ExitRejected error instead. Counted, a vote that did not decide its
// question yet, is a success.
func reportOutcomeTo(w io.Writer, out answerer.Outcome) error {
	if err := out.Err(); err != nil {
		return &ExitError{Code: ExitRejected, Err: fmt.Errorf("reply %s was rejected: %w", out.Reply, err)}
	}
	fmt.Fprintf(w, "reply %s: %s — %s\n", out.Reply, out.Outcome, out.Message)
	if out.Outcome == hitlv1.OutcomeCounted {
		fmt.Fprintln(w, "Your vote is counted; the question needs more approvals.")
	}
	return nil
}

type answerOptions struct {
	replyOptions
	selects []string
	customs []string
	skips   []string
	// sensitiveFiles are --sensitive-from-file's id=PATH ("-": stdin).
	sensitiveFiles []string
}

func newAnswerCommand(c *common) *cobra.Command {
	o := &answerOptions{replyOptions: replyOptions{common: c}}
	cmd := &cobra.Command{
		Use:   "answer NAME",
		Short: "Answer a question, by flags or, without them, by interactive prompts",
		Long: `Answer a question. Questions not named by a flag are skipped (a batch may
skip some questions, not all). Without flags, each question is prompted for.

For a GitOps repository, --to-file writes the reply as a manifest to commit
instead of creating it (--dry-run=client prints it): bound to the question
read by its uid and spec digest, named QUESTION-<hash of your username> (or
--name) so that preparing it again rewrites the same reply, with no
answeredBy (whoever applies it answers), and opened by a comment for the
reviewer. A question already Settled or Cancelled is refused
(NOT_ANSWERABLE); a file that holds anything but a reply to the same
question is not replaced without --overwrite.

A question may say what free text it takes (an integer from 1 to 10, a
date, an email address, a pattern; see show): the prompts say it, check
each answer as it is typed and ask again with the rule broken; --custom is
checked the same way before anything is created (BAD_ANSWER). A required
question cannot be skipped.

A sensitive question (an API key, a one-time code) is answered sealed to
the asking agent's key: the reply holds only a value the agent alone can
open. Its prompt does not show what is typed (when stdin is a terminal;
otherwise it reads a line of stdin). Without prompts, give its value with
--sensitive-from-file ID=PATH, or ID=- to read it from stdin; never with
--custom, which is refused: a command-line argument stays in your shell
history and in the process list. The value is never printed.`,
		Example: `  kubectl hitl answer deploy-target --select env=staging --custom notes="ship it"
  kubectl hitl answer lunch-order --select food=pizza,salad
  kubectl hitl answer deploy-target --select env=prod --skip notes --dry-run=client -o yaml > reply.yaml
  kubectl hitl answer deploy-target --select env=prod --to-file replies/deploy-target.yaml
  kubectl hitl answer deploy-target          # interactive
  kubectl hitl answer scale-up --custom replicas=4 --custom when=2026-12-24
  kubectl hitl answer api-access --sensitive-from-file token=- < token.txt`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.target = args[0]
			return run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringArrayVar(&o.selects, "select", nil, "id=label[,label]: select options of question id (repeatable; a label holding a comma is taken whole)")
	cmd.Flags().StringArrayVar(&o.customs, "custom", nil, "id=text: free-text answer to question id (repeatable)")
	cmd.Flags().StringArrayVar(&o.skips, "skip", nil, "id: skip question id (repeatable)")
	cmd.Flags().StringArrayVar(&o.sensitiveFiles, "sensitive-from-file", nil,
		`id=PATH: answer the sensitive question id with the content of PATH ("-": stdin; one line ending is dropped), sealed for the agent (repeatable)`)
	o.addFlags(cmd)
	return cmd
}

func (o *answerOptions) Complete() error { return o.complete() }
func (o *answerOptions) Validate() error { return o.validate() }

func (o *answerOptions) Run(ctx context.Context) error {
	q, err := o.read(ctx)
	if err != nil {
		return err
	}
	var answers []hitlv1.AnswerItem
	if len(o.selects)+len(o.customs)+len(o.skips)+len(o.sensitiveFiles) == 0 {
		printCard(o.streams.ErrOut, q, nowFunc())
		answers, err = newPrompter(ctx, o.streams.In, o.streams.ErrOut).batch(q)
	} else {
		answers, err = batchFromFlags(q, o.selects, o.customs, o.skips)
		if err == nil {
			answers, err = o.sealFromFiles(q, answers)
		}
	}
	if err != nil {
		return err
	}
	return o.submit(ctx, q, answers)
}

// sealFromFiles answers the sensitive questions --sensitive-from-file
// names in answers (a batch of batchFromFlags), each with the content of
// its file (stdin for "-", read once) less one line ending, checked
// against the question's input rule and sealed to the question's key
// (answerer.Seal). No error holds the value.
func (o *answerOptions) sealFromFiles(q *hitlv1.UserQuestion, answers []hitlv1.AnswerItem) ([]hitlv1.AnswerItem, error) {
	stdin := false
	for _, s := range o.sensitiveFiles {
		id, path, ok := strings.Cut(s, "=")
		if !ok || id == "" || path == "" {
			return nil, fmt.Errorf("--sensitive-from-file %q: want id=PATH (PATH - for stdin)", s)
		}
		i := slices.IndexFunc(answers, func(a hitlv1.AnswerItem) bool { return a.ID == id })
		if i < 0 {
			return nil, &validation.Error{Code: hitlv1.CodeBadAnswer, QuestionID: id, Rule: "not a question of " + q.Name}
		}
		if !answers[i].Skipped() || slices.Contains(o.skips, id) {
			return nil, &validation.Error{Code: hitlv1.CodeBadAnswer, QuestionID: id,
				Rule: "--sensitive-from-file contradicts --skip, or is given more than once, for the same question"}
		}
		if path == "-" {
			if stdin {
				return nil, errors.New("--sensitive-from-file: only one question can read its answer from stdin (-)")
			}
			stdin = true
		}
		value, err := o.readSensitive(path)
		if err != nil {
			return nil, fmt.Errorf("--sensitive-from-file %s: %w", id, err)
		}
		if answers[i], err = answerer.Seal(q, id, value); err != nil {
			return nil, err
		}
	}
	return answers, nil
}

// readSensitive reads a sensitive value from path ("-": stdin), dropping
// one line ending ("\n" or "\r\n"), as `echo` and editors add one.
func (o *answerOptions) readSensitive(path string) (string, error) {
	in := o.streams.In
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		in = f
	}
	// Enough to tell a value above sealed.MaxValue, which Seal refuses.
	data, err := io.ReadAll(io.LimitReader(in, sealed.MaxValue+3))
	if err != nil {
		return "", err // no value in it: the path, or stdin, and why
	}
	value := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if value == "" {
		return "", errors.New("the answer is empty: skip the question with --skip instead")
	}
	return value, nil
}

// batchFromFlags builds a batch with one item per question of the ask;
// questions no flag names are skipped. The value of --select id=V is one
// label when V is exactly a label of question id (labels may hold commas),
// and otherwise a comma-separated list of labels; repeated --select flags
// for one question add up. A flag naming a question the ask does not have,
// a question both skipped and answered, or custom text given twice for one
// question is BAD_ANSWER naming that question, rather than read one way or
// the other.
func batchFromFlags(q *hitlv1.UserQuestion, selects, customs, skips []string) ([]hitlv1.AnswerItem, error) {
	items := map[string]*hitlv1.AnswerItem{}
	asked := map[string]*hitlv1.Question{}
	for i := range q.Spec.Questions {
		asked[q.Spec.Questions[i].ID] = &q.Spec.Questions[i]
	}
	badAnswer := func(id, format string, args ...any) error {
		return &validation.Error{Code: hitlv1.CodeBadAnswer, QuestionID: id, Rule: fmt.Sprintf(format, args...)}
	}
	item := func(id string) (*hitlv1.AnswerItem, error) {
		if asked[id] == nil {
			return nil, badAnswer(id, "not a question of %s", q.Name)
		}
		if items[id] == nil {
			items[id] = &hitlv1.AnswerItem{ID: id}
		}
		return items[id], nil
	}
	// The value of a sensitive question never comes as an argument, and
	// no error quotes one.
	onCommandLine := func(id, flag string) error {
		return badAnswer(id, "the question is sensitive: its answer is never given as a command-line argument (%s), which stays "+
			"in your shell history and the process list; use --sensitive-from-file %s=PATH (%s=- reads stdin), or answer at the prompt", flag, id, id)
	}
	for _, s := range selects {
		id, value, ok := strings.Cut(s, "=")
		if ok && asked[id] != nil && asked[id].Sensitive {
			return nil, onCommandLine(id, "--select")
		}
		if !ok || value == "" {
			return nil, fmt.Errorf("--select %q: want id=label[,label]", s)
		}
		it, err := item(id)
		if err != nil {
			return nil, err
		}
		if hasOption(asked[id], value) {
			it.Selected = append(it.Selected, value)
		} else {
			it.Selected = append(it.Selected, strings.Split(value, ",")...)
		}
	}
	texts := map[string]bool{}
	for _, s := range customs {
		id, text, ok := strings.Cut(s, "=")
		if ok && asked[id] != nil && asked[id].Sensitive {
			return nil, onCommandLine(id, "--custom")
		}
		if !ok {
			return nil, fmt.Errorf("--custom %q: want id=text", s)
		}
		it, err := item(id)
		if err != nil {
			return nil, err
		}
		if texts[id] {
			return nil, badAnswer(id, "--custom is given more than once")
		}
		texts[id] = true
		it.Custom = text
	}
	for _, id := range skips {
		it, err := item(id)
		if err != nil {
			return nil, err
		}
		if len(it.Selected) > 0 || texts[id] {
			return nil, badAnswer(id, "--skip contradicts --select or --custom for the same question")
		}
	}
	answers := make([]hitlv1.AnswerItem, 0, len(q.Spec.Questions))
	for _, question := range q.Spec.Questions {
		if it := items[question.ID]; it != nil {
			answers = append(answers, *it)
		} else {
			answers = append(answers, hitlv1.AnswerItem{ID: question.ID})
		}
	}
	return answers, nil
}

// hasOption reports whether label is one of q's option labels.
func hasOption(q *hitlv1.Question, label string) bool {
	for _, o := range q.Options {
		if o.Label == label {
			return true
		}
	}
	return false
}

type decideOptions struct {
	replyOptions
	approve bool
	always  bool
	option  string
}

// newDecideCommand is `approve` (approve=true) or `deny`.
func newDecideCommand(c *common, approve bool) *cobra.Command {
	o := &decideOptions{replyOptions: replyOptions{common: c}, approve: approve}
	use, short := "deny NAME", "Decline a PlanReview or reject an Approval question"
	if approve {
		use, short = "approve NAME", "Approve a PlanReview or Approval question"
	}
	verb := strings.Fields(use)[0]
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: "  kubectl hitl " + verb + " migration-plan\n  kubectl hitl " + verb + " migration-plan --to-file replies/migration-plan.yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.target = args[0]
			return run(cmd.Context(), o)
		},
	}
	if approve {
		cmd.Flags().BoolVar(&o.always, "always", false, "choose an Approval's always label instead of its approve label")
	} else {
		cmd.Flags().StringVar(&o.option, "option", "", "the declining option of a PlanReview with several (default: the first that does not approve)")
	}
	o.addFlags(cmd)
	return cmd
}

func (o *decideOptions) Complete() error { return o.complete() }
func (o *decideOptions) Validate() error { return o.validate() }

func (o *decideOptions) Run(ctx context.Context) error {
	q, err := o.read(ctx)
	if err != nil {
		return err
	}
	answers, err := decision(q, o.approve, o.always, o.option)
	if err != nil {
		return err
	}
	return o.submit(ctx, q, answers)
}

// decision answers the question that carries a PlanReview or Approval
// intent with its approving or declining label, and skips the others.
func decision(q *hitlv1.UserQuestion, approve, always bool, option string) ([]hitlv1.AnswerItem, error) {
	var answers []hitlv1.AnswerItem
	found := false
	for _, question := range q.Spec.Questions {
		item := hitlv1.AnswerItem{ID: question.ID}
		if in := question.Intent; in != nil && !found {
			label, err := decisionLabel(&question, approve, always, option)
			if err != nil {
				return nil, err
			}
			item.Selected, found = []string{label}, true
		}
		answers = append(answers, item)
	}
	if !found {
		return nil, fmt.Errorf("question %s has no PlanReview or Approval intent: use `kubectl hitl answer`", q.Name)
	}
	return answers, nil
}

func decisionLabel(q *hitlv1.Question, approve, always bool, option string) (string, error) {
	in := q.Intent
	switch {
	case in.Approval != nil && approve && always:
		if in.Approval.Always == "" {
			return "", fmt.Errorf("question %s offers no always label", q.ID)
		}
		return in.Approval.Always, nil
	case in.Approval != nil && approve:
		return in.Approval.Approve, nil
	case in.Approval != nil:
		return in.Approval.Reject, nil
	case in.PlanReview != nil && approve:
		return in.PlanReview.Approve, nil
	case in.PlanReview != nil && option != "":
		return option, nil
	case in.PlanReview != nil:
		for _, o := range q.Options {
			if o.Label != in.PlanReview.Approve {
				return o.Label, nil
			}
		}
		return "", fmt.Errorf("question %s has no declining option", q.ID)
	}
	return "", fmt.Errorf("question %s has an intent without settings", q.ID)
}
