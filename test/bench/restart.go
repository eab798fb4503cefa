// The restart workload: deadlines that passed while the manager was
// down, and how soon after its restart they are closed.

package main

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func (b *bench) restart(ctx context.Context) error {
	// The manager first settles what memory asked: a full run stopped it
	// with about 1,300 of memory's 10,000 questions not yet settled, and
	// after the restart their writes (3.6 status writes per overdue
	// window) queued with the overdue windows, which the floor leaves out.
	if err := b.quiet(ctx); err != nil {
		return err
	}
	// The overdue questions are asked just before the manager stops, with
	// deadlines that pass while it is down.
	window := b.s.OverdueWindow
	var names []string
	for i := range b.s.Overdue {
		names = append(names, fmt.Sprintf("overdue-%d", i))
	}
	asked := time.Now()
	if _, err := parallel(ctx, len(names), 16, func(ctx context.Context, i int) error {
		return b.c.Create(ctx, timed(names[i], window))
	}); err != nil {
		return err
	}
	b.stopManager()
	if time.Since(asked) > window {
		return fmt.Errorf("asking %d questions took %s, longer than their window", len(names), time.Since(asked))
	}
	time.Sleep(time.Until(asked.Add(window + 2*time.Second))) // every deadline is now in the past
	var before []string
	for _, n := range names {
		if _, _, ok := b.obs.seenAt(n, hitlv1.StateContinued); !ok {
			before = append(before, n)
		}
	}
	explain, err := b.explainTransitions(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := b.startManager(b.mode.Webhooks()); err != nil {
		return err
	}
	var synced time.Time
	select {
	case synced = <-b.synced:
	case <-time.After(60 * time.Second):
		return fmt.Errorf("the manager's workers never started")
	}
	defer b.profileCPU(ctx, synced, 5, "restart")()
	defer explain("restart", len(before))
	var first, last time.Time
	for _, n := range before {
		at, err := b.obs.wait(ctx, n, hitlv1.StateContinued)
		if err != nil {
			return err
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	var total hitlv1.UserQuestionList
	if err := b.c.List(ctx, &total, client.InNamespace(ns)); err != nil {
		return err
	}
	b.r.set("restart: questions in the cluster", float64(len(total.Items)))
	b.r.set("restart: deadlines passed while the manager was down", float64(len(before)))
	b.r.set("restart: start to cache sync, ms", ms(synced.Sub(start)))
	b.r.set("restart: start to first overdue Continued, ms", ms(first.Sub(start)))
	b.r.set("restart: cache sync to all overdue Continued, ms", ms(last.Sub(synced)))
	b.checkBurst(fmt.Sprintf("%d overdue after restart, from sync", len(before)), len(before), last.Sub(synced))
	return nil
}
