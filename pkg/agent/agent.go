// Package agent is the Go SDK an agent uses to ask people questions through
// the Kubernetes API: it creates UserQuestions, waits for the controller to
// settle them, reads the agent's questions as the active and settled views,
// streams late replies, admits them and cancels asks.
//
// An Agent sees only its own objects: every list and watch is scoped to its
// namespace and selects the hitl.dev/agent label on the server. It never
// polls; it watches and, when a watch ends, resumes from the last
// resourceVersion it saw (or lists again when that version has expired).
//
// Errors that break one of the specification's rules carry its code, whether
// the SDK found the problem itself or the API server (a webhook denial or a
// CEL rule) did: test them with validation.CodeOf or validation.IsCode.
//
// From a Pod whose ServiceAccount has the hitl-agent role:
//
//	a, err := agent.NewInCluster("release-bot")
//	if err != nil {
//		return err
//	}
//	res, err := a.Ask(ctx, agent.Request{Questions: []hitlv1.Question{{
//		ID:       "target",
//		Question: "Where should I deploy?",
//		Options:  []hitlv1.QuestionOption{{Label: "staging"}, {Label: "production"}},
//	}}})
//	// res.Answers[0].Selected is what the person chose.
//
// The runnable examples (example_test.go; go doc -http shows them) also
// ask with a window and admit the late reply.
package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/internal/kubeclient"
	"github.com/hitl-dev/hitl/pkg/sealed"
)

// cancelGrace bounds the write that cancels an aborted ask: the caller's
// context is already done, yet the question must not stay answerable.
const cancelGrace = 10 * time.Second

// Agent asks questions as one agent in one namespace.
type Agent struct {
	c         client.WithWatch
	namespace string
	name      string

	keyOnce sync.Once
	key     *sealed.Key
	keyErr  error
}

// New returns an Agent that asks as the named agent in namespace through c.
// c should read from the API server directly (client.NewWithWatch), not from
// a cache, because the Agent relies on consistent reads and guarded updates.
func New(c client.WithWatch, namespace, name string) *Agent {
	return &Agent{c: c, namespace: namespace, name: name}
}

// NewInCluster returns an Agent that asks as the named agent from the
// cluster the program runs in: in a Pod, as its ServiceAccount and in its
// namespace; elsewhere through KUBECONFIG (or ~/.kube/config), in its
// current context's namespace.
func NewInCluster(name string) (*Agent, error) {
	c, namespace, err := kubeclient.Connect()
	if err != nil {
		return nil, err
	}
	return New(c, namespace, name), nil
}

// Request is one ask: a batch of questions and how to name it.
type Request struct {
	// Name is the UserQuestion's name; empty, it is generated from the
	// agent's name ("<agent>-" and a random suffix).
	Name string
	// CallID is the agent's tool-call id that UIs key their card by
	// (spec.callID); empty, readers use the object's name.
	CallID string
	// Questions are the questions of the ask (1 to 16).
	Questions []hitlv1.Question
	// Labels are extra labels for the question. The hitl.dev/agent label is
	// added; a conflicting one is refused with AGENT_MISMATCH.
	Labels map[string]string
	// Approval is the agent's own approval rule (spec.approval): the
	// question settles once that many distinct people approved. It may
	// only be as strict as the ApprovalPolicies that govern the question,
	// or stricter. Nil leaves the question to the policies, if any.
	Approval *hitlv1.ApprovalRule
}

// Result is what an ask returned to the agent.
type Result struct {
	// Question is the UserQuestion's name.
	Question string
	// CallID is the id UIs key the question's card by (UserQuestion.CallID).
	CallID string
	// Pending is true when the foreground window closed unanswered (the
	// question is Continued). Pending is not an empty answer, a refusal or
	// an authorisation: the question stays answerable, and its answer comes
	// later as a late reply.
	Pending bool
	// Answers is the settled batch, one item per question; empty when Pending.
	// On a governed question it is the batch of the deciding vote.
	Answers []hitlv1.AnswerItem
	// Approval is, on a question an approval rule governs, the rule and
	// the votes that decided it (when Pending, the votes counted so far);
	// nil when no rule governed it and the first valid reply settled it.
	Approval *Approval
	// Sensitive holds, by question id, the opened answers of the sensitive
	// questions that were answered (their Answers items carry only the
	// sealed text). Keep these values out of logs, errors and objects.
	Sensitive map[string]string
}

