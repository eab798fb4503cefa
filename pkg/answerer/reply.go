package answerer

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// Outcome is what the controller did with a reply.
type Outcome struct {
	// Reply is the QuestionReply's name; Withdraw takes it.
	Reply string
	// Outcome is Applied (the question is Settled), Queued (it waits for
	// the agent to admit it; it may be withdrawn until then), Counted (a
	// vote on a governed question, counted in its status.votes, that did
	// not decide it: the question waits for more approvals; the outcome is
	// final, and a success), Rejected, or Closed (the question was already
	// finished or gone: NOT_ANSWERABLE).
	Outcome hitlv1.ReplyOutcome
	// Reason is the error code of a Rejected or Closed reply.
	Reason hitlv1.ErrorCode
	// Message explains the outcome; for a rejection it starts with the code.
	Message string
}

// Err returns nil unless the reply was Rejected or Closed (Applied, Queued
// and Counted are successes); then a *validation.Error
// with the reason as its code and the message, without its "CODE: "
// prefix, as its rule, so that a rejection by the controller reads like a
// denial by the webhook.
func (o Outcome) Err() error {
	if o.Outcome != hitlv1.OutcomeRejected && o.Outcome != hitlv1.OutcomeClosed {
		return nil
	}
	return &validation.Error{Code: o.Reason, Rule: strings.TrimPrefix(o.Message, string(o.Reason)+": ")}
}

// Reply answers a question with a batch and waits for the outcome; see
// Create.
func (a *Answerer) Reply(ctx context.Context, question string, answers []hitlv1.AnswerItem) (Outcome, error) {
	return a.Create(ctx, &hitlv1.QuestionReply{
		ObjectMeta: metav1.ObjectMeta{GenerateName: question + "-", Namespace: a.namespace},
		Spec: hitlv1.QuestionReplySpec{
			QuestionRef: hitlv1.QuestionReference{Name: question},
			Answers:     answers,
		},
	})
}

// Create sends a reply the caller built (in the answerer's namespace when
// it names none) and waits until the controller gives it an outcome.
//
// It first seals the free text of each sensitive question
// (Question.Sensitive) to the question's key, as Seal does: the reply
// sends only the sealed value, and reply.Spec.Answers is replaced by the
// sealed batch (the caller's slice is left as it was). It then checks the
// batch against the question, so that a BAD_ANSWER (a sensitive value
// that breaks its input rule among them, said without the value), or a
// missing question (NOT_ANSWERABLE), creates nothing. The reply is
// bound to the question read: its spec.questionRef.uid and, once the
// controller has written it, spec.questionRef.specDigest (a reply whose
// digest is not the question's is Rejected, QUESTION_CHANGED, so that a
// vote prepared for one question never counts for another). A reply the
// caller bound to a question that has since been replaced (another uid)
// or changed (another digest) creates nothing, and so does a second vote
// on a governed question by the identity the Answerer acts as
// (DUPLICATE_VOTE; see Approval.CheckVoter). The API
// server's admission denials come back coded: REPLY_QUEUED,
// NOT_ANSWERABLE, FORBIDDEN, BAD_ANSWER. Once the reply exists, the error
// is nil whatever the outcome, Rejected included: see Outcome.Err. reply
// is updated with what the API server created (its name, labels and
// answeredBy), not with the outcome.
func (a *Answerer) Create(ctx context.Context, reply *hitlv1.QuestionReply) (Outcome, error) {
	if reply.Namespace == "" {
		reply.Namespace = a.namespace
	}
	q, err := a.question(ctx, reply.Namespace, reply.Spec.QuestionRef.Name)
	if err != nil {
		return Outcome{}, err
	}
	// A reply is bound to the question the caller read: one prepared for
	// an earlier question of the same name creates nothing.
	if ref := reply.Spec.QuestionRef.UID; ref != "" && ref != q.UID {
		return Outcome{}, notAnswerable("question %s was replaced (its uid is %s, not %s); read it again", q.Name, q.UID, ref)
	}
	reply.Spec.QuestionRef.UID = q.UID
	if ref := reply.Spec.QuestionRef.SpecDigest; ref != "" && ref != q.Status.SpecDigest {
		return Outcome{}, &validation.Error{Code: hitlv1.CodeQuestionChanged, Field: "spec.questionRef.specDigest", Rule: fmt.Sprintf(
			"question %s is not the one the reply was prepared for (its status.specDigest is %q, not %s); read it again",
			q.Name, q.Status.SpecDigest, ref)}
	}
	if q.Status.SpecDigest != "" {
		reply.Spec.QuestionRef.SpecDigest = q.Status.SpecDigest
	}
	// The free text of a sensitive question is sealed to the question's
	// key, for the question read, before anything is checked or sent.
	answers, err := sealAnswers(q, reply.Spec.Answers)
	if err != nil {
		return Outcome{}, err
	}
	reply.Spec.Answers = answers
	if err := validation.ValidateAnswers(q.Spec.Questions, reply.Spec.Answers); err != nil {
		return Outcome{}, err
	}
	if ap := ApprovalOf(q); ap != nil {
		if err := ap.CheckVoter(a.voter(ctx)); err != nil {
			return Outcome{}, err
		}
	}
	// Naming the agent lets the admission policy refuse at once a user who
	// may not answer it (FORBIDDEN); the owner reference lets the reply go
	// with its question. The controller sets both on replies that lack them.
	if reply.Labels == nil {
		reply.Labels = map[string]string{}
	}
	reply.Labels[hitlv1.AgentLabel] = q.Spec.Agent
	reply.Labels[hitlv1.QuestionLabel] = q.Name
	reply.Adopt(q)
	if err := a.client.Create(ctx, reply); err != nil {
		return Outcome{}, apiError(err, "replying to question %s", q.Name)
	}
	return a.await(ctx, reply)
}

