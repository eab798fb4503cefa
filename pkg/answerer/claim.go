package answerer

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

const (
	// releaseTimeout bounds the deletion of a claim. It runs on a fresh
	// context, because the caller's ending is often why the claim ends.
	releaseTimeout = 5 * time.Second
)

// Claim is a live claim on a question: a QuestionClaim that the Answerer
// renews in the background until Close is called or the context given to
// Answerer.Claim ends, and then deletes. While it lives, the controller
// does not close the question's window.
//
// The claim does not end by itself when Remaining has elapsed: the
// specification leaves the countdown to the answerer's UI, which may pause
// it (while the person types, say) and calls Close when it ends.
//
// A claim can be lost while the UI still shows it: its QuestionClaim
// deleted, or its renewals refused (an answerer who may not patch
// questionclaims, or has lost the grant to answer the question's agent) or
// failing until the claim expired. Lost and Err report it, so that the UI
// can tell the person that the window is no longer held for them.
type Claim struct {
	// Name is the name of the claim's QuestionClaim.
	Name string
	// Remaining is the time that was left in the question's window when
	// it was claimed (status.deadline - now): what a UI counts down from.
	// It is 0 when the question has no window left: it is blocking,
	// Continued, or past its deadline.
	Remaining time.Duration
	// Deadline is the question's status.deadline, zero when it has none.
	Deadline time.Time

	stop chan struct{}
	done chan struct{}
	once sync.Once
	// err is the release's result; it is written before done is closed.
	err error
	// lost is closed when the claim is lost; lostErr, written before,
	// says why.
	lost    chan struct{}
	lostErr error
}

// Claim claims a question for duration, clamped to 5s..300s: it creates a
// QuestionClaim (hitl.dev/v1alpha1) named "<question>-claim-<random>",
// labelled hitl.dev/question=<question> and hitl.dev/agent=<agent>, owned
// by the question (so it goes when the question goes), naming the question
// by name and UID and its agent, and renews it every third of its
// duration. The API server stamps the claim's holder from the identity the
// Answerer's client authenticates as, and refuses the claim (FORBIDDEN)
// unless that identity may answer the question's agent. Renewing stops when
// the claim is lost (see Lost): its QuestionClaim found deleted, e.g. by
// the controller with an expired question, or its renewals refused. A
// missing, Settled or Cancelled question is NOT_ANSWERABLE.
// Claiming a blocking or Continued question is allowed and changes
// nothing but status.claims, which UIs show.
func (a *Answerer) Claim(ctx context.Context, question string, duration time.Duration) (*Claim, error) {
	q, err := a.question(ctx, a.namespace, question)
	if err != nil {
		return nil, err
	}
	if q.Status.State.Terminal() {
		return nil, notAnswerable("question %s is %s", q.Name, q.Status.State)
	}
	now := a.Clock.Now()
	qc := newQuestionClaim(q, claimSeconds(duration), now)
	if err := a.client.Create(ctx, qc); err != nil {
		return nil, apiError(err, "claiming question %s", q.Name)
	}
	c := &Claim{Name: qc.Name, stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{})}
	c.Deadline, c.Remaining = window(q, now)
	go c.hold(ctx, &claimHolder{client: a.client, clock: a.Clock, claim: qc, answerer: a.holder})
	return c, nil
}

// Close stops renewing the claim and deletes its QuestionClaim, so that the
// question's original deadline applies again at once. It may be called
// more than once, also after the claim's context ended; each call returns
// the deletion's result.
func (c *Claim) Close() error {
	c.once.Do(func() { close(c.stop) })
	<-c.done
	return c.err
}

// Lost returns a channel that is closed when the claim stops holding the
// question's window before Close: its QuestionClaim was deleted, a renewal
// was refused for good (forbidden, say: the answerer may not patch
// questionclaims, or may no longer answer the question's agent), or
// renewals failed for as long as the claim's duration, so that the
// controller counts it as expired. A lost claim is not renewed any more;
// Err says why it was lost. Close and the end of the claim's context do
// not close Lost: they end a claim, they do not lose it.
func (c *Claim) Lost() <-chan struct{} { return c.lost }

// Err returns nil while the claim holds, and once Lost is closed the error
// that lost it: the API server's error of the refused or last failed
// renewal (test it with apierrors.IsForbidden, IsNotFound, ...), wrapped
// with the QuestionClaim's name.
func (c *Claim) Err() error {
	select {
	case <-c.lost:
		return c.lostErr
	default:
		return nil
	}
}

