// The scale mode: one workload at b.s.Questions questions across many
// namespaces, run alone (--scale).

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/builders"
)

// parseScale reads --scale: a count of questions, with k for thousands
// ("100k").
func parseScale(s string) (int, error) {
	mult := 1
	if n, ok := strings.CutSuffix(strings.ToLower(s), "k"); ok {
		s, mult = n, 1000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n*mult < 1000 {
		return 0, errors.New("--scale: want a number of questions of at least 1000, such as 100k")
	}
	return n * mult, nil
}

// scaleLabel marks the scale mode's timed questions, which its observer
// watches across namespaces.
const scaleLabel = "bench.hitl.dev/scale"

// atScale is the scale mode: b.s.Questions questions across one namespace
// per hundred, a tenth of them open with timed windows spread over
// SpreadWindow, one in a hundred open and claimed, the rest settled by a
// reply. The objects are created by the bench's administrator, as fast as
// the API server takes them, while the manager settles; what is measured
// is the manager at that size: its memory, its cache sync after a
// restart, settle latency and deadline lateness.
func (b *bench) atScale(ctx context.Context) error {
	total := b.s.Questions
	namespaces := max(1, total/100)
	timedN, claimedN := total/10, total/100
	settledN := total - timedN - claimedN
	nsName := func(i int) string { return fmt.Sprintf("scale-%04d", i%namespaces) }
	fmt.Fprintf(os.Stderr, "bench: scale: %d questions across %d namespaces: %d settled, %d claimed, %d timed\n", total, namespaces, settledN, claimedN, timedN)
	b.r.set("scale: questions", float64(total))
	b.r.set("scale: namespaces", float64(namespaces))
	if _, err := parallel(ctx, namespaces, 32, func(ctx context.Context, i int) error {
		return b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(i)}})
	}); err != nil {
		return err
	}
	took, err := parallel(ctx, settledN, 64, func(ctx context.Context, i int) error {
		q := builders.Question(fmt.Sprintf("settled-%d", i), nsName(i)).Agent("bench").Label(hitlv1.AgentLabel, "bench").
			Ask("q", "Proceed?", "yes", "no").Obj()
		if err := b.c.Create(ctx, q); err != nil {
			return err
		}
		r := answer(q)
		r.Namespace = q.Namespace
		return b.c.Create(ctx, r)
	})
	if err != nil {
		return err
	}
	b.r.set("scale: settled questions and their replies created, per second", float64(settledN)/took.Seconds())
	if _, err := parallel(ctx, claimedN, 32, func(ctx context.Context, i int) error {
		q := builders.Question(fmt.Sprintf("claimed-%d", i), nsName(i)).Agent("bench").Label(hitlv1.AgentLabel, "bench").
			Ask("q", "Proceed?", "yes", "no").Timeout(2 * time.Hour).Obj()
		if err := b.c.Create(ctx, q); err != nil {
			return err
		}
		// The longest claim: not renewed, it lapses 5 minutes in, which
		// leaves the controller the same objects to cache and read.
		return b.c.Create(ctx, claim(q, hitlv1.MaxClaimLeaseSeconds*time.Second))
	}); err != nil {
		return err
	}
	drained := time.Now()
	caughtUp, err := b.quietFor(ctx, 30*time.Minute, 100*time.Millisecond, 5)
	if err != nil {
		return err
	}
	b.r.set("scale: manager caught up, s after the last object was created", caughtUp.Sub(drained).Seconds())

	// A restart: the cache sync of every object, then the first reconcile
	// of each.
	b.stopManager()
	start := time.Now()
	if err := b.startManager(false); err != nil {
		return err
	}
	// The manager's CPU (and the API server's) from its start, through the
	// cache sync and the first reconcile of every question.
	profiled := func() {}
	if err := b.waitForPprof(10 * time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "bench: scale: no CPU profile of the restart: %v\n", err)
	} else {
		profiled = b.profileCPU(ctx, time.Now(), min(60, max(10, total/1500)), "scale-restart")
	}
	var synced time.Time
	select {
	case synced = <-b.synced:
	case <-time.After(10 * time.Minute):
		return errors.New("the manager's workers never started")
	}
	reconciled, err := b.quietFor(ctx, 30*time.Minute, 100*time.Millisecond, 5)
	if err != nil {
		return err
	}
	b.r.set("scale: restart to cache sync, ms", ms(synced.Sub(start)))
	b.r.set("scale: cache sync to every question reconciled, s", reconciled.Sub(synced).Seconds())
	profiled()
	if err := b.scaleMemory("after restart"); err != nil {
		return err
	}
	if err := b.saveProfile("heap?gc=1", "manager-heap-scale-restart.pprof"); err != nil {
		return err
	}
	// What a scrape of the manager's metrics costs at this size (every
	// figure it serves is kept as it goes: no pass over the cache).
	scrapeStart := time.Now()
	if _, err := b.managerMetrics(); err != nil {
		return err
	}
	b.r.set("scale: one read of the manager's /metrics, ms", ms(time.Since(scrapeStart)))

	// Settle latency, one ask at a time, with every question in the cache.
	var samples []time.Duration
	for range b.s.LatencySamples {
		d, err := b.settle(ctx)
		if err != nil {
			return err
		}
		samples = append(samples, d.total)
	}
	p50, p99, worst := percentiles(samples)
	b.r.set(fmt.Sprintf("scale: settle latency ms, %d questions, p50", total), ms(p50))
	b.r.set(fmt.Sprintf("scale: settle latency ms, %d questions, p99", total), ms(p99))
	b.r.set(fmt.Sprintf("scale: settle latency ms, %d questions, max", total), ms(worst))
	b.r.check(fmt.Sprintf("settle latency p99, %d questions", total), "<= 150ms", p99.Round(time.Millisecond/10).String(), p99 <= 150*time.Millisecond)

	// The timed windows, spread over the window across every namespace.
	obs := newObserver()
	if err := obs.run(ctx, b.c, "", scaleLabel, "timed"); err != nil {
		return err
	}
	lead, err := b.calibrate(ctx, timedN)
	if err != nil {
		return err
	}
	names, first, err := b.askSpread(ctx, timedN, b.s.SpreadWindow, lead, func(i int, timeout time.Duration) *hitlv1.UserQuestion {
		return builders.Question(fmt.Sprintf("timed-%d", i), nsName(i)).Agent("bench").Label(hitlv1.AgentLabel, "bench").
			Label(scaleLabel, "timed").Ask("q", "Proceed?", "yes", "no").Timeout(timeout).Obj()
	})
	if err != nil {
		return err
	}
	if caughtUp, err := waitOpen(ctx, obs, names); err != nil {
		return err
	} else {
		b.r.set("scale: every Open status written, s before the first deadline", first.Sub(caughtUp).Seconds())
	}
	wait, cancel := context.WithTimeout(ctx, time.Until(first.Add(b.s.SpreadWindow))+60*time.Second)
	defer cancel()
	// The manager's and the API server's CPU in the middle of the window,
	// while the deadlines fall due.
	profiledDeadlines := b.profileCPU(ctx, first.Add(b.s.SpreadWindow/3), 10, "scale-deadlines")
	late, early, _, err := lateness(wait, obs, names)
	profiledDeadlines()
	if err != nil {
		return err
	}
	b.logSlices("scale: spread", late)
	p50, p99, worst = percentiles(late)
	label := fmt.Sprintf("scale: deadline lateness ms, %d spread", len(late))
	b.r.set(label+" p50", ms(p50))
	b.r.set(label+" p99", ms(p99))
	b.r.set(label+" max", ms(worst))
	b.r.set("scale: early transitions", float64(early))
	b.r.check("no early transition, scale", "0", strconv.Itoa(early), early == 0)
	b.checkLateness(fmt.Sprintf("%d questions", total), p99, worst)

	if err := b.scaleMemory("at the end"); err != nil {
		return err
	}
	if err := b.saveProfile("heap?gc=1", "manager-heap-scale.pprof"); err != nil {
		return err
	}
	// Ten windows per namespace: the manager writes an Event for each
	// (within its budget), so the floor does too.
	_, err = b.spreadFloor(ctx, timedN, lead, nsName, "scale: floor: ", true)
	return err
}

// waitForPprof waits until the manager's profiling endpoint listens.
func (b *bench) waitForPprof(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		conn, err := net.DialTimeout("tcp", b.pprof, time.Second)
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scaleMemory records the manager's RSS and Go heap, and checks the RSS.
func (b *bench) scaleMemory(when string) error {
	time.Sleep(2 * time.Second)
	rss, heap, err := b.managerMemory()
	if err != nil {
		return err
	}
	b.r.set("scale: manager RSS MiB, "+when, float64(rss)/(1<<20))
	b.r.set("scale: manager Go heap in use MiB, "+when, heap/(1<<20))
	b.r.check(fmt.Sprintf("manager RSS at %d questions, %s", b.s.Questions, when), "<= 600MiB", fmt.Sprintf("%.0fMiB", float64(rss)/(1<<20)), rss <= 600<<20)
	return nil
}
