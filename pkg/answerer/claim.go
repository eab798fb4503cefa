package answerer

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
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

// Claim is a live claim on a question: a Lease that the Answerer renews in
// the background until Close is called or the context given to
// Answerer.Claim ends, and then deletes. While it lives, the controller
// does not close the question's window.
//
// The claim does not end by itself when Remaining has elapsed: the
// specification leaves the countdown to the answerer's UI, which may pause
// it (while the person types, say) and calls Close when it ends.
//
// A claim can be lost while the UI still shows it: its Lease deleted, or
// its renewals refused (an answerer without the verb patch on leases) or
// failing until the Lease expired. Lost and Err report it, so that the UI
// can tell the person that the window is no longer held for them.
type Claim struct {
	// Lease is the name of the claim's Lease.
	Lease string
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
// coordination.k8s.io/v1 Lease named "<question>-claim-<random>", labelled
// hitl.dev/claim=true and hitl.dev/question=<question>, owned by the
// question (so it goes when the question goes), held by the answerer's
// holder, and renews it every third of its duration. Renewing stops when
// the claim is lost (see Lost): its Lease found deleted, e.g. by the
// controller with an expired question, or its renewals refused. A
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
	lease := a.newLease(q, leaseSeconds(duration), now)
	if err := a.client.Create(ctx, lease); err != nil {
		return nil, apiError(err, "claiming question %s", q.Name)
	}
	c := &Claim{Lease: lease.Name, stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{})}
	c.Deadline, c.Remaining = window(q, now)
	go c.hold(ctx, &leaseHolder{client: a.client, clock: a.Clock, lease: lease})
	return c, nil
}

// Close stops renewing the claim and deletes its Lease, so that the
// question's original deadline applies again at once. It may be called
// more than once, also after the claim's context ended; each call returns
// the deletion's result.
func (c *Claim) Close() error {
	c.once.Do(func() { close(c.stop) })
	<-c.done
	return c.err
}

// Lost returns a channel that is closed when the claim stops holding the
// question's window before Close: its Lease was deleted, a renewal was
// refused for good (forbidden, say: the answerer may not patch Leases), or
// renewals failed for as long as the Lease's duration, so that the
// controller counts it as expired. A lost claim is not renewed any more;
// Err says why it was lost. Close and the end of the claim's context do
// not close Lost: they end a claim, they do not lose it.
func (c *Claim) Lost() <-chan struct{} { return c.lost }

// Err returns nil while the claim holds, and once Lost is closed the error
// that lost it: the API server's error of the refused or last failed
// renewal (test it with apierrors.IsForbidden, IsNotFound, ...), wrapped
// with the Lease's name.
func (c *Claim) Err() error {
	select {
	case <-c.lost:
		return c.lostErr
	default:
		return nil
	}
}

// hold renews the Lease until the claim is closed or ctx ends, then
// releases it. A failed renewal is retried at the next tick, which still
// falls inside the Lease's duration, unless it cannot succeed or the Lease
// has gone unrenewed for its whole duration: then the claim is lost.
func (c *Claim) hold(ctx context.Context, h *leaseHolder) {
	defer close(c.done)
	ticker := h.clock.NewTicker(h.period())
	defer ticker.Stop()
	tick := ticker.C()
	renewed := h.lease.Spec.RenewTime.Time
	for {
		select {
		case <-tick:
			err := h.renew(ctx)
			switch {
			case err == nil:
				renewed = h.lease.Spec.RenewTime.Time
			case ctx.Err() != nil:
				// The claim is ending; release it below.
			case apierrors.IsNotFound(err):
				c.lose("its Lease was deleted", err)
				tick = nil
			case refused(err):
				c.lose("renewing its Lease was refused", err)
				tick = nil
			case h.clock.Since(renewed) >= h.duration():
				c.lose(fmt.Sprintf("its Lease was not renewed for %s and has expired", h.duration()), err)
				tick = nil
			default:
				klog.FromContext(ctx).V(1).Info("Renewing a claim failed; retrying at the next renewal",
					"lease", klog.KObj(h.lease), "err", err)
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
	c.lostErr = fmt.Errorf("claim %s is lost: %s: %w", c.Lease, why, err)
	close(c.lost)
}

// refused reports whether the API server refused a renewal for a reason
// that trying again does not change.
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err)
}

func (a *Answerer) newLease(q *hitlv1.UserQuestion, seconds int32, now time.Time) *coordinationv1.Lease {
	t := metav1.NewMicroTime(now)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: q.Name + "-claim-",
			Namespace:    q.Namespace,
			Labels:       map[string]string{hitlv1.ClaimLabel: "true", hitlv1.QuestionLabel: q.Name},
			// No blockOwnerDeletion: deleting a question must not wait for its claims.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: hitlv1.GroupVersion.String(), Kind: "UserQuestion", Name: q.Name, UID: q.UID,
			}},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(a.holder),
			LeaseDurationSeconds: ptr.To(seconds),
			AcquireTime:          &t,
			RenewTime:            &t,
		},
	}
}

// leaseSeconds rounds a claim's duration up to whole seconds, so the Lease
// covers at least what was asked, within the allowed range.
func leaseSeconds(d time.Duration) int32 {
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

// leaseHolder renews and releases one claim's Lease; only the claim's
// goroutine uses it.
type leaseHolder struct {
	client client.Client
	clock  clock.WithTicker
	lease  *coordinationv1.Lease
}

// duration is the Lease's duration.
func (h *leaseHolder) duration() time.Duration {
	return time.Duration(*h.lease.Spec.LeaseDurationSeconds) * time.Second
}

// period is how often the Lease is renewed: three times per duration, so
// that one lost renewal does not let it expire.
func (h *leaseHolder) period() time.Duration { return h.duration() / 3 }

// renew writes a new renewTime; the controller judges liveness from when
// it observes the change. A Lease that is gone gives the API server's
// NotFound.
func (h *leaseHolder) renew(ctx context.Context) error {
	before := h.lease.DeepCopy()
	h.lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(h.clock.Now()))
	if err := h.client.Patch(ctx, h.lease, client.MergeFrom(before)); err != nil {
		h.lease = before
		return err
	}
	return nil
}

// release deletes the Lease; one that is already gone is released.
func (h *leaseHolder) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	err := h.client.Delete(ctx, h.lease, client.Preconditions{UID: &h.lease.UID})
	if err := client.IgnoreNotFound(err); err != nil {
		return apiError(err, "releasing claim %s", h.lease.Name)
	}
	return nil
}
