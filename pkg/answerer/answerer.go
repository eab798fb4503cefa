// Package answerer is the Go SDK for answerer services: programs (a terminal
// inbox, a web page, a chat bot) that show people the questions of a set of
// agents and send their answers back. An Answerer watches those questions,
// selected by the hitl.dev/agent label on the server; claims a timed
// question while a person is on it, so that its window is not cut off;
// replies and learns what the controller did with the reply; and withdraws
// a queued late reply.
//
// Every error that carries one of the specification's codes has a
// *validation.Error in its chain: test it with validation.CodeOf.
//
// From a Pod whose ServiceAccount has the hitl-answerer role and the
// answer grant on release-bot:
//
//	a, err := answerer.NewInCluster("approver-bot", "release-bot")
//	if err != nil {
//		return err
//	}
//	events, err := a.Watch(ctx)
//	if err != nil {
//		return err // e.g. RBAC does not let it list the questions
//	}
//	for ev := range events {
//		if ev.Question.Answerable() {
//			// Claim it while a person decides, then a.Reply(ctx, ev.Question.Name, answers).
//		}
//	}
//
// The runnable example (example_test.go; go doc -http shows it) claims,
// replies and reads the outcome.
//
// # Typed and sensitive answers
//
// A question may say what free text it takes (Question.Input: a type such
// as integer or date, bounds, a pattern, and whether it is required):
// DescribeInput puts that in words for a prompt, validation.CheckValue
// checks a value as it is typed, and the items Text, Int, Float, Bool,
// Date, DateTime, Choose and Skip write a batch's values as the question
// stores them:
//
//	out, err := a.Reply(ctx, q.Name, []hitlv1.AnswerItem{
//		answerer.Int("replicas", 3),
//		answerer.Date("when", time.Now().AddDate(0, 0, 1)),
//	})
//
// A sensitive question (Question.Sensitive: an API key, a one-time code)
// is answered sealed to the asking agent's key (spec.sealingKey, package
// pkg/sealed), so that the reply, the question's status and everything
// that reads them hold only a value the agent alone can open. Give its
// value as free text (Sensitive, or Text): Create checks it against the
// question's input rule and seals it, for the question it reads, before
// anything is sent; its errors never hold the value. Seal seals a value
// for a reply prepared another way, and refuses a question that is not
// sensitive:
//
//	out, err := a.Reply(ctx, q.Name, []hitlv1.AnswerItem{answerer.Sensitive("token", token)})
//
// Keep such values out of logs and errors of your own.
package answerer

import (
	"context"
	"fmt"
	"slices"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/internal/kubeclient"
)

// Answerer serves the questions of a set of agents in one namespace. It is
// safe for concurrent use once its Clock is set.
type Answerer struct {
	// Clock is the time source for a claim's Remaining time, its
	// renew times and its renewal ticker. New sets the real
	// clock; tests may replace it before the Answerer is first used.
	Clock clock.WithTicker

	client    client.WithWatch
	namespace string
	// holder names the Answerer in its logs; it is not written into claims.
	holder string
	agents []string

	// voterName is who the API server authenticates the client as, asked
	// once (see voter); "" when it could not tell.
	voterOnce sync.Once
	voterName string
}

// New returns an Answerer that acts through c in namespace and serves the
// given agents, or every agent when none is given. holder names the
// Answerer in its logs only: the holder of the claims it makes, which UIs
// show as "holder is answering", is the identity c authenticates as,
// stamped by the API server.
func New(c client.WithWatch, namespace, holder string, agents ...string) *Answerer {
	return &Answerer{
		Clock:     clock.RealClock{},
		client:    c,
		namespace: namespace,
		holder:    holder,
		agents:    slices.Clone(agents),
	}
}

// NewInCluster returns an Answerer, named holder in its logs, that
// serves the given agents (every agent when none is given) from the
// cluster the program runs in: in a Pod, as its ServiceAccount and in its
// namespace; elsewhere through KUBECONFIG (or ~/.kube/config), in its
// current context's namespace.
func NewInCluster(holder string, agents ...string) (*Answerer, error) {
	c, namespace, err := kubeclient.Connect()
	if err != nil {
		return nil, err
	}
	return New(c, namespace, holder, agents...), nil
}

// question reads a question; a missing one is NOT_ANSWERABLE, because
// that is what the webhook and the controller would answer a reply to it.
func (a *Answerer) question(ctx context.Context, namespace, name string) (*hitlv1.UserQuestion, error) {
	q := &hitlv1.UserQuestion{}
	err := a.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, q)
	if apierrors.IsNotFound(err) {
		return nil, notAnswerable("question %s does not exist in namespace %s", name, namespace)
	}
	if err != nil {
		return nil, apiError(err, "reading question %s", name)
	}
	return q, nil
}

// voter asks the API server, once, whom the Answerer's client
// authenticates as (a SelfSubjectReview): the identity its replies vote
// as. It is "" when the API server cannot tell; the controller then alone
// refuses a second vote.
func (a *Answerer) voter(ctx context.Context) string {
	a.voterOnce.Do(func() {
		r := &authenticationv1.SelfSubjectReview{}
		if err := a.client.Create(ctx, r); err == nil {
			a.voterName = r.Status.UserInfo.Username
		}
	})
	return a.voterName
}

// apiError returns an API server error as a coded *validation.Error when
// its message carries a code, so that the caller can act on the code; any
// other error is wrapped with what was being done.
func apiError(err error, format string, args ...any) error {
	if coded := validation.FromAPIError(err); validation.CodeOf(coded) != "" {
		return coded
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

func notAnswerable(format string, args ...any) error {
	return &validation.Error{Code: hitlv1.CodeNotAnswerable, Rule: fmt.Sprintf(format, args...)}
}
