// The claims workload: claimed questions whose leases answerers renew
// past their deadlines.

package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func (b *bench) claims(ctx context.Context) error {
	// Renewed every third of the lease, as an answerer renews, for longer
	// than a lease lasts: only renewals keep the claims live.
	lease := b.s.ClaimLease
	leases := make([]*coordinationv1.Lease, b.s.Claims)
	names := make([]string, b.s.Claims)
	_, err := parallel(ctx, b.s.Claims, 16, func(ctx context.Context, i int) error {
		names[i] = fmt.Sprintf("claimed-%d", i)
		if err := b.c.Create(ctx, timed(names[i], 5*time.Second)); err != nil {
			return err
		}
		holder := "bench"
		leases[i] = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: names[i] + "-claim", Namespace: ns,
				Labels: map[string]string{hitlv1.ClaimLabel: "true", hitlv1.QuestionLabel: names[i]}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr.To(int32(lease.Seconds())),
				RenewTime: &metav1.MicroTime{Time: time.Now()}},
		}
		return b.c.Create(ctx, leases[i])
	})
	if err != nil {
		return err
	}
	before := b.obs.writeCount(names)
	start := time.Now()
	var renewals atomic.Int64
	for time.Since(start) < b.s.ClaimFor {
		round := time.Now()
		if _, err := parallel(ctx, len(leases), 16, func(ctx context.Context, i int) error {
			leases[i].Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			if err := b.c.Update(ctx, leases[i]); err != nil {
				return err
			}
			renewals.Add(1)
			return nil
		}); err != nil {
			return err
		}
		time.Sleep(time.Until(round.Add(lease / 3)))
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
