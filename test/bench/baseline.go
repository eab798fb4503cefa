// The baseline workload: a bare client's settled asks, with no controller
// and no admission, and the ratios of the settle workloads to it.

package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/testenv"
)

// baseline is the limit: the object writes a settled ask needs, by a bare
// client with no controller and no admission (policy or webhook) in the
// way, and the floor of a burst of transitions.
func (b *bench) baseline(ctx context.Context) error {
	if err := b.baselineAsks(ctx, false); err != nil {
		return err
	}
	if err := b.transitionFloor(ctx); err != nil {
		return err
	}
	return b.removeBaseline(ctx)
}

// baselineAgain measures the baseline's asks again after the settle
// throughput workloads, so that the ratios compare with the mean of two
// baselines that bracket them, on a machine whose speed drifts.
func (b *bench) baselineAgain(ctx context.Context) error {
	if err := b.baselineAsks(ctx, true); err != nil {
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

// baselineAsks writes what Asks settled asks need with a bare client, at
// concurrency 1 and 32; the first time, it also counts their requests and
// CPU time.
func (b *bench) baselineAsks(ctx context.Context, again bool) error {
	for _, conc := range []int{1, 32} {
		cpu, err := b.cpuTimes()
		if err != nil {
			return err
		}
		calls, err := b.apiCalls(ctx)
		if err != nil {
			return err
		}
		wait := func() {}
		if conc > 1 && !again {
			wait = b.profileCPU(ctx, time.Now().Add(time.Second), b.askProfile(), "baseline")
		}
		took, err := parallel(ctx, b.s.Asks, conc, func(ctx context.Context, _ int) error {
			q := blocking(name("base"))
			if err := b.c.Create(ctx, q); err != nil {
				return err
			}
			q.Status.State = hitlv1.StateOpen
			if err := b.c.Status().Update(ctx, q); err != nil {
				return err
			}
			r := answer(q)
			if err := b.c.Create(ctx, r); err != nil {
				return err
			}
			q.Status.State, q.Status.Answers = hitlv1.StateSettled, r.Spec.Answers
			q.Status.Settlement = &hitlv1.Settlement{Reply: r.Name, At: metav1.NowMicro()}
			if err := b.c.Status().Update(ctx, q); err != nil {
				return err
			}
			r.Status.Outcome = hitlv1.OutcomeApplied
			return b.c.Status().Update(ctx, r)
		})
		if err != nil {
			return err
		}
		metric := fmt.Sprintf("asks/s, concurrency %d", conc)
		if again {
			b.r.setMode(metric+", again", none, float64(b.s.Asks)/took.Seconds())
			continue
		}
		b.r.setMode(metric, none, float64(b.s.Asks)/took.Seconds())
		if conc == 1 {
			if err := b.othersAt1(cpu, none); err != nil {
				return err
			}
			if err := b.logCalls(ctx, calls, none, conc); err != nil {
				return err
			}
			continue
		}
		if err := b.cpuPerAsk(cpu, none); err != nil {
			return err
		}
		wait()
		if err := b.callsPerAsk(ctx, calls, none); err != nil {
			return err
		}
	}
	return nil
}

// ratios compares settling with the baseline, in each mode, once both are
// measured: throughput against the mean of the baseline's runs, and the
// CPU time per ask, whose ratio is the throughput ratio a machine that
// CPU bounds would show. The targets hold for the default install.
func (b *bench) ratios() {
	for _, conc := range []int{1, 32} {
		metric := fmt.Sprintf("asks/s, concurrency %d", conc)
		base, ok := b.r.Figures[figureName(metric, none)]
		if !ok {
			continue
		}
		if again, ok := b.r.Figures[figureName(metric+", again", none)]; ok {
			base = (base + again) / 2
		}
		for _, mode := range []testenv.Admission{testenv.Policies, testenv.WebhookMode} {
			rate, ok := b.r.Figures[figureName(metric, mode)]
			if !ok {
				continue
			}
			ratio := rate / base
			b.r.setMode(fmt.Sprintf("settle / baseline, concurrency %d", conc), mode, ratio)
			if mode != testenv.Policies {
				continue
			}
			want := 0.9
			if conc > 1 {
				want = 0.85
			}
			b.r.check(fmt.Sprintf("settle throughput, concurrency %d", conc), fmt.Sprintf(">= %.2f x baseline", want),
				fmt.Sprintf("%.2f x", ratio), ratio >= want)
		}
	}
	const cpu = "CPU ms per ask, concurrency 32, all"
	if base, ok := b.r.Figures[figureName(cpu, none)]; ok {
		for _, mode := range []testenv.Admission{testenv.Policies, testenv.WebhookMode} {
			if settle, ok := b.r.Figures[figureName(cpu, mode)]; ok {
				b.r.setMode("baseline CPU / settle CPU per ask, concurrency 32", mode, base/settle)
			}
		}
	}
}
