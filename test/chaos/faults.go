package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"time"
)

// faults injects one fault at a time, at exponentially distributed
// intervals of mean every, until end.
type faults struct {
	k     *cluster
	reps  *replicas
	tl    *timeline
	rng   *rand.Rand
	every time.Duration
	// Count by kind.
	Count map[string]int
}

// leaseDuration is the manager's default --leader-elect-lease-duration: a
// hung leader is stopped for longer than this.
const leaseDuration = 8 * time.Second

func (f *faults) run(ctx context.Context, end time.Time) {
	f.Count = map[string]int{}
	for {
		gap := time.Duration(f.rng.ExpFloat64() * float64(f.every))
		gap = max(gap, 3*time.Second)
		next := time.Now().Add(gap)
		if next.After(end) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		kind := f.pick()
		if kind != "restart-apiserver" && kind != "kill-both" {
			// A fault on the leader needs one: after the last fault, wait
			// for the next leader, and let it serve a moment (this also
			// spaces the faults out).
			if f.reps.waitForLeader(ctx, 60*time.Second) == nil {
				sleep(ctx, 2*time.Second)
			}
		}
		if l := f.reps.leader(); l != nil {
			f.tl.add(l.name, "fault", kind)
		} else {
			f.tl.add("", "fault", kind)
		}
		fmt.Fprintf(os.Stderr, "chaos: %s fault: %s\n", time.Now().Format("15:04:05"), kind)
		if err := f.inject(ctx, kind); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: fault %s: %v\n", kind, err)
			continue
		}
		f.Count[kind]++
	}
}

func (f *faults) pick() string {
	switch x := f.rng.Float64(); {
	case x < 0.35:
		return "kill-leader"
	case x < 0.45:
		return "kill-both"
	case x < 0.65:
		return "hang-leader"
	case x < 0.85:
		return "restart-apiserver"
	default:
		return "stale-standby-takes-over"
	}
}

func (f *faults) randDuration(from, to time.Duration) time.Duration {
	return from + time.Duration(f.rng.Int64N(int64(to-from)))
}

// inject runs one fault to its end (a hung leader is continued, a lag
// lifted) so that faults do not overlap; killed replicas come back on
// their own after their delay.
func (f *faults) inject(ctx context.Context, kind string) error {
	leader := f.reps.leader()
	switch kind {
	case "kill-leader":
		if leader == nil {
			return fmt.Errorf("no leader to kill")
		}
		leader.kill(f.randDuration(time.Second, 8*time.Second))
	case "kill-both":
		for _, r := range f.reps.all {
			r.kill(f.randDuration(2*time.Second, 8*time.Second))
		}
	case "hang-leader":
		if leader == nil {
			return fmt.Errorf("no leader to hang")
		}
		if !leader.signal(syscall.SIGSTOP, "stop") {
			return fmt.Errorf("%s is not running", leader.name)
		}
		// Longer than its lease: the other replica takes over while it
		// sleeps, and it wakes up believing it still leads.
		sleep(ctx, leaseDuration+f.randDuration(2*time.Second, 8*time.Second))
		leader.signal(syscall.SIGCONT, "cont")
	case "restart-apiserver":
		return f.k.restartAPIServer(ctx, f.randDuration(200*time.Millisecond, 3*time.Second))
	case "stale-standby-takes-over":
		if leader == nil {
			return fmt.Errorf("no leader")
		}
		standby := f.reps.other(leader)
		lag := f.randDuration(2*time.Second, 6*time.Second)
		standby.proxy.setLag(lag)
		f.tl.add(standby.name, "lag-on", lag.String())
		// Let the lag build a backlog, then kill the leader so that the
		// lagging standby leads with stale reads.
		sleep(ctx, f.randDuration(3*time.Second, 6*time.Second))
		leader.kill(f.randDuration(5*time.Second, 10*time.Second))
		sleep(ctx, leaseDuration+f.randDuration(5*time.Second, 10*time.Second))
		if standby.proxy.setLag(0) {
			f.tl.add(standby.name, "lag-off", "")
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
