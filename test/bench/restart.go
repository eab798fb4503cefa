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

// restart measures how soon after a restart the manager closes the
// windows that passed while it was down, and judges it against a bare
// client's burst of as many transitions measured right after, with the
// manager stopped, against the same API server holding the same objects:
// a floor taken at the start of the run, against an empty API server
// before the flood, said little of this one.
func (b *bench) restart(ctx context.Context) error {
	n, took, err := b.restartBurst(ctx)
	if err != nil {
		return err
	}
	b.stopManager()
	floor, err := b.burstFloor(ctx, n, "restart floor: ")
	if err != nil {
		return err
	}
	b.checkBurstAgainst(fmt.Sprintf("%d overdue after restart, from sync", n), took, floor)
	return nil
}

// restartBurst asks questions whose deadlines pass while the manager is
// down, restarts it, and returns how many windows it found overdue and how
// long from its cache sync until the agents' watch saw them all closed.
func (b *bench) restartBurst(ctx context.Context) (n int, took time.Duration, err error) {
	// The manager first settles what memory asked: a full run stopped it
	// with about 1,300 of memory's 10,000 questions not yet settled, and
	// after the restart their writes (3.6 status writes per overdue
	// window) queued with the overdue windows, which the floor leaves out.
	if err := b.quiet(ctx); err != nil {
		return 0, 0, err
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
		return 0, 0, err
	}
	b.stopManager()
	if time.Since(asked) > window {
		return 0, 0, fmt.Errorf("asking %d questions took %s, longer than their window", len(names), time.Since(asked))
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
		return 0, 0, err
	}
	start := time.Now()
	if err := b.startManager(b.mode.Webhooks()); err != nil {
		return 0, 0, err
	}
	var synced time.Time
	select {
	case synced = <-b.synced:
	case <-time.After(60 * time.Second):
		return 0, 0, fmt.Errorf("the manager's workers never started")
	}
	defer b.profileCPU(ctx, synced, 5, "restart")()
	defer explain("restart", len(before))
	var first, last time.Time
	for _, n := range before {
		at, err := b.obs.wait(ctx, n, hitlv1.StateContinued)
		if err != nil {
			return 0, 0, err
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
		return 0, 0, err
	}
	b.r.set("restart: questions in the cluster", float64(len(total.Items)))
	b.r.set("restart: deadlines passed while the manager was down", float64(len(before)))
	b.r.set("restart: start to cache sync, ms", ms(synced.Sub(start)))
	b.r.set("restart: start to first overdue Continued, ms", ms(first.Sub(start)))
	b.r.set("restart: cache sync to all overdue Continued, ms", ms(last.Sub(synced)))
	return len(before), last.Sub(synced), nil
}
