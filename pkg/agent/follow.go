package agent

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/follow"
)

// labels selects the agent's own questions, on the server.
func (a *Agent) labels() labels.Selector {
	return labels.SelectorFromSet(labels.Set{hitlv1.AgentLabel: a.name})
}

// list reads the agent's questions with a consistent read (no
// resourceVersion: the API server reads the current state).
func (a *Agent) list(ctx context.Context) (*hitlv1.UserQuestionList, error) {
	var l hitlv1.UserQuestionList
	if err := a.c.List(ctx, &l, client.InNamespace(a.namespace), client.MatchingLabelsSelector{Selector: a.labels()}); err != nil {
		return nil, apiError(err, "listing the questions of agent %s in %s", a.name, a.namespace)
	}
	return &l, nil
}

// follow lists the agent's questions, or the one named, and then follows
// their changes (internal/follow) until ctx ends or the API server refuses
// the agent for good.
func (a *Agent) follow(ctx context.Context, name string) (*follow.Stream, error) {
	s, err := follow.Start(ctx, follow.Options{
		Client: a.c, Namespace: a.namespace, Labels: a.labels(), Name: name, StopOnRefusal: true,
	})
	if err != nil {
		return nil, a.followError(ctx, err)
	}
	return s, nil
}

// followError is the error of a follow that the API server refused, or
// whose context ended.
func (a *Agent) followError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("following the questions of agent %s: %w", a.name, ctx.Err())
	}
	return apiError(err, "following the questions of agent %s in %s", a.name, a.namespace)
}
