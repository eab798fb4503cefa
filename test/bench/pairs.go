// Settle throughput judged in pairs: the bare client's asks and the
// default install's, one after the other, several times (A/B/A/B), so
// that both sides of each ratio see the same machine. One A-then-B
// comparison is noise on a shared machine: the baseline alone moved by
// 32 % within one run.

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/testenv"
)

// Targets of the settle throughput, in the default install, as the median
// of the pairs' ratios to the bare client.
const (
	settleTarget       = 0.95 // asks/s, at concurrency 1 and 32
	apiServerCPUTarget = 1.10 // kube-apiserver CPU time per ask, at concurrency 32
)

// round is one measurement of settle throughput in one admission mode:
// asks/s at each concurrency and, at concurrency 32, each process's CPU
// time per ask.
type round struct {
	rate   map[int]float64    // asks/s by concurrency
	cpu    map[string]float64 // CPU ms per ask at concurrency 32, by role and "all"
	others map[int]float64    // cores used by other processes, by concurrency
}

// throughputPairs measures settle throughput in Pairs pairs of rounds, the
// bare client's then the default install's, and judges the default
// install by the median of the pairs' ratios. The first round of each
// side also counts its API requests and profiles the API server.
func (b *bench) throughputPairs(ctx context.Context) error {
	sides := []testenv.Admission{none, testenv.Policies}
	rounds := map[testenv.Admission][]round{}
	for i := range b.s.Pairs {
		for _, mode := range sides {
			if err := b.use(ctx, mode); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "bench: settle throughput, pair %d of %d, %s\n", i+1, b.s.Pairs, modeName(mode))
			r, err := b.throughputRound(ctx, mode, i == 0)
			if err != nil {
				return err
			}
			rounds[mode] = append(rounds[mode], r)
			if mode == none {
				err = b.removeBaseline(ctx)
			} else if err = b.clean(ctx); err == nil {
				err = b.quiet(ctx)
			}
			if err != nil {
				return err
			}
		}
	}
	b.judgePairs(rounds[none], rounds[testenv.Policies])
	return nil
}

// throughputRound settles Asks asks at concurrency 1 and then 32 in mode
// (the bare client's writes when mode is none). With first, it also
// counts the API requests and profiles the processes at concurrency 32.
func (b *bench) throughputRound(ctx context.Context, mode testenv.Admission, first bool) (round, error) {
	r := round{rate: map[int]float64{}, others: map[int]float64{}}
	for _, conc := range []int{1, 32} {
		calls, err := b.apiCalls(ctx)
		if err != nil {
			return r, err
		}
		wait := func() {}
		if conc > 1 && first {
			profile := "settle" // the default install's; webhook mode's is settle-webhooks
			switch mode {
			case none:
				profile = "baseline"
			case testenv.Policies:
			default:
				profile += "-" + modeName(mode)
			}
			wait = b.profileCPU(ctx, time.Now().Add(time.Second), b.askProfile(), profile)
		}
		cpu, err := b.cpuTimes()
		if err != nil {
			return r, err
		}
		ask := func(ctx context.Context, _ int) error {
			_, err := b.settle(ctx)
			return err
		}
		if mode == none {
			ask = b.bareAsk
		}
		took, err := parallel(ctx, b.s.Asks, conc, ask)
		if err != nil {
			return r, err
		}
		// CPU time up to the last ask's Settled, as the agent saw it.
		perAsk, others, err := b.cpuUsed(cpu)
		if err != nil {
			return r, err
		}
		r.rate[conc] = float64(b.s.Asks) / took.Seconds()
		r.others[conc] = others
		if conc > 1 {
			r.cpu = perAsk
		}
		wait()
		switch {
		case !first:
		case conc > 1:
			err = b.callsPerAsk(ctx, calls, mode)
		default:
			err = b.logCalls(ctx, calls, mode, conc)
		}
		if err != nil {
			return r, err
		}
	}
	fmt.Fprintf(os.Stderr, "bench: %s: %.1f asks/s at concurrency 1, %.1f at 32; CPU ms per ask at 32: kube-apiserver %.2f, all %.2f\n",
		modeName(mode), r.rate[1], r.rate[32], r.cpu["kube-apiserver"], r.cpu["all"])
	return r, nil
}

