package mcp

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/agent"
)

// ask is ask_user_question: it checks the ask, asks as agent.Ask (no
// timeout) or agent.AskTimed do, and waits as await does: at most the max
// wait, counted from the call's start.
func (s *Server) ask(ctx context.Context, req *mcp.CallToolRequest, in AskArgs) (AskResult, string, error) {
	start := time.Now()
	c, a, err := s.caller(ctx, req)
	if err != nil {
		return AskResult{}, "", err
	}
	spec := hitlv1.UserQuestionSpec{Agent: c.Agent, CallID: in.CallID, Questions: in.Questions, Approval: in.Approval}
	var timeout *time.Duration
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil {
			return AskResult{}, "", fmt.Errorf("%s: timeout %q is not a duration; give one like \"30s\", \"2m\" or \"1h30m\", or leave it out to wait until answered (timeout)", hitlv1.CodeBadTimeout, in.Timeout)
		}
		timeout = &d
		spec.Timeout = &metav1.Duration{Duration: d}
	}
	if err := validation.ValidateAsk(&spec, 0); err != nil {
		return AskResult{}, "", argumentsError(err)
	}
	for i, q := range in.Questions {
		switch {
		case q.ID == "":
			return AskResult{}, "", fmt.Errorf("%s: every question needs an id (questions[%d].id)", CodeBadArguments, i)
		case q.Question == "":
			return AskResult{}, "", fmt.Errorf("%s: question %s has no text (questions[%d].question)", CodeBadArguments, q.ID, i)
		}
	}
	release, err := s.acquire(c.Key)
	if err != nil {
		return AskResult{}, "", err
	}
	defer release()
	stop := s.progress(ctx, req, "waiting for a person to answer")
	defer stop()
	if ctx.Err() != nil {
		return AskResult{}, "", &validation.Error{Code: hitlv1.CodeAskAborted, Rule: fmt.Sprintf("the call ended before the ask was made (%v)", context.Cause(ctx))}
	}
	q, err := create(ctx, a, agent.Request{CallID: in.CallID, Questions: in.Questions, Approval: in.Approval}, timeout)
	if err != nil {
		return AskResult{}, "", err
	}
	return s.await(ctx, c, a, q.Name, start)
}

// approvalOf is a governed question's rule and votes as the tools return
// them; nil for a question no approval rule governs.
func approvalOf(a *agent.Approval) *Approval {
	if a == nil {
		return nil
	}
	out := &Approval{Approvals: a.Rule.Approvals, From: a.Rule.From, Veto: a.Rule.Veto, ExcludeRequester: a.Rule.ExcludeRequester,
		Tally: a.Tally, Votes: []Vote{}}
	for _, p := range a.Rule.Policies {
		out.Policies = append(out.Policies, p.Name)
	}
	for _, v := range a.Votes {
		vote := Vote{By: v.By.Username, Choice: string(v.Choice), Sets: v.Sets, Reply: v.Reply}
		if !v.At.IsZero() {
			vote.At = v.At.UTC().Format(time.RFC3339Nano)
		}
		out.Votes = append(out.Votes, vote)
	}
	return out
}

// withVotes adds to text, on a line of their own, a governed question's
// votes: "votes 2/2 (2 approvals needed): alice Approve, bob Approve".
func withVotes(text string, a *Approval) string {
	if a == nil {
		return text
	}
	votes := make([]string, 0, len(a.Votes))
	for _, v := range a.Votes {
		votes = append(votes, orUnknown(v.By)+" "+v.Choice)
	}
	if len(votes) == 0 {
		votes = append(votes, "none yet")
	}
	return text + fmt.Sprintf("\nvotes %s (%d %s needed): %s", a.Tally, a.Approvals, plural(int(a.Approvals), "approval", "approvals"), strings.Join(votes, ", "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// argumentsError names the tool's argument instead of the UserQuestion's
// field in a rule the SDK checked (spec.questions[0] is questions[0]).
func argumentsError(err error) error {
	var v *validation.Error
	if !errors.As(err, &v) {
		return err
	}
	local := *v
	local.Field = strings.TrimPrefix(local.Field, "spec.")
	return &local
}

func (s *Server) list(ctx context.Context, req *mcp.CallToolRequest, _ NoArgs) (ListResult, string, error) {
	_, a, err := s.caller(ctx, req)
	if err != nil {
		return ListResult{}, "", err
	}
	v, err := a.Projection(ctx)
	if err != nil {
		return ListResult{}, "", err
	}
	out := ListResult{Active: []ActiveQuestion{}, Settled: []SettledQuestion{}}
	var b strings.Builder
	fmt.Fprintf(&b, "%d active, %d settled question(s) of agent %s.\n", len(v.Active), len(v.Settled), a.Name())
	for _, q := range v.Active {
		a := ActiveQuestion{Question: q.Name, CallID: q.CallID, State: string(q.State), Questions: q.Questions, Approval: approvalOf(q.Approval)}
		out.Active = append(out.Active, a)
		fmt.Fprintf(&b, "- %s (callID %s): %s\n", q.Name, q.CallID, q.State)
		if a.Approval != nil {
			fmt.Fprintf(&b, "%s\n", indent(strings.TrimPrefix(withVotes("", a.Approval), "\n")))
		}
	}
	for _, q := range v.Settled {
		s := SettledQuestion{Question: q.Name, CallID: q.CallID, Answers: q.Answers, Late: q.Late, Approval: approvalOf(q.Approval)}
		if !q.At.IsZero() {
			s.At = q.At.UTC().Format(time.RFC3339Nano)
		}
		out.Settled = append(out.Settled, s)
		late := ""
		if q.Late {
			late = ", late"
		}
		fmt.Fprintf(&b, "- %s (callID %s): Settled%s\n%s\n", q.Name, q.CallID, late, indent(withVotes(renderAnswers(nil, q.Answers), s.Approval)))
	}
	return out, strings.TrimRight(b.String(), "\n"), nil
}

func (s *Server) queued(ctx context.Context, req *mcp.CallToolRequest, _ NoArgs) (QueuedResult, string, error) {
	c, _, err := s.caller(ctx, req)
	if err != nil {
		return QueuedResult{}, "", err
	}
	l := &hitlv1.UserQuestionList{}
	if err := c.Client.List(ctx, l, client.InNamespace(c.Namespace), client.MatchingLabels{hitlv1.AgentLabel: c.Agent}); err != nil {
		return QueuedResult{}, "", fmt.Errorf("listing the questions of agent %s in %s: %w", c.Agent, c.Namespace, err)
	}
	type item struct {
		r  QueuedReply
		at time.Time
	}
	var items []item
	for _, q := range l.Items {
		qr := q.Status.QueuedReply
		if qr == nil || q.Status.State.Terminal() {
			continue
		}
		r := QueuedReply{Question: q.Name, CallID: q.CallID(), Reply: qr.Name, Answers: qr.Answers}
		if qr.AnsweredBy != nil {
			r.AnsweredBy = qr.AnsweredBy.Username
		}
		if !qr.QueuedAt.IsZero() {
			r.QueuedAt = qr.QueuedAt.UTC().Format(time.RFC3339Nano)
		}
		items = append(items, item{r, qr.QueuedAt.Time})
	}
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].at.Equal(items[j].at) {
			return items[i].at.Before(items[j].at)
		}
		return items[i].r.Question < items[j].r.Question
	})
	out := QueuedResult{Replies: []QueuedReply{}}
	var b strings.Builder
	fmt.Fprintf(&b, "%d late reply(ies) waiting for admit_reply.\n", len(items))
	for _, it := range items {
		out.Replies = append(out.Replies, it.r)
		fmt.Fprintf(&b, "- reply %s on question %s (callID %s), from %s:\n%s\n", it.r.Reply, it.r.Question, it.r.CallID, orUnknown(it.r.AnsweredBy), indent(renderAnswers(nil, it.r.Answers)))
	}
	return out, strings.TrimRight(b.String(), "\n"), nil
}

