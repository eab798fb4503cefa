package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/manager"
	"github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

const ns = "bench"

// bench holds the control plane, the clients and the manager process.
type bench struct {
	s          scale
	env        *envtest.Environment
	c          client.WithWatch
	obs        *observer
	kubeconfig string
	managerBin string
	manager    *exec.Cmd
	synced     chan time.Time
	metrics    string
	pprof      string
	cfg        *rest.Config // the bench's, an administrator's
	outDir     string       // where profiles are written
	r          *results
}

func runAll(ctx context.Context, s scale, managerBin, outDir string, only *regexp.Regexp) (*results, error) {
	b := &bench{s: s, managerBin: managerBin, outDir: outDir, r: &results{Quick: s == quick, Figures: map[string]float64{}}}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	defer b.stop()
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"baseline", b.baseline},
		{"settle throughput", b.throughput},
		{"settle latency", b.latency},
		{"deadline precision", b.deadlines},
		{"claims", b.claims},
		{"memory", b.memory},
		{"restart", b.restart},
	}
	for i, st := range steps {
		if i > 0 && !only.MatchString(st.name) {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s\n", st.name)
		if err := st.run(ctx); err != nil {
			return b.r, fmt.Errorf("%s: %w", st.name, err)
		}
		// Each workload runs at its own scale: the next one starts from an
		// empty namespace, except the restart, which needs memory's objects.
		if i > 0 && st.name != "memory" && i < len(steps)-1 {
			if err := b.clean(ctx); err != nil {
				return b.r, fmt.Errorf("cleaning up after %s: %w", st.name, err)
			}
			if b.manager != nil {
				if err := b.quiet(ctx); err != nil {
					return b.r, fmt.Errorf("after %s: %w", st.name, err)
				}
			}
		}
	}
	return b.r, nil
}

// clean deletes every question, reply and claim of the namespace.
func (b *bench) clean(ctx context.Context) error {
	for _, obj := range []client.Object{&hitlv1.QuestionReply{}, &hitlv1.UserQuestion{}, &coordinationv1.Lease{}} {
		if err := b.c.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) start(ctx context.Context) error {
	env, err := testenv.WithWebhooks(testenv.New(), testenv.WebhookMode)
	if err != nil {
		return err
	}
	b.env = env
	cfg, _, err := testenv.Start(b.env)
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 10000, 20000
	b.cfg = cfg
	if b.c, err = client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return err
	}
	admin, err := b.env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	data, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	b.kubeconfig = filepath.Join(os.TempDir(), fmt.Sprintf("hitl-bench-%d.kubeconfig", os.Getpid()))
	if err := os.WriteFile(b.kubeconfig, data, 0o600); err != nil {
		return err
	}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	b.obs = newObserver()
	return b.obs.run(ctx, b.c, ns)
}

func (b *bench) stop() {
	b.stopManager()
	_ = b.env.Stop()
	_ = os.Remove(b.kubeconfig)
}

// startManager runs the manager binary with the flags it ships with, and
// the webhook server the local control plane calls.
func (b *bench) startManager() error {
	wh := testenv.WebhookOptions(b.env)
	port, err := freePort()
	if err != nil {
		return err
	}
	b.metrics = fmt.Sprintf("127.0.0.1:%d", port)
	if port, err = freePort(); err != nil {
		return err
	}
	b.pprof = fmt.Sprintf("127.0.0.1:%d", port)
	b.manager = exec.Command(b.managerBin, "--kubeconfig", b.kubeconfig, "--metrics-bind-address", b.metrics,
		"--pprof-bind-address", b.pprof,
		"--health-probe-bind-address", "0", "--enable-webhooks", "--webhook-host", wh.Host, "--webhook-port", strconv.Itoa(wh.Port),
		"--webhook-cert-dir", wh.CertDir)
	stderr, err := b.manager.StderrPipe()
	if err != nil {
		return err
	}
	b.synced = make(chan time.Time, 1)
	if err := b.manager.Start(); err != nil {
		return err
	}
	go func() {
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			if strings.Contains(s.Text(), "Starting workers") {
				b.synced <- time.Now()
			}
		}
	}()
	return testenv.WaitForWebhooks(b.env, 30*time.Second)
}

