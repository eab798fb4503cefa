// The claims workload: claimed questions whose QuestionClaims answerers
// renew past their deadlines.

package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/builders"
)

// claim is a claim on q as the answerer SDK makes it (named after q, for
// duration); the bench runs as admin, who may answer every agent.
func claim(q *hitlv1.UserQuestion, duration time.Duration) *hitlv1.QuestionClaim {
	return builders.Claim(q.Name+"-claim", q).For(duration).Obj()
}

func (b *bench) claims(ctx context.Context) error {
	// Renewed every third of the claim's duration, as an answerer renews
	// (a merge patch of spec.renewTime), for longer than a claim lasts:
	// only renewals keep the claims live.
	duration := b.s.ClaimDuration
	claims := make([]*hitlv1.QuestionClaim, b.s.Claims)
	names := make([]string, b.s.Claims)
	_, err := parallel(ctx, b.s.Claims, 16, func(ctx context.Context, i int) error {
		names[i] = fmt.Sprintf("claimed-%d", i)
		q := timed(names[i], 5*time.Second)
		if err := b.c.Create(ctx, q); err != nil {
			return err
		}
		claims[i] = claim(q, duration)
		return b.c.Create(ctx, claims[i])
	})
	if err != nil {
		return err
	}
	before := b.obs.writeCount(names)
	start := time.Now()
	var renewals atomic.Int64
	for time.Since(start) < b.s.ClaimFor {
		round := time.Now()
		if _, err := parallel(ctx, len(claims), 16, func(ctx context.Context, i int) error {
			before := claims[i].DeepCopy()
			claims[i].Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
			if err := b.c.Patch(ctx, claims[i], client.MergeFrom(before)); err != nil {
				return err
			}
			renewals.Add(1)
			return nil
		}); err != nil {
			return err
		}
		time.Sleep(time.Until(round.Add(duration / 3)))
	}
	elapsed := time.Since(start)
	timedOut := 0
	for _, n := range names {
		if _, _, ok := b.obs.seenAt(n, hitlv1.StateContinued); ok {
			timedOut++
		}
	}
	controllerWrites := b.obs.writeCount(names) - before
	b.r.set("claims: live claims", float64(len(names)))
	b.r.set("claims: renewals/s by answerers", float64(renewals.Load())/elapsed.Seconds())
	b.r.set("claims: controller writes/s to claimed questions", float64(controllerWrites)/elapsed.Seconds())
	b.r.check(fmt.Sprintf("no claimed question timed out (%d claims)", len(names)), "0", strconv.Itoa(timedOut), timedOut == 0)
	return nil
}
