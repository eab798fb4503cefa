// The baseline workload: a bare client's settled asks, with no controller
// and no admission, and the ratios of the settle workloads to it.

package main

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/testenv"
)

// baseline measures the floor of a burst of transitions (status writes
// and Events by a bare client, floors.go), which the deadline and restart
// workloads compare with; the bare client's settled asks are measured in
// pairs with the default install's (pairs.go).
func (b *bench) baseline(ctx context.Context) error {
	if err := b.transitionFloor(ctx); err != nil {
		return err
	}
	return b.removeBaseline(ctx)
}

// removeBaseline deletes the baseline's objects, which would be orphans to
// the controller.
func (b *bench) removeBaseline(ctx context.Context) error {
	if err := b.c.DeleteAllOf(ctx, &hitlv1.QuestionReply{}, client.InNamespace(ns)); err != nil {
		return err
	}
	return b.c.DeleteAllOf(ctx, &hitlv1.UserQuestion{}, client.InNamespace(ns))
}

// ratios compares webhook mode's settling with the baseline, once both are
// measured: throughput against the median of the baseline's rounds (the
// default install is judged by pairs, pairs.go), and the CPU time per ask,
// whose ratio is the throughput ratio a machine that CPU bounds would show.
// Webhook mode has no target.
func (b *bench) ratios() {
	for _, conc := range []int{1, 32} {
		metric := fmt.Sprintf("asks/s, concurrency %d", conc)
		base, ok := b.r.Figures[figureName(metric, none)]
		if !ok {
			continue
		}
		if rate, ok := b.r.Figures[figureName(metric, testenv.WebhookMode)]; ok {
			b.r.setMode(fmt.Sprintf("settle / baseline, concurrency %d", conc), testenv.WebhookMode, rate/base)
		}
	}
	const cpu = "CPU ms per ask, concurrency 32, all"
	if base, ok := b.r.Figures[figureName(cpu, none)]; ok {
		if settle, ok := b.r.Figures[figureName(cpu, testenv.WebhookMode)]; ok {
			b.r.setMode("baseline CPU / settle CPU per ask, concurrency 32", testenv.WebhookMode, base/settle)
		}
	}
}