// Create creates the question of req, with a foreground window of timeout
// (nil: blocking), and returns it as the API server stored it. It checks the
// ask first (validation.ValidateAsk with the default maximum timeout) and
// returns that *validation.Error without calling the API; the API server may
// still refuse it with a code (e.g. a lower --max-timeout, AGENT_MISMATCH).
func (a *Agent) Create(ctx context.Context, req Request, timeout *time.Duration) (*hitlv1.UserQuestion, error) {
	q := a.question(req, timeout)
	if sensitive(q.Spec.Questions) {
		k, err := a.SealingKey()
		if err != nil {
			return nil, err
		}
		q.Spec.SealingKey = k.PublicKey()
	}
	if err := validation.ValidateAsk(&q.Spec, 0); err != nil {
		return nil, err
	}
	// The window is measured from the moment the ask is sent, to the
	// microsecond: creationTimestamp alone has whole seconds.
	q.Spec.AskedAt = ptr.To(metav1.NewMicroTime(time.Now()))
	if err := a.c.Create(ctx, q); err != nil {
		return nil, apiError(err, "creating a question as agent %s in %s", a.name, a.namespace)
	}
	return q, nil
}

// question builds the UserQuestion of an ask.
func (a *Agent) question(req Request, timeout *time.Duration) *hitlv1.UserQuestion {
	spec := hitlv1.UserQuestionSpec{Agent: a.name, CallID: req.CallID, Questions: req.Questions, Approval: req.Approval}
	q := &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.namespace, Name: req.Name, Labels: map[string]string{}},
		// A copy: the API server's answer is decoded into q, and must not
		// write through into the caller's questions.
		Spec: *spec.DeepCopy(),
	}
	if req.Name == "" {
		q.GenerateName = a.name + "-"
	}
	for k, v := range req.Labels {
		q.Labels[k] = v
	}
	// A caller's conflicting label is kept, so that the webhook refuses it
	// instead of the SDK silently asking as someone else.
	if _, set := q.Labels[hitlv1.AgentLabel]; !set {
		q.Labels[hitlv1.AgentLabel] = a.name
	}
	if timeout != nil {
		q.Spec.Timeout = &metav1.Duration{Duration: *timeout}
	}
	return q
}

// Ask asks a blocking question and waits until it is settled. When ctx ends
// first, Ask cancels the question (spec.cancelled) and returns an
// ASK_ABORTED error that also wraps ctx.Err(); a question cancelled by
// someone else gives ASK_ABORTED too.
func (a *Agent) Ask(ctx context.Context, req Request) (Result, error) {
	return a.ask(ctx, req, nil)
}

// AskTimed asks a question with a foreground window of timeout. It returns
// the answers when the question is settled inside the window, or a pending
// Result (with the question's name and call id) when the window closes
// unanswered. ctx ending works as in Ask.
func (a *Agent) AskTimed(ctx context.Context, req Request, timeout time.Duration) (Result, error) {
	return a.ask(ctx, req, &timeout)
}

func (a *Agent) ask(ctx context.Context, req Request, timeout *time.Duration) (Result, error) {
	if ctx.Err() != nil {
		return Result{}, aborted(ctx.Err(), "the ask was aborted before it was made")
	}
	q, err := a.createOutliving(ctx, req, timeout)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, aborted(ctx.Err(), "the ask was aborted while it was made, and the API server did not answer within %s of that; "+
				"a question it may have made is left as it is", cancelGrace)
		}
		return Result{}, err
	}
	name := q.Name
	if ctx.Err() != nil {
		return Result{}, a.abort(ctx, name)
	}
	q, err = a.Wait(ctx, name, answeredOrPending)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, a.abort(ctx, name)
		}
		return Result{}, err
	}
	return a.ResultOf(q)
}

// createOutliving creates the question of an ask with a context that does
// not end when ctx does, until cancelGrace after: a create cut off in
// flight may still be made by the API server, and with a generated name
// nobody could then find and cancel it. Once ctx has ended, the ask cancels
// the question it made.
func (a *Agent) createOutliving(ctx context.Context, req Request, timeout *time.Duration) (*hitlv1.UserQuestion, error) {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(cancelGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-cctx.Done():
		}
	})
	defer stop()
	return a.Create(cctx, req, timeout)
}

