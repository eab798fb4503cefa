package answerer

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/watch"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/follow"
)

// Event is a change to one of the watched questions.
type Event struct {
	// Type is watch.Added, watch.Modified or watch.Deleted.
	Type watch.EventType
	// Question is the question as of the change; for Deleted, the last
	// state known of it.
	Question *hitlv1.UserQuestion
}

// Watch streams the questions of the answerer's agents in its namespace.
// The server selects them by the hitl.dev/agent label. The stream starts
// with every current question as an Added event, then follows the changes
// (through internal/follow, a client-go informer): when the API server
// closes the watch, Watch resumes from the last version it saw; when that
// version has expired (410 Gone) or the watch failed, it lists again and
// sends only what changed in between, Deleted included; while the API
// server is unreachable or refuses, it retries with client-go's backoff.
// The channel is closed when ctx ends. The error is the initial list's (for
// example, RBAC does not let the user list questions).
func (a *Answerer) Watch(ctx context.Context) (<-chan Event, error) {
	sel, err := a.selector()
	if err != nil {
		return nil, err
	}
	s, err := follow.Start(ctx, follow.Options{Client: a.client, Namespace: a.namespace, Labels: sel})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("listing the questions of agents %v: %w", a.agents, ctx.Err())
		}
		return nil, apiError(err, "listing the questions of agents %v", a.agents)
	}
	out := make(chan Event)
	go func() {
		defer close(out)
		defer s.Stop()
		send := func(ev Event) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for _, q := range s.Initial {
			if !send(Event{Type: watch.Added, Question: q}) {
				return
			}
		}
		for ev := range s.Events() {
			if !send(Event{Type: ev.Type, Question: ev.Question}) {
				return
			}
		}
	}()
	return out, nil
}

// selector selects the answerer's agents, or any agent when it names none.
func (a *Answerer) selector() (labels.Selector, error) {
	op, values := selection.In, a.agents
	if len(values) == 0 {
		op, values = selection.Exists, nil
	}
	req, err := labels.NewRequirement(hitlv1.AgentLabel, op, values)
	if err != nil {
		return nil, fmt.Errorf("selecting the questions of agents %v: %w", a.agents, err)
	}
	return labels.NewSelector().Add(*req), nil
}
