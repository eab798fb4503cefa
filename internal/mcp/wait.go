package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/agent"
)

// errStopping is the cause of a call's context when Options.Context ends.
var errStopping = errors.New("the MCP server is stopping")

// cancelGrace bounds the writes a call makes after its context ended: the
// create of its ask, and the cancel of a question whose session ended.
const cancelGrace = 10 * time.Second

// disconnected tells why ctx, a waiting call's context, ended: true when
// its session's connection broke (stdio: the agent's process closed its
// end, or exited) or Options.Context ended; false when the client
// cancelled the call (notifications/cancelled), whether its request
// timeout fired or its user gave up, which the protocol does not tell
// apart (the reason is free text, and the SDK does not pass it on). The SDK
// cancels the call of a notifications/cancelled without a cause
// (context.Canceled), and the calls of a broken connection with the read
// or write error.
func disconnected(ctx context.Context) bool {
	cause := context.Cause(ctx)
	return errors.Is(cause, errStopping) || !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded)
}

// create makes the question of an ask with a context that outlives the
// call's by up to cancelGrace: a create cut off in flight may still be made
// by the API server, and the call must know the question to leave or
// cancel it.
func create(ctx context.Context, a *agent.Agent, r agent.Request, timeout *time.Duration) (*hitlv1.UserQuestion, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
	defer cancel()
	return a.Create(cctx, r, timeout)
}

// await waits until the agent's question name leaves Open and returns it as
// the tools do (result), or, when the call has waited its max wait since
// start, returns it still waiting. A call whose context ends first leaves
// the question as it is, or cancels it (ended). The calls of an agent wait
// through one shared watch of its questions (watch.go).
func (s *Server) await(ctx context.Context, c *Caller, a *agent.Agent, name string, start time.Time) (*hitlv1.UserQuestion, AskResult, string, error) {
	wctx := ctx
	if s.opts.MaxWait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, start.Add(s.opts.MaxWait))
		defer cancel()
	}
	q, err := wait(wctx, c, name)
	switch {
	case err == nil:
		return answered(q)
	case ctx.Err() != nil:
		return s.ended(ctx, c, a, name)
	case wctx.Err() == nil && !nearDeadline(wctx):
		// A read refused just before the maximum wait (the client's rate
		// limiter refuses a wait that would pass its deadline) is the wait
		// ending, not a failure.
		return nil, AskResult{}, "", err
	}
	// Read once more: an answer that came at the last moment is returned,
	// and a governed question's votes so far.
	if q, err = get(ctx, c, name); err != nil {
		return nil, AskResult{}, "", err
	}
	if q.LeftOpen() {
		return answered(q)
	}
	res, text, err := s.waiting(q)
	return q, res, text, err
}

// nearDeadline reports whether ctx ends within a second.
func nearDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && time.Until(d) < time.Second
}

// ended is what a call whose context ended while it waited does with its
// question: it leaves it as it is when the client cancelled the call, or
// when the server keeps questions on disconnect, and returns it as await
// does (a client that cancelled reads nothing; one whose server stops
// learns how to go on); otherwise, the agent's process having ended, it
// cancels it (ASK_ABORTED).
func (s *Server) ended(ctx context.Context, c *Caller, a *agent.Agent, name string) (*hitlv1.UserQuestion, AskResult, string, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
	defer cancel()
	if !disconnected(ctx) || s.opts.KeepOnDisconnect {
		q, err := get(cctx, c, name)
		switch {
		case err != nil:
			return nil, AskResult{}, "", err
		case q.LeftOpen():
			return answered(q)
		}
		res, text, err := s.waiting(q)
		return q, res, text, err
	}
	why := context.Cause(ctx)
	if err := a.Cancel(cctx, name); err != nil {
		return nil, AskResult{}, "", &validation.Error{Code: hitlv1.CodeAskAborted,
			Rule: fmt.Sprintf("the call waiting for question %s ended with its session (%v), and cancelling the question failed: %v", name, why, err)}
	}
	return nil, AskResult{}, "", &validation.Error{Code: hitlv1.CodeAskAborted,
		Rule: fmt.Sprintf("the call waiting for question %s ended with its session (%v), and the question is cancelled", name, why)}
}

// answered is result with the question it is of.
func answered(q *hitlv1.UserQuestion) (*hitlv1.UserQuestion, AskResult, string, error) {
	res, text, err := result(q)
	return q, res, text, err
}

// result is what a call returns for a question that left Open, as
// agent.ResultOf says: its answers, pending, or ASK_ABORTED when it was
// cancelled; with its text.
func result(q *hitlv1.UserQuestion) (AskResult, string, error) {
	res, err := agent.ResultOf(q)
	if err != nil {
		return AskResult{}, "", err
	}
	out := AskResult{Question: res.Question, CallID: res.CallID, Pending: res.Pending, Answers: res.Answers, Approval: approvalOf(res.Approval)}
	if res.Pending {
		return out, fmt.Sprintf("pending: nobody answered question %s (callID %s) within %s. It stays open to people; "+
			"work on, and later check get_queued_replies and admit_reply for a late answer.", res.Question, res.CallID, window(q)) +
			withVotes("", out.Approval), nil
	}
	return out, withVotes(renderAnswers(q.Spec.Questions, out.Answers), out.Approval), nil
}

