package agent

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// LateReply is a reply that arrived after a question's window closed and
// waits, queued on the question, for the agent to admit it as a new turn.
type LateReply struct {
	// Question is the UserQuestion's name.
	Question string
	// CallID is the id UIs key the question's card by.
	CallID string
	// Reply is the QuestionReply's name, which Admit takes.
	Reply string
	// Answers is the queued batch.
	Answers []hitlv1.AnswerItem
	// AnsweredBy is who sent the reply, as the API server authenticated them.
	AnsweredBy *hitlv1.UserInfo
	// QueuedAt is when the controller queued the reply.
	QueuedAt time.Time
}

// LateReplies streams the late replies queued on the agent's questions: one
// LateReply for each reply, once, starting with those already queued when
// it is called. A queued reply may be withdrawn before it is admitted, so
// Admit checks again. The channel is closed when ctx ends, or when the API
// server refuses the agent for good (which is logged through ctx's logger);
// a watch that ends or expires is resumed without losing or repeating
// replies. The first list is made before LateReplies returns, so that an
// error (e.g. missing RBAC) is returned rather than a closed channel.
func (a *Agent) LateReplies(ctx context.Context) (<-chan LateReply, error) {
	s, err := a.follow(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make(chan LateReply)
	go func() {
		defer close(out)
		defer s.Stop()
		t := lateTracker{seen: map[string]queued{}}
		send := func(rs []LateReply) bool {
			for _, r := range rs {
				select {
				case out <- r:
				case <-ctx.Done():
					return false
				}
			}
			return true
		}
		for _, q := range s.Initial {
			if !send(t.change(watch.Added, q)) {
				return
			}
		}
		for ev := range s.Events() {
			if !send(t.change(ev.Type, ev.Question)) {
				return
			}
		}
		if err := s.Err(); err != nil {
			ctrl.LoggerFrom(ctx).Error(a.followError(ctx, err), "Streaming late replies stopped", "agent", a.name, "namespace", a.namespace)
		}
	}()
	return out, nil
}

// lateTracker remembers, per question, the queued reply it last delivered,
// so that a watch event or a list seen again delivers nothing new. A
// question holds at most one queued reply at a time; a reply is known by
// its name and the time it was queued, so that a withdrawn reply created
// again under the same name counts as new.
type lateTracker struct {
	seen map[string]queued
}

type queued struct {
	reply string
	at    int64 // UnixNano, comparable whatever the time's location
}

// change takes one question and returns its queued reply when it is new.
func (t *lateTracker) change(ev watch.EventType, q *hitlv1.UserQuestion) []LateReply {
	qr := q.Status.QueuedReply
	if ev == watch.Deleted || q.Status.State.Terminal() || qr == nil {
		// Nothing is waiting; whatever is queued next is a new reply.
		delete(t.seen, q.Name)
		return nil
	}
	key := queued{reply: qr.Name, at: qr.QueuedAt.UnixNano()}
	if t.seen[q.Name] == key {
		return nil
	}
	t.seen[q.Name] = key
	return []LateReply{{
		Question: q.Name, CallID: q.CallID(), Reply: qr.Name,
		Answers: qr.Answers, AnsweredBy: qr.AnsweredBy, QueuedAt: qr.QueuedAt.Time,
	}}
}