func (b *bench) stopManager() {
	if b.manager == nil || b.manager.Process == nil {
		return
	}
	_ = b.manager.Process.Signal(syscall.SIGTERM)
	_ = b.manager.Wait()
	b.manager = nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var seq atomic.Int64

func name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// parallel runs n jobs on `workers` goroutines and returns how long they took.
func parallel(ctx context.Context, n, workers int, job func(ctx context.Context, i int) error) (time.Duration, error) {
	start := time.Now()
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := job(ctx, i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), first
}

func blocking(n string) *hitlv1.UserQuestion {
	return builders.Question(n, ns).Agent("bench").Ask("q", "Proceed?", "yes", "no").Obj()
}

func answer(n string) *hitlv1.QuestionReply {
	return builders.Reply(n+"-r", ns, n).Select("q", "yes").Obj()
}

// baseline is the limit: the object writes a settled ask needs, by a bare
// client with no controller and no webhooks in the way.
func (b *bench) baseline(ctx context.Context) error {
	hooks, err := b.removeWebhooks(ctx)
	if err != nil {
		return err
	}
	for _, conc := range []int{1, 32} {
		cpu, err := b.cpuTimes()
		if err != nil {
			return err
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
			r := answer(q.Name)
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
		b.r.set(fmt.Sprintf("baseline asks/s (bare client, concurrency %d)", conc), float64(b.s.Asks)/took.Seconds())
		if conc > 1 {
			if err := b.cpuPerAsk(cpu, fmt.Sprintf("baseline, concurrency %d", conc)); err != nil {
				return err
			}
		}
	}
	if err := b.transitionFloor(ctx); err != nil {
		return err
	}
	// The baseline's objects would be orphans to the controller: remove them.
	if err := b.c.DeleteAllOf(ctx, &hitlv1.QuestionReply{}, client.InNamespace(ns)); err != nil {
		return err
	}
	if err := b.c.DeleteAllOf(ctx, &hitlv1.UserQuestion{}, client.InNamespace(ns)); err != nil {
		return err
	}
	if err := b.restoreWebhooks(ctx, hooks); err != nil {
		return err
	}
	return b.startManager()
}

// transitionFloor times what a burst of deadlines costs the API server
// alone: a bare client writing the Continued status of SharedDeadline
// questions, and then the status and an Event for each (what the
// controller writes per transition), with as many writers as the manager
// has workers. No controller can flip a burst faster than this.
func (b *bench) transitionFloor(ctx context.Context) error {
	n := b.s.SharedDeadline
	qs := make([]*hitlv1.UserQuestion, n)
	if _, err := parallel(ctx, n, 32, func(ctx context.Context, i int) error {
		qs[i] = timed(name("floor"), time.Hour)
		return b.c.Create(ctx, qs[i])
	}); err != nil {
		return err
	}
	for _, withEvents := range []bool{false, true} {
		took, err := parallel(ctx, n, manager.DefaultConfig().Workers, func(ctx context.Context, i int) error {
			q := qs[i]
			q.Status.State = hitlv1.StateContinued
			if withEvents {
				q.Status.State = hitlv1.StateOpen
			}
			if err := b.c.Status().Update(ctx, q); err != nil {
				return err
			}
			if !withEvents {
				return nil
			}
			now := time.Now()
			return b.c.Create(ctx, &eventsv1.Event{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", q.Name, now.UnixNano()), Namespace: ns},
				EventTime:  metav1.NewMicroTime(now), ReportingController: "bench", ReportingInstance: "bench",
				Action: "Continue", Reason: "Continued", Type: corev1.EventTypeNormal, Note: "floor",
				Regarding: corev1.ObjectReference{Kind: "UserQuestion", APIVersion: hitlv1.GroupVersion.String(), Namespace: ns, Name: q.Name, UID: q.UID},
			})
		})
		if err != nil {
			return err
		}
		label := fmt.Sprintf("floor: %d status writes by a bare client, ms", n)
		if withEvents {
			label = fmt.Sprintf("floor: %d status writes + %d events by a bare client, ms", n, n)
		}
		b.r.set(label, ms(took))
	}
	return nil
}

type webhookConfigs struct {
	mutating   []admissionv1.MutatingWebhookConfiguration
	validating []admissionv1.ValidatingWebhookConfiguration
}

func (b *bench) removeWebhooks(ctx context.Context) (*webhookConfigs, error) {
	var h webhookConfigs
	var m admissionv1.MutatingWebhookConfigurationList
	var v admissionv1.ValidatingWebhookConfigurationList
	if err := b.c.List(ctx, &m); err != nil {
		return nil, err
	}
	if err := b.c.List(ctx, &v); err != nil {
		return nil, err
	}
	for i := range m.Items {
		h.mutating = append(h.mutating, m.Items[i])
		if err := b.c.Delete(ctx, &m.Items[i]); err != nil {
			return nil, err
		}
	}
	for i := range v.Items {
		h.validating = append(h.validating, v.Items[i])
		if err := b.c.Delete(ctx, &v.Items[i]); err != nil {
			return nil, err
		}
	}
	return &h, nil
}

func (b *bench) restoreWebhooks(ctx context.Context, h *webhookConfigs) error {
	for i := range h.mutating {
		w := h.mutating[i].DeepCopy()
		w.ResourceVersion, w.UID = "", ""
		if err := b.c.Create(ctx, w); err != nil {
			return err
		}
	}
	for i := range h.validating {
		w := h.validating[i].DeepCopy()
		w.ResourceVersion, w.UID = "", ""
		if err := b.c.Create(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// settle asks a blocking question, answers it and waits until the agent's
// watch sees it Settled; it returns the time from reply to Settled.
func (b *bench) settle(ctx context.Context) (time.Duration, error) {
	q := blocking(name("ask"))
	if err := b.c.Create(ctx, q); err != nil {
		return 0, err
	}
	sent := time.Now()
	if err := b.c.Create(ctx, answer(q.Name)); err != nil {
		return 0, err
	}
	at, err := b.obs.wait(ctx, q.Name, hitlv1.StateSettled)
	return at.Sub(sent), err
}

func (b *bench) throughput(ctx context.Context) error {
	for _, conc := range []int{1, 32} {
		var wait func()
		var calls map[string]float64
		var cpu map[string]time.Duration
		if conc > 1 {
			wait = b.profileCPU(ctx, time.Now().Add(2*time.Second), "settle")
			var err error
			if calls, err = b.apiCalls(ctx); err != nil {
				return err
			}
			if cpu, err = b.cpuTimes(); err != nil {
				return err
			}
		}
		took, err := parallel(ctx, b.s.Asks, conc, func(ctx context.Context, _ int) error {
			_, err := b.settle(ctx)
			return err
		})
		if err != nil {
			return err
		}
		if wait != nil {
			// CPU time as the baseline's: up to the last ask's Settled.
			if err := b.cpuPerAsk(cpu, fmt.Sprintf("settle, concurrency %d", conc)); err != nil {
				return err
			}
			wait()
			if err := b.callsPerAsk(ctx, calls); err != nil {
				return err
			}
		}
		rate := float64(b.s.Asks) / took.Seconds()
		base := b.r.Figures[fmt.Sprintf("baseline asks/s (bare client, concurrency %d)", conc)]
		b.r.set(fmt.Sprintf("settle asks/s through hitl (concurrency %d)", conc), rate)
		b.r.set(fmt.Sprintf("settle / baseline ratio (concurrency %d)", conc), rate/base)
		b.r.check(fmt.Sprintf("settle throughput, concurrency %d", conc), ">= 0.6 x baseline",
			fmt.Sprintf("%.2f x", rate/base), rate/base >= 0.6)
	}
	return nil
}

// callsPerAsk reports the API writes and webhook calls the settled asks
// cost since before, per ask, once the controller and its Event writer are
// done with them; the baseline's asks cost 5 writes and no webhook call.
func (b *bench) callsPerAsk(ctx context.Context, before map[string]float64) error {
	if err := b.quiet(ctx); err != nil {
		return err
	}
	time.Sleep(3 * time.Second) // Events may wait up to 2 s behind status writes
	after, err := b.apiCalls(ctx)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(after))
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	writes, hooks := 0.0, 0.0
	for _, k := range keys {
		per := (after[k] - before[k]) / float64(b.s.Asks)
		if per < 0.005 {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: per settled ask: %-45s %.2f\n", k, per)
		switch {
		case strings.HasPrefix(k, "webhook "):
			hooks += per
		case !strings.HasPrefix(k, "GET ") && !strings.HasPrefix(k, "LIST "):
			writes += per
		}
	}
	b.r.set("settle: API writes per ask (baseline 5)", writes)
	b.r.set("settle: admission webhook calls per ask", hooks)
	return nil
}

// openQuestions tops the open blocking questions up to n.
func (b *bench) openQuestions(ctx context.Context, n int, have *int) error {
	_, err := parallel(ctx, n-*have, 16, func(ctx context.Context, _ int) error {
		return b.c.Create(ctx, blocking(name("open")))
	})
	*have = n
	return err
}

func (b *bench) latency(ctx context.Context) error {
	have := 0
	for _, open := range []int{100, b.s.ManyOpen} {
		if err := b.openQuestions(ctx, open, &have); err != nil {
			return err
		}
		if err := b.quiet(ctx); err != nil { // the new questions are all Open
			return err
		}
		var samples []time.Duration
		for range b.s.LatencySamples {
			d, err := b.settle(ctx)
			if err != nil {
				return err
			}
			samples = append(samples, d)
		}
		p50, p99, worst := percentiles(samples)
		label := fmt.Sprintf("settle latency ms, %d open", open)
		b.r.set(label+" p50", ms(p50))
		b.r.set(label+" p99", ms(p99))
		b.r.set(label+" max", ms(worst))
		limit := 50 * time.Millisecond
		if open > 100 {
			limit = 100 * time.Millisecond
		}
		b.r.check(fmt.Sprintf("settle latency p99, %d open", open), "<= "+limit.String(), p99.Round(time.Millisecond/10).String(), p99 <= limit)
	}
	return nil
}

func timed(n string, timeout time.Duration) *hitlv1.UserQuestion {
	return builders.Question(n, ns).Agent("bench").Ask("q", "Proceed?", "yes", "no").Timeout(timeout).Obj()
}

func (b *bench) deadlines(ctx context.Context) error {
	// The deadlines must all lie after the questions are asked and the
	// controller has written their Open status, so that what is measured is
	// the controller's timing, not the API server's write rate while it
	// takes in a burst of new questions: time a calibration batch first,
	// from its creation until the controller has written every Open status.
	calibration := 200
	start := time.Now()
	if _, err := parallel(ctx, calibration, 16, func(ctx context.Context, _ int) error {
		q := blocking(name("calibrate"))
		if err := b.c.Create(ctx, q); err != nil {
			return err
		}
		_, err := b.obs.wait(ctx, q.Name, hitlv1.StateOpen)
		return err
	}); err != nil {
		return err
	}
	perQuestion := time.Since(start) / time.Duration(calibration)
	lead := 3*time.Second + perQuestion*time.Duration(b.s.SpreadDeadline+b.s.SharedDeadline)*2
	b.r.set("deadline questions asked ahead of the first deadline, s", lead.Seconds())
	start = time.Now().Add(lead)
	var spread []string
	_, err := parallel(ctx, b.s.SpreadDeadline, 16, func(ctx context.Context, i int) error {
		offset := time.Duration(int64(b.s.SpreadWindow) * int64(i) / int64(b.s.SpreadDeadline))
		created := time.Now().Truncate(time.Second) // the API server's creationTimestamp, to the second
		q := timed(fmt.Sprintf("spread-%d", i), start.Add(offset).Sub(created).Truncate(time.Millisecond))
		return b.c.Create(ctx, q)
	})
	if err != nil {
		return err
	}
	for i := range b.s.SpreadDeadline {
		spread = append(spread, fmt.Sprintf("spread-%d", i))
	}
	// Shared: the same deadline, aimed at one whole second.
	target := start.Add(b.s.SpreadWindow + 5*time.Second).Truncate(time.Second)
	var shared []string
	_, err = parallel(ctx, b.s.SharedDeadline, 16, func(ctx context.Context, i int) error {
		created := time.Now().Truncate(time.Second) // the API server's creationTimestamp, to the second
		q := timed(fmt.Sprintf("shared-%d", i), target.Sub(created))
		return b.c.Create(ctx, q)
	})
	if err != nil {
		return err
	}
	for i := range b.s.SharedDeadline {
		shared = append(shared, fmt.Sprintf("shared-%d", i))
	}
	defer b.profileCPU(ctx, target, "shared-deadline")()
	var caughtUp time.Time
	for _, n := range append(spread, shared...) {
		at, err := b.obs.wait(ctx, n, hitlv1.StateOpen)
		if err != nil {
			return err
		}
		if at.After(caughtUp) {
			caughtUp = at
		}
	}
	b.r.set("deadline: every Open status written, s before the first deadline", start.Sub(caughtUp).Seconds())
	wait, cancel := context.WithTimeout(ctx, time.Until(target)+30*time.Second)
	defer cancel()
	for _, set := range []struct {
		label string
		names []string
	}{{"spread", spread}, {"shared", shared}} {
		var late []time.Duration
		early := 0
		var lastFlip time.Time
		for _, n := range set.names {
			if _, err := b.obs.wait(wait, n, hitlv1.StateContinued); err != nil {
				return fmt.Errorf("question %s never became Continued: %w", n, err)
			}
			at, deadline, _ := b.obs.seenAt(n, hitlv1.StateContinued)
			if at.Before(deadline) {
				early++
			}
			late = append(late, at.Sub(deadline))
			if at.After(lastFlip) {
				lastFlip = at
			}
		}
		if set.label == "spread" {
			b.logSlices(late)
		}
		p50, p99, worst := percentiles(late)
		label := fmt.Sprintf("deadline lateness ms, %d %s", len(set.names), set.label)
		b.r.set(label+" p50", ms(p50))
		b.r.set(label+" p99", ms(p99))
		b.r.set(label+" max", ms(worst))
		b.r.set(fmt.Sprintf("early transitions, %s", set.label), float64(early))
		b.r.check("no early transition, "+set.label, "0", strconv.Itoa(early), early == 0)
		if set.label == "spread" {
			b.r.check("deadline lateness p99", "<= 200ms", p99.Round(time.Millisecond).String(), p99 <= 200*time.Millisecond)
			b.r.check("deadline lateness max", "<= 1s", worst.Round(time.Millisecond).String(), worst <= time.Second)
		} else {
			all := lastFlip.Sub(target)
			b.r.set("shared deadline: last flip after the deadline, ms", ms(all))
			b.r.check(fmt.Sprintf("all %d shared deadlines flipped", len(set.names)), "within 2s", all.Round(time.Millisecond).String(), all <= 2*time.Second)
		}
	}
	return nil
}

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

func (b *bench) memory(ctx context.Context) error {
	// The stated scale: questions, each settled by a reply, and claims.
	if _, err := parallel(ctx, b.s.MemQuestions, 32, func(ctx context.Context, _ int) error {
		q := blocking(name("mem"))
		if err := b.c.Create(ctx, q); err != nil {
			return err
		}
		return b.c.Create(ctx, answer(q.Name))
	}); err != nil {
		return err
	}
	if _, err := parallel(ctx, b.s.MemClaims, 16, func(ctx context.Context, i int) error {
		q := timed(fmt.Sprintf("mem-claimed-%d", i), time.Hour)
		if err := b.c.Create(ctx, q); err != nil {
			return err
		}
		holder := "bench"
		return b.c.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: q.Name + "-claim", Namespace: ns,
				Labels: map[string]string{hitlv1.ClaimLabel: "true", hitlv1.QuestionLabel: q.Name}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr.To(int32(300))},
		})
	}); err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	rss, err := rssBytes(b.manager.Process.Pid)
	if err != nil {
		return err
	}
	heap, err := b.scrape("go_memstats_heap_inuse_bytes")
	if err != nil {
		return err
	}
	if err := b.saveProfile("heap", "manager-heap.pprof"); err != nil {
		return err
	}
	b.r.set("memory: manager RSS MiB", float64(rss)/(1<<20))
	b.r.set("memory: manager Go heap in use MiB", heap/(1<<20))
	b.r.check(fmt.Sprintf("manager RSS at %d questions+replies", b.s.MemQuestions), "<= 150MiB", fmt.Sprintf("%.0fMiB", float64(rss)/(1<<20)), rss <= 150<<20)
	return nil
}

func (b *bench) restart(ctx context.Context) error {
	// Questions can only be created while the webhooks are served, so the
	// overdue ones are asked just before the manager stops, with deadlines
	// that pass while it is down.
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
	start := time.Now()
	if err := b.startManager(); err != nil {
		return err
	}
	var synced time.Time
	select {
	case synced = <-b.synced:
	case <-time.After(60 * time.Second):
		return fmt.Errorf("the manager's workers never started")
	}
	defer b.profileCPU(ctx, synced, "restart")()
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
	b.r.check(fmt.Sprintf("%d overdue deadlines after restart", len(before)), "within 2s of sync", last.Sub(synced).Round(time.Millisecond).String(), last.Sub(synced) <= 2*time.Second)
	return nil
}

// logSlices prints the lateness of the spread deadlines by tenths of
// their window, in deadline order, to show when the late ones fell due.
func (b *bench) logSlices(late []time.Duration) {
	n := len(late)
	var parts []string
	for i := range 10 {
		slice := append([]time.Duration(nil), late[i*n/10:(i+1)*n/10]...)
		_, p99, worst := percentiles(slice)
		parts = append(parts, fmt.Sprintf("%.0f/%.0f", ms(p99), ms(worst)))
	}
	fmt.Fprintf(os.Stderr, "bench: spread lateness p99/max ms by tenth of the window: %s\n", strings.Join(parts, " "))
}

func percentiles(d []time.Duration) (p50, p99, worst time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return at(0.5), at(0.99), d[len(d)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func rssBytes(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// profileCPU takes 5 s CPU profiles of the manager and the API server from
// at on, as manager-cpu-<what>.pprof and apiserver-cpu-<what>.pprof; the
// function it returns waits for them.
func (b *bench) profileCPU(ctx context.Context, at time.Time, what string) (wait func()) {
	done := make(chan error, 2)
	go func() {
		time.Sleep(time.Until(at))
		done <- b.saveProfile("profile?seconds=5", "manager-cpu-"+what+".pprof")
	}()
	go func() {
		time.Sleep(time.Until(at))
		done <- b.saveAPIServerProfile(ctx, "profile?seconds=5", "apiserver-cpu-"+what+".pprof")
	}()
	return func() {
		for range 2 {
			if err := <-done; err != nil {
				fmt.Fprintf(os.Stderr, "bench: profiling %s: %v\n", what, err)
			}
		}
	}
}

// saveProfile writes one of the manager's pprof profiles next to the
// results, for `go tool pprof`.
func (b *bench) saveProfile(profile, file string) error {
	resp, err := http.Get("http://" + b.pprof + "/debug/pprof/" + profile)
	if err != nil {
		return err
	}
	return b.saveBody(resp, file)
}

// saveAPIServerProfile writes one of kube-apiserver's pprof profiles.
func (b *bench) saveAPIServerProfile(ctx context.Context, profile, file string) error {
	resp, err := b.apiServerGet(ctx, "/debug/pprof/"+profile)
	if err != nil {
		return err
	}
	return b.saveBody(resp, file)
}

// apiServerGet reads one of kube-apiserver's own endpoints as the bench's
// administrator.
func (b *bench) apiServerGet(ctx context.Context, path string) (*http.Response, error) {
	hc, err := rest.HTTPClientFor(b.cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(b.cfg.Host, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	return hc.Do(req)
}

func (b *bench) saveBody(resp *http.Response, file string) error {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Request.URL.Path, resp.Status)
	}
	if err := os.MkdirAll(b.outDir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(b.outDir, file))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// scrape reads a metric of the manager: the sum of its series whose labels
// contain every one of labels.
func (b *bench) scrape(metric string, labels ...string) (float64, error) {
	resp, err := http.Get("http://" + b.metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	series, err := seriesOf(body, metric, labels...)
	if err != nil {
		return 0, err
	}
	if len(series) == 0 {
		return 0, fmt.Errorf("metric %s not found", metric)
	}
	sum := 0.0
	for _, v := range series {
		sum += v
	}
	return sum, nil
}

// seriesOf parses the series of a metric in a Prometheus text exposition
// whose labels contain every one of labels, by their full series names.
func seriesOf(body []byte, metric string, labels ...string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || (series != metric && !strings.HasPrefix(series, metric+"{")) {
			continue
		}
		if !containsAll(series, labels) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", series, err)
		}
		out[series] += v
	}
	return out, nil
}

// apiCalls counts what the API server has served since it started: the
// requests other than watches by verb, resource and subresource ("POST
// userquestions", "PUT userquestions/status"), and admission webhook calls
// by webhook name.
func (b *bench) apiCalls(ctx context.Context) (map[string]float64, error) {
	resp, err := b.apiServerGet(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	requests, err := seriesOf(body, "apiserver_request_total")
	if err != nil {
		return nil, err
	}
	hooks, err := seriesOf(body, "apiserver_admission_webhook_admission_duration_seconds_count")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for series, v := range requests {
		verb := labelOf(series, "verb")
		if verb == "WATCH" {
			continue
		}
		what := labelOf(series, "resource")
		if sub := labelOf(series, "subresource"); sub != "" {
			what += "/" + sub
		}
		out[verb+" "+what] += v
	}
	for series, v := range hooks {
		out["webhook "+labelOf(series, "name")] += v
	}
	return out, nil
}

// labelOf is the value of one label of a series, or "".
func labelOf(series, label string) string {
	_, rest, ok := strings.Cut(series, `{`+label+`="`)
	if !ok {
		_, rest, ok = strings.Cut(series, `,`+label+`="`)
	}
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// quiet waits until the controller's queue has been empty and its workers
// idle for half a second, so that a workload does not measure the tail of the previous
// one (the clean-up's deletions, say).
func (b *bench) quiet(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	calm := 0
	for calm < 5 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the controller to go quiet: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		depth, err := b.scrape("workqueue_depth", `name="userquestion"`)
		if err != nil {
			return err
		}
		busy, err := b.scrape("controller_runtime_active_workers", `controller="userquestion"`)
		if err != nil {
			return err
		}
		if depth+busy == 0 {
			calm++
		} else {
			calm = 0
		}
	}
	return nil
}