// window is a timed question's timeout as the agent gave it.
func window(q *hitlv1.UserQuestion) string {
	if q.Spec.Timeout == nil {
		return "its window"
	}
	return q.Spec.Timeout.Duration.String()
}

// waiting is the result of a call that waited its max wait on an Open
// question, and its text tells the model how to go on.
func (s *Server) waiting(q *hitlv1.UserQuestion) (AskResult, string, error) {
	out := AskResult{Question: q.Name, CallID: q.CallID(), Waiting: true, Approval: approvalOf(agent.ApprovalOf(q))}
	next, err := json.Marshal(WaitArgs{CallID: out.CallID, Question: out.Question})
	if err != nil {
		return AskResult{}, "", err
	}
	text := fmt.Sprintf("still waiting: nobody has answered question %s (callID %s) yet, and it stays open to people. "+
		"To keep waiting, call wait_for_answer with %s", q.Name, out.CallID, next)
	if s.opts.MaxWait > 0 {
		text += fmt.Sprintf(" (one call waits up to %s)", s.opts.MaxWait)
	}
	text += fmt.Sprintf("; to withdraw the question, call cancel_question with {\"question\": %q}.", q.Name)
	if deadline, ok := q.Deadline(); ok {
		text += fmt.Sprintf(" Its %s window closes at %s; after that wait_for_answer returns pending.", window(q), deadline.UTC().Format(time.RFC3339))
	}
	return out, text + withVotes("", out.Approval), nil
}

// waitFor is wait_for_answer: it finds the agent's question by callID (and
// name), and waits as ask_user_question does.
func (s *Server) waitFor(ctx context.Context, req *mcp.CallToolRequest, in WaitArgs) (*hitlv1.UserQuestion, AskResult, string, error) {
	start := time.Now()
	if in.CallID == "" {
		return nil, AskResult{}, "", fmt.Errorf("%s: the callID that ask_user_question returned is required (callID)", CodeBadArguments)
	}
	c, a, err := s.caller(ctx, req)
	if err != nil {
		return nil, AskResult{}, "", err
	}
	release, err := s.acquire(c.Key)
	if err != nil {
		return nil, AskResult{}, "", err
	}
	defer release()
	stop := s.progress(ctx, req, "waiting for a person to answer")
	defer stop()
	name, err := resolve(ctx, c, in)
	if err != nil {
		return nil, AskResult{}, "", err
	}
	return s.await(ctx, c, a, name, start)
}

// resolve finds the name of the agent's question that in names: the one
// named in.Question, which must have in.CallID, or else the newest (in ask
// order) with in.CallID. None is UNKNOWN_CALL.
func resolve(ctx context.Context, c *Caller, in WaitArgs) (string, error) {
	if in.Question != "" {
		q, err := get(ctx, c, in.Question)
		switch {
		case validation.IsCode(err, hitlv1.CodeNotAnswerable):
			return "", fmt.Errorf("%s: agent %s has no question %s in namespace %s (question)", CodeUnknownCall, c.Agent, in.Question, c.Namespace)
		case err != nil:
			return "", err
		case q.CallID() != in.CallID:
			return "", fmt.Errorf("%s: question %s has callID %s, not %s (callID)", CodeUnknownCall, in.Question, q.CallID(), in.CallID)
		}
		return q.Name, nil
	}
	l := &hitlv1.UserQuestionList{}
	if err := c.Client.List(ctx, l, client.InNamespace(c.Namespace), client.MatchingLabels{hitlv1.AgentLabel: c.Agent}); err != nil {
		return "", fmt.Errorf("listing the questions of agent %s in %s: %w", c.Agent, c.Namespace, err)
	}
	hitlv1.SortAskOrder(l.Items)
	for i := len(l.Items) - 1; i >= 0; i-- {
		if l.Items[i].CallID() == in.CallID {
			return l.Items[i].Name, nil
		}
	}
	return "", fmt.Errorf("%s: agent %s has no question with callID %s in namespace %s; "+
		"pass the callID that ask_user_question returned, or see list_questions (callID)", CodeUnknownCall, c.Agent, in.CallID, c.Namespace)
}

// get reads the agent's question name; a missing one, or another agent's,
// is NOT_ANSWERABLE.
func get(ctx context.Context, c *Caller, name string) (*hitlv1.UserQuestion, error) {
	q := &hitlv1.UserQuestion{}
	err := c.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, q)
	switch {
	case apierrors.IsNotFound(err) || err == nil && q.Labels[hitlv1.AgentLabel] != c.Agent:
		return nil, &validation.Error{Code: hitlv1.CodeNotAnswerable, Field: "question",
			Rule: fmt.Sprintf("question %s of agent %s does not exist in namespace %s", name, c.Agent, c.Namespace)}
	case err != nil:
		return nil, fmt.Errorf("reading question %s: %w", name, err)
	}
	return q, nil
}