// hold renews the QuestionClaim until the claim is closed or ctx ends,
// then releases it. A failed renewal is retried at the next tick, which
// still falls inside the claim's duration, unless it cannot succeed or the
// claim has gone unrenewed for its whole duration: then the claim is lost.
func (c *Claim) hold(ctx context.Context, h *claimHolder) {
	defer close(c.done)
	ticker := h.clock.NewTicker(h.period())
	defer ticker.Stop()
	tick := ticker.C()
	renewed := h.claim.Spec.RenewTime.Time
	for {
		select {
		case <-tick:
			err := h.renew(ctx)
			switch {
			case err == nil:
				renewed = h.claim.Spec.RenewTime.Time
			case ctx.Err() != nil:
				// The claim is ending; release it below.
			case apierrors.IsNotFound(err):
				c.lose("its QuestionClaim was deleted", err)
				tick = nil
			case refused(err):
				c.lose("renewing its QuestionClaim was refused", err)
				tick = nil
			case h.clock.Since(renewed) >= h.duration():
				c.lose(fmt.Sprintf("its QuestionClaim was not renewed for %s and has expired", h.duration()), err)
				tick = nil
			default:
				klog.FromContext(ctx).V(1).Info("Renewing a claim failed; retrying at the next renewal",
					"claim", klog.KObj(h.claim), "answerer", h.answerer, "err", err)
			}
			continue
		case <-c.stop:
		case <-ctx.Done():
		}
		c.err = h.release(ctx)
		return
	}
}

// lose records why the claim was lost and closes Lost; only hold calls it,
// at most once.
func (c *Claim) lose(why string, err error) {
	c.lostErr = fmt.Errorf("claim %s is lost: %s: %w", c.Name, why, err)
	close(c.lost)
}

// refused reports whether the API server refused a renewal for a reason
// that trying again does not change.
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err)
}

// newQuestionClaim is the claim on q that Claim creates. Its holder is
// left empty: admission stamps it from the requester.
func newQuestionClaim(q *hitlv1.UserQuestion, seconds int32, now time.Time) *hitlv1.QuestionClaim {
	return &hitlv1.QuestionClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: q.Name + "-claim-",
			Namespace:    q.Namespace,
			Labels:       map[string]string{hitlv1.QuestionLabel: q.Name, hitlv1.AgentLabel: q.Spec.Agent},
			// No blockOwnerDeletion: deleting a question must not wait for its claims.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: hitlv1.GroupVersion.String(), Kind: "UserQuestion", Name: q.Name, UID: q.UID,
			}},
		},
		Spec: hitlv1.QuestionClaimSpec{
			QuestionRef:     hitlv1.QuestionReference{Name: q.Name, UID: q.UID},
			Agent:           q.Spec.Agent,
			DurationSeconds: seconds,
			RenewTime:       ptr.To(metav1.NewMicroTime(now)),
		},
	}
}

// claimSeconds rounds a claim's duration up to whole seconds, so the claim
// covers at least what was asked, within the allowed range.
func claimSeconds(d time.Duration) int32 {
	s := d / time.Second
	if d%time.Second != 0 {
		s++
	}
	return hitlv1.ClaimLeaseSeconds(int64(s))
}

// window returns a question's deadline and the time left in its window at
// now, 0 when the window is not open.
func window(q *hitlv1.UserQuestion, now time.Time) (deadline time.Time, remaining time.Duration) {
	deadline, timed := q.Deadline()
	if !timed {
		return time.Time{}, 0
	}
	if q.State() == hitlv1.StateOpen && deadline.After(now) {
		remaining = deadline.Sub(now)
	}
	return deadline, remaining
}

// claimHolder renews and releases one QuestionClaim; only the claim's
// goroutine uses it.
type claimHolder struct {
	client client.Client
	clock  clock.WithTicker
	claim  *hitlv1.QuestionClaim
	// answerer is the Answerer's holder name, for its logs.
	answerer string
}

// duration is the claim's duration.
func (h *claimHolder) duration() time.Duration { return hitlv1.ClaimDuration(h.claim) }

// period is how often the claim is renewed: three times per duration, so
// that one lost renewal does not let it expire.
func (h *claimHolder) period() time.Duration { return h.duration() / 3 }

// renew writes a new spec.renewTime with a merge patch; the controller
// judges liveness from when it observes the change. A claim that is gone
// gives the API server's NotFound.
func (h *claimHolder) renew(ctx context.Context) error {
	before := h.claim.DeepCopy()
	h.claim.Spec.RenewTime = ptr.To(metav1.NewMicroTime(h.clock.Now()))
	if err := h.client.Patch(ctx, h.claim, client.MergeFrom(before)); err != nil {
		h.claim = before
		return err
	}
	return nil
}

// release deletes the QuestionClaim; one that is already gone is released.
func (h *claimHolder) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	err := h.client.Delete(ctx, h.claim, client.Preconditions{UID: &h.claim.UID})
	if err := client.IgnoreNotFound(err); err != nil {
		return apiError(err, "releasing claim %s", h.claim.Name)
	}
	return nil
}
