package agent

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Cancel aborts the ask of the agent's question: it sets spec.cancelled, and
// the controller moves the question to Cancelled, so that answerers drop it.
// A question that is already cancelled or finished is left as it is; a
// missing one gives NOT_ANSWERABLE.
func (a *Agent) Cancel(ctx context.Context, question string) error {
	_, err := a.update(ctx, question, func(q *hitlv1.UserQuestion) (bool, error) {
		if q.Spec.Cancelled || q.Status.State.Terminal() {
			return false, nil
		}
		q.Spec.Cancelled = true
		return true, nil
	})
	if err != nil {
		return apiError(err, "cancelling question %s", question)
	}
	return nil
}

// Admit takes the late reply queued on the agent's question as a new turn:
// it sets spec.admittedReply, waits until the controller has settled the
// question with the queued batch (status.settlement.late), and returns that
// batch. A reply that is not queued on the question (never queued, already
// withdrawn, or the question finished) gives NOT_ANSWERABLE and changes
// nothing. On a governed question the queued reply is the vote that
// decided it, and the Result holds the votes. Admitting the reply the
// question already admitted is allowed, so a call whose ctx ended after
// the admission was written (the question then settles anyway) can be
// repeated to read the batch.
func (a *Agent) Admit(ctx context.Context, question, reply string) (Result, error) {
	_, err := a.update(ctx, question, func(q *hitlv1.UserQuestion) (bool, error) {
		return a.admit(ctx, q, reply)
	})
	switch {
	case apierrors.IsInvalid(err):
		// The CRD accepts only the reply named by status.queuedReply, so
		// the API server refused an admission that went stale.
		return Result{}, notAnswerable(err, "reply %s is not queued on question %s", reply, question)
	case err != nil:
		return Result{}, apiError(err, "admitting reply %s on question %s", reply, question)
	}
	q, err := a.Wait(ctx, question, func(q *hitlv1.UserQuestion) bool { return q.Status.State.Terminal() })
	if err != nil {
		return Result{}, err
	}
	if s := q.Status.Settlement; q.Status.State != hitlv1.StateSettled || s == nil || s.Reply != reply {
		return Result{}, notAnswerable(nil, "question %s was %s before reply %s was admitted", question, q.Status.State, reply)
	}
	res := settledResult(q)
	return res, a.open(q, &res)
}

// admit decides on a fresh read whether reply may be admitted on q, and
// sets spec.admittedReply when it may.
func (a *Agent) admit(ctx context.Context, q *hitlv1.UserQuestion, reply string) (bool, error) {
	switch {
	case q.Spec.AdmittedReply == reply:
		return false, nil
	case q.Spec.AdmittedReply != "":
		return false, notAnswerable(nil, "question %s already admitted reply %s", q.Name, q.Spec.AdmittedReply)
	case q.Status.State.Terminal():
		return false, notAnswerable(nil, "question %s is %s", q.Name, q.Status.State)
	case q.Status.QueuedReply == nil || q.Status.QueuedReply.Name != reply:
		return false, notAnswerable(nil, "reply %s is not queued on question %s", reply, q.Name)
	}
	gone, err := a.withdrawn(ctx, reply)
	if err != nil || gone {
		if gone {
			err = notAnswerable(nil, "reply %s on question %s was withdrawn", reply, q.Name)
		}
		return false, err
	}
	q.Spec.AdmittedReply = reply
	return true, nil
}

// withdrawn reports whether a queued reply is deleted or being deleted.
// status.queuedReply may still name it until the controller catches up, and
// the controller settles an admitted reply even if it was withdrawn, so the
// reply itself is checked. An agent that may not read replies relies on
// status.queuedReply alone.
func (a *Agent) withdrawn(ctx context.Context, reply string) (bool, error) {
	r := &hitlv1.QuestionReply{}
	err := a.c.Get(ctx, types.NamespacedName{Namespace: a.namespace, Name: reply}, r)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case apierrors.IsForbidden(err):
		return false, nil
	case err != nil:
		return false, apiError(err, "reading reply %s", reply)
	}
	return r.DeletionTimestamp != nil, nil
}

// update reads the agent's question, lets change decide on it and edit it,
// and writes the edit with an Update guarded by the resourceVersion read, so
// the decision is never applied to a question that moved on. A conflict
// means it did (e.g. the controller wrote its status): change decides again
// on a fresh read, a bounded number of times with client-go's backoff
// (retry.DefaultRetry), after which the conflict is returned. The Update's
// error is returned as the API server sent it.
func (a *Agent) update(ctx context.Context, name string, change func(*hitlv1.UserQuestion) (bool, error)) (*hitlv1.UserQuestion, error) {
	var q *hitlv1.UserQuestion
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if q, err = a.get(ctx, name); err != nil {
			return err
		}
		write, err := change(q)
		if err != nil || !write {
			return err
		}
		return a.c.Update(ctx, q)
	})
	return q, err
}

// get reads one of the agent's questions; another agent's question counts
// as missing.
func (a *Agent) get(ctx context.Context, name string) (*hitlv1.UserQuestion, error) {
	q := &hitlv1.UserQuestion{}
	if err := a.c.Get(ctx, types.NamespacedName{Namespace: a.namespace, Name: name}, q); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, a.missing(name)
		}
		return nil, apiError(err, "reading question %s", name)
	}
	if q.Labels[hitlv1.AgentLabel] != a.name {
		return nil, a.missing(name)
	}
	return q, nil
}
