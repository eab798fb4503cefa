package agent

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// questionsResource names UserQuestions in NotFound errors.
var questionsResource = hitlv1.GroupVersion.WithResource("userquestions").GroupResource()

// Wait watches the agent's question named question until done(q) is true,
// and returns that q. A question that does not exist, is not the agent's,
// or is deleted while Wait watches without having been done (a question
// deleted by its TTL right after it settled is done: the deletion carries
// its final status) gives a NOT_ANSWERABLE error (which
// apierrors.IsNotFound also recognises); ctx ending gives an error wrapping
// ctx.Err().
func (a *Agent) Wait(ctx context.Context, question string, done func(*hitlv1.UserQuestion) bool) (*hitlv1.UserQuestion, error) {
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	s, err := a.follow(fctx, question)
	if err != nil {
		return nil, err
	}
	if len(s.Initial) == 0 {
		return nil, a.missing(question)
	}
	if q := s.Initial[0]; done(q) {
		return q, nil
	}
	for ev := range s.Events() {
		switch {
		case done(ev.Question):
			return ev.Question, nil
		case ev.Type == watch.Deleted:
			return nil, a.missing(question)
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("waiting for question %s: %w", question, ctx.Err())
	}
	return nil, a.followError(ctx, s.Err())
}

// missing is the NOT_ANSWERABLE error of a question the agent cannot see.
func (a *Agent) missing(question string) error {
	return notAnswerable(apierrors.NewNotFound(questionsResource, question),
		"question %s of agent %s does not exist in namespace %s", question, a.name, a.namespace)
}