// answeredOrPending is done when the agent's call can return: the question
// is no longer Open.
func answeredOrPending(q *hitlv1.UserQuestion) bool {
	return q.LeftOpen()
}

// abort cancels the question of an ask whose context ended, with a fresh
// context, and returns the ASK_ABORTED error for it.
func (a *Agent) abort(ctx context.Context, question string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
	defer cancel()
	cause := ctx.Err()
	if err := a.Cancel(cctx, question); err != nil {
		return aborted(cause, "the ask of question %s was aborted, and cancelling it failed: %v", question, err)
	}
	return aborted(cause, "the ask of question %s was aborted", question)
}

// ResultOf is what a question that left Open returns to the call that
// waits for it, as Ask and AskTimed return it: the answers when it is
// Settled, a pending Result when it is Continued (its window closed
// unanswered), and an ASK_ABORTED error when it is Cancelled. A question
// still Open has no result yet: ResultOf returns an error without a code.
// Callers that wait their own way (Wait, or a watch of their own) use it
// to return what an ask would.
func ResultOf(q *hitlv1.UserQuestion) (Result, error) {
	switch q.State() {
	case hitlv1.StateSettled:
		return settledResult(q), nil
	case hitlv1.StateContinued:
		return Result{Question: q.Name, CallID: q.CallID(), Pending: true, Approval: ApprovalOf(q)}, nil
	case hitlv1.StateOpen:
		return Result{}, fmt.Errorf("question %s is still Open: it has no result yet", q.Name)
	default:
		return Result{}, coded(hitlv1.CodeAskAborted, nil, "question %s was cancelled", q.Name)
	}
}

// ResultOf is the package's ResultOf, with the sensitive answers of a
// settled question opened into Result.Sensitive with the Agent's sealing
// key. A sealed answer that does not open (sealed to another key, e.g. by
// a process that asked before this one with a key it did not keep) is an
// error; the other answers are still returned.
func (a *Agent) ResultOf(q *hitlv1.UserQuestion) (Result, error) {
	res, err := ResultOf(q)
	if err != nil {
		return res, err
	}
	return res, a.open(q, &res)
}

// open opens the sealed answers of res, a result of q.
func (a *Agent) open(q *hitlv1.UserQuestion, res *Result) error {
	for _, item := range res.Answers {
		if item.Sealed == "" {
			continue
		}
		k, err := a.SealingKey()
		if err != nil {
			return err
		}
		v, err := k.Open(item.Sealed, sealed.Binding{Namespace: q.Namespace, Question: q.Name, UID: string(q.UID), ID: item.ID})
		if err != nil {
			return fmt.Errorf("question %s: the sensitive answer to %s: %w", q.Name, item.ID, err)
		}
		if res.Sensitive == nil {
			res.Sensitive = map[string]string{}
		}
		res.Sensitive[item.ID] = v
	}
	return nil
}

// SealingKey is the key the Agent's sensitive questions are sealed to: the
// one UseSealingKey gave, or one made for this Agent at its first use and
// kept in memory only. An answer sealed to it opens only with it: an agent
// that must read a sensitive answer after a restart keeps its key
// (sealed.Key.Bytes) and gives it back with UseSealingKey.
func (a *Agent) SealingKey() (*sealed.Key, error) {
	a.keyOnce.Do(func() {
		if a.key == nil {
			a.key, a.keyErr = sealed.NewKey()
		}
	})
	return a.key, a.keyErr
}

// UseSealingKey sets the key sensitive questions are sealed to. Call it
// before the Agent's first ask.
func (a *Agent) UseSealingKey(k *sealed.Key) { a.key = k }

func sensitive(questions []hitlv1.Question) bool {
	for _, q := range questions {
		if q.Sensitive {
			return true
		}
	}
	return false
}

// settledResult is a settled question's answers and, when it was
// governed, its rule and the votes that decided it.
func settledResult(q *hitlv1.UserQuestion) Result {
	return Result{Question: q.Name, CallID: q.CallID(), Answers: q.Status.Answers, Approval: ApprovalOf(q)}
}

// Name is the agent the Agent asks as.
func (a *Agent) Name() string { return a.name }

// Namespace is the namespace the Agent asks in.
func (a *Agent) Namespace() string { return a.namespace }