func (s *Server) admit(ctx context.Context, req *mcp.CallToolRequest, in AdmitArgs) (AdmitResult, string, error) {
	if in.Question == "" {
		return AdmitResult{}, "", fmt.Errorf("%s: the question's name is required (question)", CodeBadArguments)
	}
	if in.Reply == "" {
		return AdmitResult{}, "", fmt.Errorf("%s: the queued reply's name is required, see get_queued_replies (reply)", CodeBadArguments)
	}
	c, a, err := s.caller(ctx, req)
	if err != nil {
		return AdmitResult{}, "", err
	}
	release, err := s.acquire(c.Key)
	if err != nil {
		return AdmitResult{}, "", err
	}
	defer release()
	res, err := a.Admit(ctx, in.Question, in.Reply)
	if err != nil {
		return AdmitResult{}, "", err
	}
	out := AdmitResult{Question: res.Question, CallID: res.CallID, Answers: res.Answers, Approval: approvalOf(res.Approval)}
	return out, fmt.Sprintf("admitted late reply %s on question %s (callID %s):\n%s", in.Reply, res.Question, res.CallID,
		withVotes(renderAnswers(nil, res.Answers), out.Approval)), nil
}

func (s *Server) cancel(ctx context.Context, req *mcp.CallToolRequest, in CancelArgs) (CancelResult, string, error) {
	if in.Question == "" {
		return CancelResult{}, "", fmt.Errorf("%s: the question's name is required (question)", CodeBadArguments)
	}
	c, a, err := s.caller(ctx, req)
	if err != nil {
		return CancelResult{}, "", err
	}
	if err := a.Cancel(ctx, in.Question); err != nil {
		return CancelResult{}, "", err
	}
	// Cancel leaves a finished question as it is: say so.
	q := &hitlv1.UserQuestion{}
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: in.Question}, q); err != nil {
		return CancelResult{}, "", fmt.Errorf("reading question %s: %w", in.Question, err)
	}
	if !q.Spec.Cancelled {
		return CancelResult{}, "", &validation.Error{Code: hitlv1.CodeNotAnswerable, Field: "question",
			Rule: fmt.Sprintf("question %s is %s and can no longer be cancelled", in.Question, q.Status.State)}
	}
	return CancelResult{Question: in.Question, Cancelled: true}, fmt.Sprintf("question %s is cancelled", in.Question), nil
}

// renderAnswers is a batch as text, one line per question, with the
// question's text when questions are known.
func renderAnswers(questions []hitlv1.Question, answers []hitlv1.AnswerItem) string {
	texts := map[string]string{}
	for _, q := range questions {
		texts[q.ID] = q.Question
	}
	var b strings.Builder
	for i, a := range answers {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(a.ID)
		if t := texts[a.ID]; t != "" {
			fmt.Fprintf(&b, " (%s)", t)
		}
		b.WriteString(": ")
		var parts []string
		if len(a.Selected) > 0 {
			parts = append(parts, strings.Join(a.Selected, ", "))
		}
		if a.Custom != "" {
			parts = append(parts, fmt.Sprintf("%q", a.Custom))
		}
		if len(parts) == 0 {
			parts = append(parts, "(skipped)")
		}
		b.WriteString(strings.Join(parts, "; "))
	}
	if b.Len() == 0 {
		return "(no answers)"
	}
	return b.String()
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

func orUnknown(s string) string {
	if s == "" {
		return "an unknown user"
	}
	return s
}
