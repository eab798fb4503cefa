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

// ask is ask_user_question: it checks the ask, then asks and waits as
// agent.Ask (no timeout) or agent.AskTimed do. The call's context ending (a
// cancelled tool call, a client gone) cancels the question: ASK_ABORTED.
func (s *Server) ask(ctx context.Context, req *mcp.CallToolRequest, in AskArgs) (AskResult, string, error) {
	c, a, err := s.caller(ctx, req)
	if err != nil {
		return AskResult{}, "", err
	}
	spec := hitlv1.UserQuestionSpec{Agent: c.Agent, CallID: in.CallID, Questions: in.Questions}
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
	r := agent.Request{CallID: in.CallID, Questions: in.Questions}
	var res agent.Result
	if timeout == nil {
		res, err = a.Ask(ctx, r)
	} else {
		res, err = a.AskTimed(ctx, r, *timeout)
	}
	if err != nil {
		return AskResult{}, "", err
	}
	out := AskResult{Question: res.Question, CallID: res.CallID, Pending: res.Pending, Answers: res.Answers}
	if res.Pending {
		return out, fmt.Sprintf("pending: nobody answered question %s (callID %s) within %s. It stays open to people; "+
			"work on, and later check get_queued_replies and admit_reply for a late answer.", res.Question, res.CallID, in.Timeout), nil
	}
	return out, renderAnswers(in.Questions, res.Answers), nil
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
		out.Active = append(out.Active, ActiveQuestion{Question: q.Name, CallID: q.CallID, State: string(q.State), Questions: q.Questions})
		fmt.Fprintf(&b, "- %s (callID %s): %s\n", q.Name, q.CallID, q.State)
	}
	for _, q := range v.Settled {
		s := SettledQuestion{Question: q.Name, CallID: q.CallID, Answers: q.Answers, Late: q.Late}
		if !q.At.IsZero() {
			s.At = q.At.UTC().Format(time.RFC3339Nano)
		}
		out.Settled = append(out.Settled, s)
		late := ""
		if q.Late {
			late = ", late"
		}
		fmt.Fprintf(&b, "- %s (callID %s): Settled%s\n%s\n", q.Name, q.CallID, late, indent(renderAnswers(nil, q.Answers)))
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
	return AdmitResult{Question: res.Question, CallID: res.CallID, Answers: res.Answers},
		fmt.Sprintf("admitted late reply %s on question %s (callID %s):\n%s", in.Reply, res.Question, res.CallID, renderAnswers(nil, res.Answers)), nil
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
