package userquestion

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/access"
)

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=hitl.dev,resources=questionreplies,verbs=patch

// refusals checks, for every reply that has no outcome yet, what admission
// may not have been able to: that the reply names its question's agent when
// it names one, and that its stamped author may answer that agent (RBAC
// verb "answer" on agents.hitl.dev/<agent>, asked of the API server's
// authorizer). A reply admitted while the policies were missing, or that
// did not name its agent, is refused here before it can settle or queue.
func (r *Reconciler) refusals(ctx context.Context, q *hitlv1.UserQuestion, replies []hitlv1.QuestionReply) (map[string]Refusal, error) {
	var refused map[string]Refusal
	refuse := func(name string, code hitlv1.ErrorCode, message string) {
		if refused == nil {
			refused = map[string]Refusal{}
		}
		refused[name] = Refusal{Code: code, Message: message}
	}
	// The authors to judge, one review per author: a burst of replies
	// from one user (or a flood) to one question costs one call, and a
	// person answering question after question one call every grantTTL.
	keys := map[string]string{} // reply name → its author's grant key
	decided := map[string]bool{}
	toAsk := map[string]*hitlv1.UserInfo{}
	now := r.Clock.Now()
	for i := range replies {
		reply := &replies[i]
		if reply.Status.Outcome != "" || reply.DeletionTimestamp != nil || implied(q, reply) {
			continue
		}
		if label, set := reply.Labels[hitlv1.AgentLabel]; set && label != q.Spec.Agent {
			refuse(reply.Name, hitlv1.CodeAgentMismatch, fmt.Sprintf("%s: label %s=%q (metadata.labels) names another agent than question %s's %q",
				hitlv1.CodeAgentMismatch, hitlv1.AgentLabel, label, q.Name, q.Spec.Agent))
			continue
		}
		by := reply.Spec.AnsweredBy
		if by == nil || by.Username == "" {
			refuse(reply.Name, hitlv1.CodeForbidden, fmt.Sprintf("%s: reply %s carries no authenticated author (spec.answeredBy): hitl's admission policies, or its webhook in webhook mode, stamp it",
				hitlv1.CodeForbidden, reply.Name))
			continue
		}
		key := grantKey(by, q.Namespace, q.Spec.Agent)
		keys[reply.Name] = key
		if _, known := decided[key]; known {
			continue
		}
		switch {
		case r.grants.allowed(key, now):
			decided[key] = true
			if r.grants.refreshDue(key, now) {
				r.refreshGrant(ctx, q, key, by)
			}
		case r.grants.denied(key, now):
			decided[key] = false
		default:
			toAsk[key] = by
		}
	}
	asked, err := r.askGrants(ctx, q, toAsk)
	if err != nil {
		return nil, err
	}
	for key, allowed := range asked {
		decided[key] = allowed
	}
	for i := range replies {
		reply := &replies[i]
		if key, judged := keys[reply.Name]; judged && !decided[key] {
			refuse(reply.Name, hitlv1.CodeForbidden, access.ForbiddenAnswer(reply.Spec.AnsweredBy.Username, q.Spec.Agent).Error())
		}
	}
	return refused, nil
}

// askGrants asks the API server's authorizer, for each author of toAsk (by
// grant key), whether they may answer q's agent, and remembers the
// answers. The authors are asked at once: when the grants of the voters
// of an approval lapse together, one after another their reviews held the
// look that counts their votes for three round trips instead of one.
func (r *Reconciler) askGrants(ctx context.Context, q *hitlv1.UserQuestion, toAsk map[string]*hitlv1.UserInfo) (map[string]bool, error) {
	if len(toAsk) == 0 {
		return nil, nil
	}
	var (
		mu       sync.Mutex
		answers  = make(map[string]bool, len(toAsk))
		firstErr error
		wg       sync.WaitGroup
	)
	for key, by := range toAsk {
		wg.Go(func() {
			allowed, err := r.askGrant(ctx, q, key, by)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			answers[key] = allowed
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	now := r.Clock.Now()
	for key, allowed := range answers {
		if allowed {
			r.grants.allow(key, now)
		} else {
			r.grants.deny(key, now)
		}
	}
	return answers, nil
}

// grantRefreshTimeout bounds a refresh of a remembered grant, which runs
// past the look that started it.
const grantRefreshTimeout = 10 * time.Second

// refreshGrant asks the authorizer again, in the background, whether by
// may still answer q's agent, and records the answer (see
// grantRefreshAfter).
func (r *Reconciler) refreshGrant(ctx context.Context, q *hitlv1.UserQuestion, key string, by *hitlv1.UserInfo) {
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grantRefreshTimeout)
		defer cancel()
		asked := r.Clock.Now()
		allowed, err := r.askGrant(ctx, q, key, by)
		r.grants.refreshed(key, allowed, err, asked)
	}()
}

// askGrant asks the API server's authorizer whether by (its grant key)
// may answer q's agent, sharing a review of key already under way.
func (r *Reconciler) askGrant(ctx context.Context, q *hitlv1.UserQuestion, key string, by *hitlv1.UserInfo) (bool, error) {
	return r.grants.shared(ctx, key, func() (bool, error) {
		allowed, _, err := access.Allowed(ctx, r.Client, access.SubjectOf(by), hitlv1.VerbAnswer, q.Namespace, q.Spec.Agent)
		return allowed, err
	})
}

// implied reports whether the question's status already names the reply
// (its settlement or its queued reply): it was checked when it got there.
// A reply re-created under the name of one that was is another reply.
func implied(q *hitlv1.UserQuestion, reply *hitlv1.QuestionReply) bool {
	st := &q.Status
	return (st.Settlement != nil && st.Settlement.Is(reply)) || (st.QueuedReply != nil && st.QueuedReply.Is(reply)) || counted(st.Votes, reply)
}

// adopt gives the replies of q that lack them the labels that let answerers
// and agents select them (hitl.dev/agent, hitl.dev/question) and an owner
// reference to q, so that they go with it. Admission sets what one reply
// tells about itself; kubectl hitl and the answerer SDK set the rest; a
// reply applied by hand or from Git gets it here. A reply that names
// another agent keeps its label: it is rejected with AGENT_MISMATCH.
func (r *Reconciler) adopt(ctx context.Context, q *hitlv1.UserQuestion, replies []hitlv1.QuestionReply) error {
	for i := range replies {
		reply := &replies[i]
		if reply.DeletionTimestamp != nil || labelsTrimmed(reply) {
			// Going, or final and adopted already (the cache keeps no
			// labels of such a reply).
			continue
		}
		_, agentSet := reply.Labels[hitlv1.AgentLabel]
		questionSet := reply.Labels[hitlv1.QuestionLabel] == q.Name
		if agentSet && questionSet && reply.OwnedBy(q) {
			continue
		}
		next := reply.DeepCopy()
		next.Adopt(q)
		if next.Labels == nil {
			next.Labels = map[string]string{}
		}
		if !agentSet {
			next.Labels[hitlv1.AgentLabel] = q.Spec.Agent
		}
		next.Labels[hitlv1.QuestionLabel] = q.Name
		if err := r.Patch(ctx, next, client.MergeFrom(reply)); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("labelling reply %s: %w", reply.Name, err)
		}
		// A look before the cache has this patch labels nothing twice.
		r.own.recordOver(reply, next, r.Clock.Now())
	}
	return nil
}