// bareAsk writes, as a bare client with no controller and no admission,
// the objects a settled ask needs: the question, its Open status, the
// reply, the Settled status and the reply's outcome.
func (b *bench) bareAsk(ctx context.Context, _ int) error {
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
}

// spread is the median of a set of figures, with its lowest and highest.
type spread struct{ median, low, high float64 }

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{median: m, low: s[0], high: s[len(s)-1]}
}

func (s spread) String() string { return fmt.Sprintf("%.2f x (%.2f-%.2f)", s.median, s.low, s.high) }

// judgePairs records the medians of both sides' rounds in the table, the
// median of the pairs' ratios with their spread, and checks the targets.
func (b *bench) judgePairs(base, hitl []round) {
	n := min(len(base), len(hitl))
	if n == 0 {
		return
	}
	column := func(mode testenv.Admission, rounds []round) {
		for _, conc := range []int{1, 32} {
			var rates, others []float64
			for _, r := range rounds {
				rates, others = append(rates, r.rate[conc]), append(others, r.others[conc])
			}
			b.r.setMode(fmt.Sprintf("asks/s, concurrency %d", conc), mode, spreadOf(rates).median)
			b.r.setMode(fmt.Sprintf("cores used by other processes, concurrency %d", conc), mode, slices.Max(others))
		}
		for _, role := range append(slices.Clone(cpuRoles), "all") {
			var v []float64
			for _, r := range rounds {
				if c, ok := r.cpu[role]; ok {
					v = append(v, c)
				}
			}
			if len(v) > 0 {
				b.r.setMode("CPU ms per ask, concurrency 32, "+role, mode, spreadOf(v).median)
			}
		}
	}
	column(none, base)
	column(testenv.Policies, hitl)
	ratios := func(of func(r round) float64, inverse bool) spread {
		var v []float64
		for i := range n {
			x, y := of(hitl[i]), of(base[i])
			if inverse {
				x, y = y, x
			}
			if y > 0 {
				v = append(v, x/y)
			}
		}
		return spreadOf(v)
	}
	var pairs []string
	for i := range n {
		pairs = append(pairs, fmt.Sprintf("%.2f/%.2f", hitl[i].rate[32]/base[i].rate[32], hitl[i].cpu["kube-apiserver"]/base[i].cpu["kube-apiserver"]))
	}
	fmt.Fprintf(os.Stderr, "bench: settle / baseline at concurrency 32, and kube-apiserver CPU per ask / baseline's, by pair: %s\n", strings.Join(pairs, " "))
	for _, conc := range []int{1, 32} {
		s := ratios(func(r round) float64 { return r.rate[conc] }, false)
		name := fmt.Sprintf("settle / baseline, concurrency %d", conc)
		b.r.setMode(name, testenv.Policies, s.median)
		b.r.set(name+", lowest of the pairs", s.low)
		b.r.set(name+", highest of the pairs", s.high)
		b.r.check(fmt.Sprintf("settle throughput, concurrency %d", conc), fmt.Sprintf(">= %.2f x baseline", settleTarget), s.String(), s.median >= settleTarget)
	}
	all := ratios(func(r round) float64 { return r.cpu["all"] }, true)
	b.r.setMode("baseline CPU / settle CPU per ask, concurrency 32", testenv.Policies, all.median)
	api := ratios(func(r round) float64 { return r.cpu["kube-apiserver"] }, false)
	b.r.setMode("apiserver CPU per ask / baseline's, concurrency 32", testenv.Policies, api.median)
	b.r.set("apiserver CPU per ask / baseline's, concurrency 32, lowest of the pairs", api.low)
	b.r.set("apiserver CPU per ask / baseline's, concurrency 32, highest of the pairs", api.high)
	b.r.set("settle throughput pairs", float64(n))
	b.r.check("kube-apiserver CPU per ask, concurrency 32", fmt.Sprintf("<= %.2f x baseline", apiServerCPUTarget), api.String(), api.median <= apiServerCPUTarget)
}