// await follows a reply until it has an outcome. Each watch starts from the
// version already seen, so no change between them is missed.
func (a *Answerer) await(ctx context.Context, reply *hitlv1.QuestionReply) (Outcome, error) {
	for reply.Status.Outcome == "" {
		next, err := a.nextVersion(ctx, reply)
		if err != nil {
			return Outcome{}, err
		}
		reply = next
	}
	s := reply.Status
	return Outcome{Reply: reply.Name, Outcome: s.Outcome, Reason: s.Reason, Message: s.Message}, nil
}

// nextVersion watches a reply from its resourceVersion and returns its
// first version with an outcome, or the last one seen when the API server
// closes the watch. A version too old to watch from is read afresh.
func (a *Answerer) nextVersion(ctx context.Context, reply *hitlv1.QuestionReply) (*hitlv1.QuestionReply, error) {
	w, err := a.client.Watch(ctx, &hitlv1.QuestionReplyList{}, client.InNamespace(reply.Namespace),
		client.MatchingFields{"metadata.name": reply.Name},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: reply.ResourceVersion}})
	if err != nil {
		return a.reread(ctx, reply, err)
	}
	defer w.Stop()
	last := reply
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			return a.reread(ctx, reply, apierrors.FromObject(ev.Object))
		}
		r, ok := ev.Object.(*hitlv1.QuestionReply)
		if !ok {
			continue
		}
		if ev.Type == watch.Deleted && r.Status.Outcome == "" {
			return nil, fmt.Errorf("waiting for the outcome of reply %s: it was deleted before the controller processed it", reply.Name)
		}
		if last = r; r.Status.Outcome != "" {
			return r, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("waiting for the outcome of reply %s: %w", reply.Name, err)
	}
	return last, nil
}

// reread reads a reply afresh after its watch failed with err: an expired
// resourceVersion is only a reason to start again from the current one.
func (a *Answerer) reread(ctx context.Context, reply *hitlv1.QuestionReply, err error) (*hitlv1.QuestionReply, error) {
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		return nil, apiError(err, "watching reply %s", reply.Name)
	}
	fresh := &hitlv1.QuestionReply{}
	if err := a.client.Get(ctx, client.ObjectKeyFromObject(reply), fresh); err != nil {
		return nil, apiError(err, "reading reply %s", reply.Name)
	}
	return fresh, nil
}

// Withdraw deletes a queued reply before the agent admits it; the
// controller then clears the question's status.queuedReply and the
// question stays Continued and answerable. A reply that is missing, not
// processed yet, or no longer queued (applied, admitted, rejected) is
// NOT_ANSWERABLE: deleting it would change nothing. The deletion is
// guarded by the version judged, so a reply admitted meanwhile is judged
// again instead (a bounded number of times, with client-go's
// retry.DefaultRetry backoff, after which the conflict is returned).
func (a *Answerer) Withdraw(ctx context.Context, reply string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := a.withdrawable(ctx, reply)
		if err != nil {
			return err
		}
		err = a.client.Delete(ctx, r, client.Preconditions{UID: &r.UID, ResourceVersion: &r.ResourceVersion})
		switch {
		case err == nil, apierrors.IsConflict(err):
			return err // a conflict is judged again
		case apierrors.IsNotFound(err):
			return notAnswerable("reply %s no longer exists", reply)
		}
		return apiError(err, "withdrawing reply %s", reply)
	})
}

// withdrawable reads a reply and returns it when it is queued and its
// question has not admitted it.
func (a *Answerer) withdrawable(ctx context.Context, name string) (*hitlv1.QuestionReply, error) {
	r := &hitlv1.QuestionReply{}
	err := a.client.Get(ctx, types.NamespacedName{Namespace: a.namespace, Name: name}, r)
	if apierrors.IsNotFound(err) {
		return nil, notAnswerable("reply %s does not exist in namespace %s", name, a.namespace)
	}
	if err != nil {
		return nil, apiError(err, "reading reply %s", name)
	}
	if r.Status.Outcome != hitlv1.OutcomeQueued {
		return nil, notAnswerable("reply %s is %s: only a queued reply can be withdrawn", name, describe(r.Status.Outcome))
	}
	// The agent admits through the question before the controller marks
	// the reply Admitted; after admission a deletion changes nothing.
	q, err := a.question(ctx, a.namespace, r.Spec.QuestionRef.Name)
	if err != nil {
		return nil, err
	}
	if q.Spec.AdmittedReply == name {
		return nil, notAnswerable("reply %s was admitted by the agent of question %s", name, q.Name)
	}
	return r, nil
}

func describe(o hitlv1.ReplyOutcome) string {
	if o == "" {
		return "not processed yet"
	}
	return string(o)
}
