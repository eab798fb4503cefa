// The settle workloads: settle throughput at concurrency 1 and 32, and
// settle latency with 100 and ManyOpen questions open.

package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/testenv"
)

// settled is how long one settled ask took, from sending the reply until
// the agent's watch saw the question Settled, and in parts: the reply's
// creation, from then until the controller decided (its watch, its queue,
// its reads and the access review of the reply's author), and from the
// decision until the agent saw it (the status write and the agent's
// watch).
type settled struct {
	total, create, toDecision, toSeen time.Duration
}

// settle asks a blocking question, answers it and waits until the agent's
// watch sees it Settled.
func (b *bench) settle(ctx context.Context) (settled, error) {
	q := blocking(name("ask"))
	if err := b.c.Create(ctx, q); err != nil {
		return settled{}, err
	}
	sent := time.Now()
	if err := b.c.Create(ctx, answer(q)); err != nil {
		return settled{}, err
	}
	created := time.Now()
	at, err := b.obs.wait(ctx, q.Name, hitlv1.StateSettled)
	if err != nil {
		return settled{}, err
	}
	s := settled{total: at.Sub(sent), create: created.Sub(sent)}
	if decided, ok := b.obs.decidedAt(q.Name); ok {
		s.toDecision, s.toSeen = decided.Sub(created), at.Sub(decided)
	}
	return s, nil
}

// throughput settles asks at concurrency 1 and 32 in the current admission
// mode, once (webhook mode, which has no target: the default install is
// measured in pairs with the bare client, pairs.go).
func (b *bench) throughput(ctx context.Context) error {
	r, err := b.throughputRound(ctx, b.mode, true)
	if err != nil {
		return err
	}
	for _, conc := range []int{1, 32} {
		b.r.setMode(fmt.Sprintf("asks/s, concurrency %d", conc), b.mode, r.rate[conc])
		b.r.setMode(fmt.Sprintf("cores used by other processes, concurrency %d", conc), b.mode, r.others[conc])
	}
	for _, role := range append(slices.Clone(cpuRoles), "all") {
		if v, ok := r.cpu[role]; ok {
			b.r.setMode("CPU ms per ask, concurrency 32, "+role, b.mode, v)
		}
	}
	return nil // ratios compares them with the baseline
}

// openQuestions tops the open blocking questions up to n.
func (b *bench) openQuestions(ctx context.Context, n int, have *int) error {
	_, err := parallel(ctx, n-*have, 16, func(ctx context.Context, _ int) error {
		return b.c.Create(ctx, blocking(name("open")))
	})
	*have = n
	return err
}

// latency settles asks one at a time, with 100 and then ManyOpen other
// questions open, in the current admission mode; the targets hold for the
// default install (policies).
func (b *bench) latency(ctx context.Context) error {
	have := 0
	for _, open := range []int{100, b.s.ManyOpen} {
		if err := b.openQuestions(ctx, open, &have); err != nil {
			return err
		}
		if err := b.quiet(ctx); err != nil { // the new questions are all Open
			return err
		}
		before, err := b.apiCalls(ctx)
		if err != nil {
			return err
		}
		cpu, err := b.cpuTimes()
		if err != nil {
			return err
		}
		var samples, create, toDecision, toSeen []time.Duration
		for range b.s.LatencySamples {
			d, err := b.settle(ctx)
			if err != nil {
				return err
			}
			samples, create = append(samples, d.total), append(create, d.create)
			toDecision, toSeen = append(toDecision, d.toDecision), append(toSeen, d.toSeen)
		}
		label := fmt.Sprintf("settle latency ms, %d open", open)
		cpuAfter, err := b.cpuTimes()
		if err != nil {
			return err
		}
		b.r.setMode(fmt.Sprintf("cores used by other processes, latency, %d open", open), b.mode, othersCores(cpu, cpuAfter))
		if err := b.quiet(ctx); err != nil {
			return err
		}
		after, err := b.apiCalls(ctx)
		if err != nil {
			return err
		}
		breakdown(before, after, len(samples), fmt.Sprintf("%s, %d open, one at a time", modeName(b.mode), open))
		p50, p99, worst := percentiles(samples)
		b.r.setMode(label+", p50", b.mode, ms(p50))
		b.r.setMode(label+", p99", b.mode, ms(p99))
		b.r.setMode(label+", max", b.mode, ms(worst))
		if open == 100 {
			for _, part := range []struct {
				name string
				d    []time.Duration
			}{{"reply create", create}, {"to decision", toDecision}, {"decision to seen", toSeen}} {
				p50, p99, _ := percentiles(part.d)
				b.r.setMode(fmt.Sprintf("%s, part: %s, p50", label, part.name), b.mode, ms(p50))
				b.r.setMode(fmt.Sprintf("%s, part: %s, p99", label, part.name), b.mode, ms(p99))
			}
		}
		if b.mode != testenv.Policies {
			continue
		}
		limit := 40 * time.Millisecond
		if open > 100 {
			limit = 100 * time.Millisecond
		}
		b.r.check(fmt.Sprintf("settle latency p99, %d open", open), "<= "+limit.String(), p99.Round(time.Millisecond/10).String(), p99 <= limit)
	}
	return nil
}
