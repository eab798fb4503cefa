package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/controllers"
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
	install    testenv.Install
	kubeconfig string // the manager's: its shipped ServiceAccount's token
	managerBin string
	pluginBin  string // kubectl-hitl, for the MCP workloads
	adminKube  string // an administrator's kubeconfig, for kubectl-hitl mcp
	manager    *exec.Cmd
	synced     chan time.Time
	metrics    string
	pprof      string
	cfg        *rest.Config // the bench's, an administrator's
	outDir     string       // where profiles are written
	mode       testenv.Admission
	hooks      *webhookConfigs // webhook mode's configurations, as envtest made them
	rbacReady  bool            // the manager's ServiceAccount is authorized
	r          *results
	// floorSeen is the floor of a burst of transitions (status writes and
	// Events by a bare client) until the agents' watch saw them all.
	floorSeen time.Duration
	// spreadLead and spreadP99 are the deadline workload's lead before its
	// first spread deadline and the p99 of their lateness.
	spreadLead, spreadP99 time.Duration
}

// none is the baseline's admission: no policy, no webhook, no manager.
const none testenv.Admission = -1

// modeName names an admission mode in the figures: baseline, policies (the
// default install) or webhooks (webhook mode).
func modeName(m testenv.Admission) string {
	if m == none {
		return "baseline"
	}
	return m.String()
}

func runAll(ctx context.Context, s scale, managerBin, pluginBin, outDir string, only *regexp.Regexp) (*results, error) {
	b := &bench{s: s, managerBin: managerBin, pluginBin: pluginBin, outDir: outDir, mode: none,
		r: &results{Scale: s.Questions, Figures: map[string]float64{}}}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	defer b.stop()
	// The settle workloads run in the default install (admission policies,
	// no webhook) and in webhook mode, the others in the default install.
	steps := []struct {
		name string
		mode testenv.Admission
		run  func(context.Context) error
	}{
		{"baseline", none, b.baseline},
		{"settle throughput, policies", testenv.Policies, b.throughput},
		{"settle throughput, webhooks", testenv.WebhookMode, b.throughput},
		{"settle latency, webhooks", testenv.WebhookMode, b.latency},
		{"settle throughput, baseline again", none, b.baselineAgain},
		{"settle latency, policies", testenv.Policies, b.latency},
		{"mcp ask latency", testenv.Policies, b.mcpLatency},
		{"mcp held calls", testenv.Policies, b.mcpHeld},
		{"deadline precision", testenv.Policies, b.deadlines},
		{"deadline floor", testenv.Policies, b.deadlineFloor},
		{"claims", testenv.Policies, b.claims},
		{"flood", testenv.Policies, b.flood},
		{"memory", testenv.Policies, b.memory},
		{"restart", testenv.Policies, b.restart},
	}
	if s.Questions > 0 {
		// The scale mode runs alone.
		steps = steps[:0]
		steps = append(steps, struct {
			name string
			mode testenv.Admission
			run  func(context.Context) error
		}{"scale", testenv.Policies, b.atScale})
	}
	for i, st := range steps {
		if st.name != "baseline" && !only.MatchString(st.name) {
			continue
		}
		if err := b.use(ctx, st.mode); err != nil {
			return b.r, fmt.Errorf("setting up %s: %w", modeName(st.mode), err)
		}
		fmt.Fprintf(os.Stderr, "bench: %s\n", st.name)
		if err := st.run(ctx); err != nil {
			return b.r, fmt.Errorf("%s: %w", st.name, err)
		}
		// Each workload runs at its own scale: the next one starts from an
		// empty namespace, except the restart, which needs memory's objects.
		if st.mode != none && st.name != "memory" && i < len(steps)-1 {
			if err := b.clean(ctx); err != nil {
				return b.r, fmt.Errorf("cleaning up after %s: %w", st.name, err)
			}
			if err := b.quiet(ctx); err != nil {
				return b.r, fmt.Errorf("after %s: %w", st.name, err)
			}
		}
	}
	b.ratios()
	return b.r, nil
}

// clean deletes every question, reply and claim of the namespace.
// A delete of every object is one request, which the API server may cut
// off while it is busy (a full run's flood left 10,000 questions, and the
// request ended in a stream reset): it is sent again, a few times.
func (b *bench) clean(ctx context.Context) error {
	for _, obj := range []client.Object{&hitlv1.QuestionReply{}, &hitlv1.UserQuestion{}, &coordinationv1.Lease{}} {
		var err error
		for attempt := range 5 {
			if attempt > 0 {
				fmt.Fprintf(os.Stderr, "bench: cleaning up, again: %v\n", err)
				time.Sleep(2 * time.Second)
			}
			if err = b.c.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err == nil {
				break
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// start starts the local control plane with no admission (the baseline
// runs first), keeps webhook mode's configurations for later, and installs
// the manager's shipped RBAC and a kubeconfig with its ServiceAccount's
// token.
func (b *bench) start(ctx context.Context) error {
	// One API server for both modes: the webhook configurations and serving
	// certificates of webhook mode, on an API server that also serves
	// MutatingAdmissionPolicy (which testenv turns off for webhook mode, as
	// on a cluster before 1.36; with no mutating policy installed, its
	// plugin costs next to nothing: the table shows its time).
	hooks, err := testenv.WithWebhooks(testenv.New(), testenv.WebhookMode)
	if err != nil {
		return err
	}
	b.env = testenv.New()
	b.env.WebhookInstallOptions = hooks.WebhookInstallOptions
	args := b.env.ControlPlane.GetAPIServer().Configure()
	if maxInflight > 0 {
		args.Set("max-requests-inflight", strconv.Itoa(maxInflight))
	}
	if maxMutatingInflight > 0 {
		args.Set("max-mutating-requests-inflight", strconv.Itoa(maxMutatingInflight))
	}
	_ = os.Remove(filepath.Join(b.outDir, "manager.log")) // the last run's
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
	if b.hooks, err = b.removeWebhooks(ctx); err != nil {
		return err
	}
	if b.install, err = testenv.DefaultInstall(); err != nil {
		return err
	}
	if err := b.install.InstallManagerRBAC(ctx, b.c); err != nil {
		return err
	}
	saNamespace, saName := b.install.ManagerServiceAccount()
	token, _, err := testenv.RequestToken(ctx, b.c, saNamespace, saName, 3*time.Hour) // longer than the bench's 60 min
	if err != nil {
		return err
	}
	data, err := testenv.TokenKubeconfig(cfg, b.install.ManagerUsername(), token, "")
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
	if b.adminKube != "" {
		_ = os.Remove(b.adminKube)
	}
}

// use sets admission up as mode installs it and runs the manager to match:
// the admission policies of config/default (Policies), or webhook mode's
// validating policies and webhooks, served by a manager started with
// --enable-webhooks (WebhookMode). Between modes, what the next mode adds
// is created before what it drops is deleted, so that a question or reply
// is never admitted unstamped.
func (b *bench) use(ctx context.Context, mode testenv.Admission) error {
	if b.mode == mode && (b.manager != nil || mode == none) {
		return nil
	}
	fmt.Fprintf(os.Stderr, "bench: admission: %s\n", modeName(mode))
	if mode == none {
		return b.useNone(ctx)
	}
	if !b.rbacReady {
		if err := b.waitForManagerRBAC(ctx); err != nil {
			return err
		}
		b.rbacReady = true
	}
	if mode.Webhooks() { // the webhook server first: the mutating webhooks fail closed
		b.stopManager()
		if err := b.startManager(true); err != nil {
			return err
		}
	}
	objs, err := testenv.AdmissionObjects(mode)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := b.c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	if mode == testenv.WebhookMode {
		if err := b.restoreWebhooks(ctx, b.hooks); err != nil {
			return err
		}
	}
	if err := testenv.WaitForPolicies(ctx, b.c, b.install.Namespace, true, 30*time.Second); err != nil {
		return err
	}
	if mode == testenv.WebhookMode {
		all, err := testenv.AdmissionObjects(testenv.Policies)
		if err != nil {
			return err
		}
		for _, o := range all {
			if strings.HasPrefix(o.GetKind(), "Mutating") {
				if err := client.IgnoreNotFound(b.c.Delete(ctx, o)); err != nil {
					return err
				}
			}
		}
	} else if _, err := b.removeWebhooks(ctx); err != nil {
		return err
	}
	// The API server learns of admission configurations from watches.
	time.Sleep(2 * time.Second)
	if !mode.Webhooks() {
		b.stopManager()
		if err := b.startManager(false); err != nil {
			return err
		}
	}
	select {
	case <-b.synced:
	case <-time.After(60 * time.Second):
		return fmt.Errorf("the manager's workers never started")
	}
	b.mode = mode
	return b.quiet(ctx)
}

// useNone takes admission away for the baseline, and stops the manager:
// the validating policies go first (the reply-identity policy would refuse
// a reply that no mutation stamped), the mutating webhooks before the
// server that serves them.
func (b *bench) useNone(ctx context.Context) error {
	all, err := testenv.AdmissionObjects(testenv.Policies)
	if err != nil {
		return err
	}
	for _, mutating := range []bool{false, true} {
		for _, o := range all {
			if o.GetKind() == "ConfigMap" || strings.HasPrefix(o.GetKind(), "Mutating") != mutating {
				continue
			}
			if err := client.IgnoreNotFound(b.c.Delete(ctx, o)); err != nil {
				return err
			}
		}
		if !mutating {
			if _, err := b.removeWebhooks(ctx); err != nil {
				return err
			}
		}
	}
	time.Sleep(2 * time.Second) // the API server learns of it from watches
	b.stopManager()
	b.mode = none
	return nil
}

// waitForManagerRBAC waits until the manager's ServiceAccount may list
// questions: the API server's RBAC authorizer learns of new bindings from
// a watch.
func (b *bench) waitForManagerRBAC(ctx context.Context) error {
	data, err := os.ReadFile(b.kubeconfig)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: hitlv1.GroupVersion.Group, Resource: "userquestions", Verb: "list"},
		}}
		err := c.Create(ctx, review)
		if err == nil && review.Status.Allowed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager's ServiceAccount may not list userquestions after 30s (err %v, reason %q)", err, review.Status.Reason)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startManager runs the manager binary with the flags it ships with, as
// its ServiceAccount, and with webhooks, the webhook server the local
// control plane calls.
func (b *bench) startManager(webhooks bool) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	b.metrics = fmt.Sprintf("127.0.0.1:%d", port)
	if port, err = freePort(); err != nil {
		return err
	}
	b.pprof = fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"--kubeconfig", b.kubeconfig, "--metrics-bind-address", b.metrics,
		"--pprof-bind-address", b.pprof, "--health-probe-bind-address", "0"}
	if webhooks {
		wh := testenv.WebhookOptions(b.env)
		args = append(args, "--enable-webhooks", "--webhook-host", wh.Host, "--webhook-port", strconv.Itoa(wh.Port),
			"--webhook-cert-dir", wh.CertDir)
	}
	b.manager = exec.Command(b.managerBin, args...)
	stderr, err := b.manager.StderrPipe()
	if err != nil {
		return err
	}
	synced := make(chan time.Time, 1)
	b.synced = synced
	if err := os.MkdirAll(b.outDir, 0o755); err != nil {
		return err
	}
	// Its log, of every start in the run, goes next to the results.
	logFile, err := os.OpenFile(filepath.Join(b.outDir, "manager.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if err := b.manager.Start(); err != nil {
		logFile.Close()
		return err
	}
	go func() {
		defer logFile.Close()
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			fmt.Fprintln(logFile, s.Text())
			if strings.Contains(s.Text(), "Starting workers") {
				select {
				case synced <- time.Now():
				default:
				}
			}
		}
	}()
	if !webhooks {
		return nil
	}
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

// blocking is a question as the agent SDK asks it: with the
// hitl.dev/agent label that names its agent.
func blocking(n string) *hitlv1.UserQuestion {
	return builders.Question(n, ns).Agent("bench").Label(hitlv1.AgentLabel, "bench").Ask("q", "Proceed?", "yes", "no").Obj()
}

// answer is a reply to q as kubectl hitl and the answerer SDK write it:
// labelled with its agent and question and owned by the question, with no
// author of its own (admission stamps the requesting user's).
func answer(q *hitlv1.UserQuestion) *hitlv1.QuestionReply {
	r := builders.Reply(q.Name+"-r", ns, q.Name).Select("q", "yes").Obj()
	r.Spec.AnsweredBy = nil
	r.Labels = map[string]string{hitlv1.AgentLabel: q.Spec.Agent, hitlv1.QuestionLabel: q.Name}
	r.Adopt(q)
	return r
}

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

// transitionFloor times what a burst of deadlines costs the API server
// alone: a bare client writing the Continued status of SharedDeadline Open
// questions, and then, for as many others, the status and an Event each
// (what the controller writes per transition). It does so twice: with as
// many writers as the manager has workers, and with as many as the
// manager closes windows at once (controllers.MaxClosesInFlight); the
// faster is the floor. The statuses are the ones the controller writes
// (its Decide, the same pure function, makes them), so each write costs
// the API server what the controller's does: the same fields to decode,
// validate and store. No controller can flip a burst faster than this.
// Each burst is timed twice: until the last write returned, and until the
// agents' watch saw the last status, as the shared deadlines and the
// restart are timed; the targets compare with the latter.
func (b *bench) transitionFloor(ctx context.Context) error {
	n := b.s.SharedDeadline
	writers := []int{manager.DefaultConfig().Workers, controllers.MaxClosesInFlight}
	qs := make([]*hitlv1.UserQuestion, 2*n*len(writers))
	if _, err := parallel(ctx, len(qs), 32, func(ctx context.Context, i int) error {
		qs[i] = timed(name("floor"), time.Hour)
		if err := b.c.Create(ctx, qs[i]); err != nil {
			return err
		}
		return writeDecided(ctx, b.c, qs[i], qs[i].CreationTimestamp.Time, hitlv1.StateOpen)
	}); err != nil {
		return err
	}
	b.floorSeen = 0
	for k, w := range writers {
		for e, withEvents := range []bool{false, true} {
			burst := qs[(2*k+e)*n : (2*k+e+1)*n]
			seen, err := b.floorBurst(ctx, burst, w, withEvents)
			if err != nil {
				return err
			}
			if withEvents && (b.floorSeen == 0 || seen < b.floorSeen) {
				b.floorSeen = seen // what the targets compare with
			}
		}
	}
	b.r.set(fmt.Sprintf("floor: %d status writes + %d events by a bare client, seen, the faster, ms", n, n), ms(b.floorSeen))
	return nil
}

// floorBurst writes, as a bare client with writers at once, the Continued
// status of each question of burst (and its Event with withEvents), and
// returns how long until the agents' watch saw the last.
func (b *bench) floorBurst(ctx context.Context, burst []*hitlv1.UserQuestion, writers int, withEvents bool) (time.Duration, error) {
	start := time.Now()
	took, err := parallel(ctx, len(burst), writers, func(ctx context.Context, i int) error {
		q := burst[i]
		deadline, _ := q.Deadline()
		if err := writeDecided(ctx, b.c, q, deadline, hitlv1.StateContinued); err != nil {
			return err
		}
		if !withEvents {
			return nil
		}
		return b.c.Create(ctx, continuedEvent(q, time.Now()))
	})
	if err != nil {
		return 0, err
	}
	var last time.Time
	for _, q := range burst {
		at, err := b.obs.wait(ctx, q.Name, hitlv1.StateContinued)
		if err != nil {
			return 0, err
		}
		if at.After(last) {
			last = at
		}
	}
	n := len(burst)
	label := fmt.Sprintf("floor: %d status writes by a bare client", n)
	if withEvents {
		label = fmt.Sprintf("floor: %d status writes + %d events by a bare client", n, n)
	}
	if writers != manager.DefaultConfig().Workers {
		label += fmt.Sprintf(", %d writers", writers)
	}
	b.r.set(label+", ms", ms(took))
	b.r.set(label+", seen, ms", ms(last.Sub(start)))
	return last.Sub(start), nil
}

// writeDecided writes, as a bare client, the status the controller decides
// for q at now (its Decide, with no replies and no claims), which must put
// it in the state want.
func writeDecided(ctx context.Context, c client.Client, q *hitlv1.UserQuestion, now time.Time, want hitlv1.QuestionState) error {
	d := controllers.Decide(controllers.Inputs{Question: q, Now: now})
	if d.Status.State != want {
		return fmt.Errorf("question %s at %s: the controller would write %q, not %q", q.Name, now, d.Status.State, want)
	}
	q.Status = d.Status
	return c.Status().Update(ctx, q)
}

// floorTarget is the most a burst of transitions may take: 1.2 times the
// floor measured in the same run (its status writes and Events, as the
// agents' watch saw them). The baseline, which measures the floor, always
// runs.
const floorTarget = 1.2

// checkBurst records how a burst of n transitions that took took compares
// with the floor of as many (the floor's burst, scaled to n when their
// counts differ), and checks it against floorTarget.
func (b *bench) checkBurst(name string, n int, took time.Duration) {
	floor := b.floorSeen * time.Duration(n) / time.Duration(b.s.SharedDeadline)
	ratio := took.Seconds() / floor.Seconds()
	b.r.set(name+" / floor", ratio)
	b.r.check(name, fmt.Sprintf("<= %.1f x floor", floorTarget),
		fmt.Sprintf("%.2f x (%s/%s)", ratio, took.Round(time.Millisecond), floor.Round(time.Millisecond)), ratio <= floorTarget)
}

// continuedEvent is the Event a bare client writes for q's window closing
// at now, as the controller writes one.
func continuedEvent(q *hitlv1.UserQuestion, now time.Time) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", q.Name, now.UnixNano()), Namespace: q.Namespace},
		EventTime:  metav1.NewMicroTime(now), ReportingController: "bench", ReportingInstance: "bench",
		Action: "Continue", Reason: "Continued", Type: corev1.EventTypeNormal, Note: "floor",
		Regarding: corev1.ObjectReference{Kind: "UserQuestion", APIVersion: hitlv1.GroupVersion.String(), Namespace: q.Namespace, Name: q.Name, UID: q.UID},
	}
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
		if err := b.c.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for i := range h.validating {
		w := h.validating[i].DeepCopy()
		w.ResourceVersion, w.UID = "", ""
		if err := b.c.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

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
// mode.
func (b *bench) throughput(ctx context.Context) error {
	mode := modeName(b.mode)
	for _, conc := range []int{1, 32} {
		var wait func()
		calls, err := b.apiCalls(ctx)
		if err != nil {
			return err
		}
		if conc > 1 {
			profile := "settle" // the default install's; webhook mode's is settle-webhooks
			if b.mode != testenv.Policies {
				profile += "-" + mode
			}
			wait = b.profileCPU(ctx, time.Now().Add(time.Second), b.askProfile(), profile)
		}
		cpu, err := b.cpuTimes()
		if err != nil {
			return err
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
			if err := b.cpuPerAsk(cpu, b.mode); err != nil {
				return err
			}
			wait()
			if err := b.callsPerAsk(ctx, calls, b.mode); err != nil {
				return err
			}
		} else {
			if err := b.othersAt1(cpu, b.mode); err != nil {
				return err
			}
			if err := b.logCalls(ctx, calls, b.mode, conc); err != nil {
				return err
			}
		}
		b.r.setMode(fmt.Sprintf("asks/s, concurrency %d", conc), b.mode, float64(b.s.Asks)/took.Seconds())
	}
	return nil // ratios compares them with the baseline
}

// callsPerAsk reports the API writes, access reviews and admission webhook
// calls the asks of the last run at concurrency 32 cost since before, per
// ask, once the controller and its Event writer are done with them.
func (b *bench) callsPerAsk(ctx context.Context, before map[string]float64, mode testenv.Admission) error {
	if b.manager != nil {
		if err := b.quiet(ctx); err != nil {
			return err
		}
		time.Sleep(3 * time.Second) // Events may wait up to 2 s behind status writes
	}
	after, err := b.apiCalls(ctx)
	if err != nil {
		return err
	}
	c := breakdown(before, after, b.s.Asks, modeName(mode)+", concurrency 32")
	b.r.setMode("API writes per ask, concurrency 32", mode, c.writes)
	b.r.setMode("SubjectAccessReviews per ask", mode, c.reviews)
	b.r.setMode("admission webhook calls per ask", mode, c.hooks)
	b.r.setMode("API server ms per ask in hitl's admission", mode, c.admissionMS)
	if mode == testenv.Policies {
		b.r.check("admission webhook calls per ask", "0", fmt.Sprintf("%.2f", c.hooks), c.hooks == 0)
	}
	return nil
}

// othersAt1 records how many cores other processes used since before, while
// asks were made one at a time.
func (b *bench) othersAt1(before map[string]time.Duration, mode testenv.Admission) error {
	after, err := b.cpuTimes()
	if err != nil {
		return err
	}
	b.r.setMode("cores used by other processes, concurrency 1", mode, othersCores(before, after))
	return nil
}

// logCalls prints what the asks cost the API server since before, per ask,
// without recording figures: the requests of asks made one at a time, each
// request's duration not inflated by queueing.
func (b *bench) logCalls(ctx context.Context, before map[string]float64, mode testenv.Admission, conc int) error {
	if err := b.quiet(ctx); err != nil {
		return err
	}
	after, err := b.apiCalls(ctx)
	if err != nil {
		return err
	}
	breakdown(before, after, b.s.Asks, fmt.Sprintf("%s, concurrency %d", modeName(mode), conc))
	return nil
}

// callCounts are the requests of a number of asks, per ask.
type callCounts struct {
	writes, reviews, hooks, admissionMS float64
}

// breakdown prints, per ask of n, what the API server served between two
// apiCalls readings (each kind of request, with its mean duration in the
// API server, and the time in hitl's admission), and returns the totals.
func breakdown(before, after map[string]float64, asks int, label string) callCounts {
	keys := make([]string, 0, len(after))
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var c callCounts
	for _, k := range keys {
		delta := after[k] - before[k]
		per := delta / float64(asks)
		verb, _, _ := strings.Cut(k, " ")
		if strings.HasPrefix(verb, "le=") {
			continue // with its count
		}
		switch verb {
		case "seconds":
			continue // with its count
		case "admission", "policy":
			if verb == "admission" {
				c.admissionMS += per * 1000
			}
			if delta > 0 {
				fmt.Fprintf(os.Stderr, "bench: per ask, %s: %-52s %6.2f ms\n", label, k, per*1000)
			}
			continue
		}
		if per < 0.005 {
			continue
		}
		each := ""
		if verb != "webhook" && verb != "conflicts" {
			each = fmt.Sprintf(" (%.1f ms each in the API server", (after["seconds "+k]-before["seconds "+k])/delta*1000)
			if bound := p99(before, after, k); bound > 0 {
				each += fmt.Sprintf(", p99 <= %.0f ms", bound*1000)
			}
			each += ")"
		}
		fmt.Fprintf(os.Stderr, "bench: per ask, %s: %-52s %6.2f%s\n", label, k, per, each)
		switch {
		case verb == "webhook":
			c.hooks += per
		case verb == "conflicts":
		case strings.HasSuffix(k, "accessreviews") || strings.HasSuffix(k, "tokenreviews"):
			c.reviews += per // not stored: the authorizer's answer
		case verb == "POST" || verb == "PUT" || verb == "PATCH" || verb == "APPLY" || verb == "DELETE" || verb == "DELETECOLLECTION":
			c.writes += per
		}
	}
	return c
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

func timed(n string, timeout time.Duration) *hitlv1.UserQuestion {
	return builders.Question(n, ns).Agent("bench").Label(hitlv1.AgentLabel, "bench").Ask("q", "Proceed?", "yes", "no").Timeout(timeout).Obj()
}

func (b *bench) deadlines(ctx context.Context) error {
	lead, err := b.calibrate(ctx, b.s.SpreadDeadline+b.s.SharedDeadline)
	if err != nil {
		return err
	}
	b.r.set("deadline questions asked ahead of the first deadline, s", lead.Seconds())
	b.spreadLead = lead
	spread, start, err := b.askSpread(ctx, b.s.SpreadDeadline, b.s.SpreadWindow, lead, func(i int, timeout time.Duration) *hitlv1.UserQuestion {
		return timed(fmt.Sprintf("spread-%d", i), timeout)
	})
	if err != nil {
		return err
	}
	// Shared: the same deadline, aimed at one whole second.
	target := start.Add(b.s.SpreadWindow + 5*time.Second).Truncate(time.Second)
	shared := make([]string, b.s.SharedDeadline)
	_, err = parallel(ctx, b.s.SharedDeadline, 16, func(ctx context.Context, i int) error {
		var err error
		shared[i], err = b.askAt(ctx, fmt.Sprintf("shared-%d", i), target)
		return err
	})
	if err != nil {
		return err
	}
	defer b.profileCPU(ctx, target, 5, "shared-deadline")()
	caughtUp, err := waitOpen(ctx, b.obs, append(spread, shared...))
	if err != nil {
		return err
	}
	b.r.set("deadline: every Open status written, s before the first deadline", start.Sub(caughtUp).Seconds())
	explain, err := b.explainTransitions(ctx)
	if err != nil {
		return err
	}
	defer explain("deadlines", len(spread)+len(shared))
	wait, cancel := context.WithTimeout(ctx, time.Until(target)+30*time.Second)
	defer cancel()
	for _, set := range []struct {
		label string
		names []string
	}{{"spread", spread}, {"shared", shared}} {
		late, early, lastFlip, err := lateness(wait, b.obs, set.names)
		if err != nil {
			return err
		}
		if set.label == "spread" {
			b.logSlices("spread", late)
		}
		p50, p99, worst := percentiles(late)
		label := fmt.Sprintf("deadline lateness ms, %d %s", len(set.names), set.label)
		b.r.set(label+" p50", ms(p50))
		b.r.set(label+" p99", ms(p99))
		b.r.set(label+" max", ms(worst))
		b.r.set(fmt.Sprintf("early transitions, %s", set.label), float64(early))
		b.r.check("no early transition, "+set.label, "0", strconv.Itoa(early), early == 0)
		if set.label == "spread" {
			b.spreadP99 = p99
			b.checkLateness("", p99, worst)
		} else {
			all := lastFlip.Sub(target)
			b.r.set("shared deadline: last flip after the deadline, ms", ms(all))
			b.checkBurst(fmt.Sprintf("%d shared deadlines flipped", len(set.names)), len(set.names), all)
		}
	}
	return nil
}

// deadlineFloor is the floor of the deadline workload's spread deadlines,
// measured in the same run right after it: as many windows, spread over
// the same time from the same lead, in the same namespace, each closed at
// its deadline by a bare client with the manager stopped. The bare client
// writes the status alone: in one namespace the manager folds all but 60
// of a minute's Continued Events into summaries.
func (b *bench) deadlineFloor(ctx context.Context) error {
	lead := b.spreadLead
	if lead == 0 { // run without the deadline workload
		var err error
		if lead, err = b.calibrate(ctx, b.s.SpreadDeadline); err != nil {
			return err
		}
	}
	p99, err := b.spreadFloor(ctx, b.s.SpreadDeadline, lead, func(int) string { return ns }, "deadline floor: ", false)
	if err != nil {
		return err
	}
	if b.spreadP99 > 0 && p99 > 0 {
		b.r.set("deadline lateness p99, spread / floor", b.spreadP99.Seconds()/p99.Seconds())
	}
	return nil
}

// askAt asks a timed question whose window closes at deadline, a whole
// second. The window starts at the question's creationTimestamp, which
// the API server sets to the second by its clock: a create sent just
// before a second ends may be stamped with the next one, and its deadline
// would be a second late. Such a question is deleted and asked again under
// another name; askAt returns the name of the one that stands.
func (b *bench) askAt(ctx context.Context, name string, deadline time.Time) (string, error) {
	for attempt := 0; ; attempt++ {
		n := name
		if attempt > 0 {
			n = fmt.Sprintf("%s-%d", name, attempt)
		}
		timeout := deadline.Sub(time.Now().Truncate(time.Second))
		q := timed(n, timeout)
		if err := b.c.Create(ctx, q); err != nil {
			return "", err
		}
		if q.CreationTimestamp.Add(timeout).Equal(deadline) {
			return n, nil
		}
		if attempt == 3 {
			return "", fmt.Errorf("question %s: created at %s, its window would not close at %s", n, q.CreationTimestamp.Time, deadline)
		}
		if err := b.c.Delete(ctx, q); err != nil {
			return "", err
		}
	}
}

// checkLateness checks the spread deadlines' lateness against the targets;
// what names the run ("" for the deadline workload's own).
func (b *bench) checkLateness(what string, p99, worst time.Duration) {
	if what != "" {
		what = ", " + what
	}
	b.r.check("deadline lateness p99"+what, "<= 200ms", p99.Round(time.Millisecond).String(), p99 <= 200*time.Millisecond)
	b.r.check("deadline lateness max"+what, "<= 1s", worst.Round(time.Millisecond).String(), worst <= time.Second)
}

// calibrate times a batch of questions from their creation until the
// controller has written every Open status, and returns how far ahead of
// the first deadline n timed questions should be asked: the deadlines must
// all lie after the questions are asked and their Open status written, so
// that what is measured is the controller's timing, not the API server's
// write rate while it takes in a burst of new questions.
func (b *bench) calibrate(ctx context.Context, n int) (time.Duration, error) {
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
		return 0, err
	}
	perQuestion := time.Since(start) / time.Duration(calibration)
	return 3*time.Second + perQuestion*time.Duration(n)*2, nil
}

// askSpread asks n timed questions, made by question from their index and
// timeout, whose deadlines are spread evenly over window from lead on, and
// returns their names and the first deadline.
func (b *bench) askSpread(ctx context.Context, n int, window, lead time.Duration, question func(i int, timeout time.Duration) *hitlv1.UserQuestion) ([]string, time.Time, error) {
	start := time.Now().Add(lead)
	names := make([]string, n)
	_, err := parallel(ctx, n, 16, func(ctx context.Context, i int) error {
		offset := time.Duration(int64(window) * int64(i) / int64(n))
		created := time.Now().Truncate(time.Second) // the API server's creationTimestamp, to the second
		q := question(i, start.Add(offset).Sub(created).Truncate(time.Millisecond))
		names[i] = q.Name
		return b.c.Create(ctx, q)
	})
	return names, start, err
}

// waitOpen waits until obs has seen every question Open, and returns when
// the last one was.
func waitOpen(ctx context.Context, obs *observer, names []string) (time.Time, error) {
	var caughtUp time.Time
	for _, n := range names {
		at, err := obs.wait(ctx, n, hitlv1.StateOpen)
		if err != nil {
			return caughtUp, err
		}
		if at.After(caughtUp) {
			caughtUp = at
		}
	}
	return caughtUp, nil
}

// lateness waits until obs has seen every question Continued and returns,
// in the order of names, how long after its deadline each one was, how
// many were early, and when the last one was seen.
func lateness(ctx context.Context, obs *observer, names []string) (late []time.Duration, early int, lastFlip time.Time, err error) {
	late, early, lastFlip, open := latenessWhile(ctx, obs, names)
	if len(open) > 0 {
		return nil, 0, lastFlip, fmt.Errorf("question %s never became Continued: %w", open[0], ctx.Err())
	}
	return late, early, lastFlip, nil
}

// latenessWhile is lateness, waiting only while ctx lasts: a question not
// seen Continued by then counts as late by the time from its deadline to
// the end of the wait (less than it will be), and open names them.
func latenessWhile(ctx context.Context, obs *observer, names []string) (late []time.Duration, early int, lastFlip time.Time, open []string) {
	for _, n := range names {
		_, _ = obs.wait(ctx, n, hitlv1.StateContinued)
		at, deadline, ok := obs.seenAt(n, hitlv1.StateContinued)
		if !ok {
			open = append(open, n)
			late = append(late, time.Since(deadline))
			continue
		}
		if at.Before(deadline) {
			early++
		}
		late = append(late, at.Sub(deadline))
		if at.After(lastFlip) {
			lastFlip = at
		}
	}
	return late, early, lastFlip, open
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
		return b.c.Create(ctx, answer(q))
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
	rss, heap, err := b.managerMemory()
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

// logSlices prints the lateness of the spread deadlines by tenths of
// their window, in deadline order, to show when the late ones fell due.
func (b *bench) logSlices(what string, late []time.Duration) {
	n := len(late)
	var parts []string
	for i := range 10 {
		slice := append([]time.Duration(nil), late[i*n/10:(i+1)*n/10]...)
		_, p99, worst := percentiles(slice)
		parts = append(parts, fmt.Sprintf("%.0f/%.0f", ms(p99), ms(worst)))
	}
	fmt.Fprintf(os.Stderr, "bench: %s lateness p99/max ms by tenth of the window: %s\n", what, strings.Join(parts, " "))
}

// managerMemory reads the manager's resident memory (from /proc) and its
// Go heap in use (from its metrics), in bytes.
func (b *bench) managerMemory() (rss int64, heap float64, err error) {
	if rss, err = rssBytes(b.manager.Process.Pid); err != nil {
		return 0, 0, err
	}
	heap, err = b.scrape("go_memstats_heap_inuse_bytes")
	return rss, heap, err
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

// profileCPU takes CPU profiles, of seconds from at on, of the manager (when
// it runs) and the API server, as manager-cpu-<what>.pprof and
// apiserver-cpu-<what>.pprof; the function it returns waits for them.
func (b *bench) profileCPU(ctx context.Context, at time.Time, seconds int, what string) (wait func()) {
	profile := fmt.Sprintf("profile?seconds=%d", seconds)
	done := make(chan error, 2)
	n := 1
	if b.manager != nil {
		n++
		go func() {
			time.Sleep(time.Until(at))
			done <- b.saveProfile(profile, "manager-cpu-"+what+".pprof")
		}()
	}
	go func() {
		time.Sleep(time.Until(at))
		done <- b.saveAPIServerProfile(ctx, profile, "apiserver-cpu-"+what+".pprof")
	}()
	return func() {
		for range n {
			if err := <-done; err != nil {
				fmt.Fprintf(os.Stderr, "bench: profiling %s: %v\n", what, err)
			}
		}
	}
}

// askProfile is how long the settle and baseline profiles at concurrency
// 32 last, from a second after the first ask: within the asks at either
// scale (300 asks take 4 s or more here).
func (b *bench) askProfile() int {
	if b.s.Asks < 1000 {
		return 3
	}
	return 5
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

// errNoMetric is scrape's error for a metric with no series (yet).
var errNoMetric = errors.New("metric not found")

// scrape reads a metric of the manager: the sum of its series whose labels
// contain every one of labels.
func (b *bench) scrape(metric string, labels ...string) (float64, error) {
	body, err := b.managerMetrics()
	if err != nil {
		return 0, err
	}
	series, err := seriesOf(body, metric, labels...)
	if err != nil {
		return 0, err
	}
	if len(series) == 0 {
		return 0, fmt.Errorf("%w: %s", errNoMetric, metric)
	}
	sum := 0.0
	for _, v := range series {
		sum += v
	}
	return sum, nil
}

// managerMetrics reads the manager's metrics endpoint.
func (b *bench) managerMetrics() ([]byte, error) {
	resp, err := http.Get("http://" + b.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// managerCounters are the manager's figures that say where a burst of
// transitions goes: its work queue (time waiting in it, time in
// Reconcile), its closes (off the workers), its writes' conflicts, its reads of the claims, its Events.
var managerCounters = []string{
	"workqueue_queue_duration_seconds_sum", "workqueue_queue_duration_seconds_count",
	"workqueue_work_duration_seconds_sum", "workqueue_work_duration_seconds_count",
	"hitl_status_conflicts_total", "hitl_claim_reads_total", "hitl_events_total",
	"hitl_close_duration_seconds_sum", "hitl_close_duration_seconds_count",
}

// explainTransitions reads the API server's request counts and the
// manager's counters now, and returns a func that prints, per transition,
// what happened since: every kind of API request with its mean time in the
// API server, the mean wait in the work queue and time in Reconcile, the
// conflicts, the reads of the claims sent and shared, and the Events
// written, folded and dropped.
func (b *bench) explainTransitions(ctx context.Context) (func(what string, transitions int), error) {
	calls, err := b.apiCalls(ctx)
	if err != nil {
		return nil, err
	}
	counters, err := b.managerSeries()
	if err != nil {
		return nil, err
	}
	return func(what string, n int) {
		after, err := b.apiCalls(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: reading the API server's metrics: %v\n", what, err)
			return
		}
		breakdown(calls, after, n, what+", per transition")
		now, err := b.managerSeries()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: reading the manager's metrics: %v\n", what, err)
			return
		}
		delta := func(series string) float64 { return now[series] - counters[series] }
		mean := func(metric string) float64 {
			var sum, count float64
			for series := range now {
				if strings.HasPrefix(series, metric+"_sum") {
					sum += delta(series)
				} else if strings.HasPrefix(series, metric+"_count") {
					count += delta(series)
				}
			}
			if count == 0 {
				return 0
			}
			return sum / count * 1000
		}
		fmt.Fprintf(os.Stderr, "bench: %s, manager: mean wait in the work queue %.1f ms, mean Reconcile %.1f ms, mean close (off the workers) %.1f ms\n", what,
			mean("workqueue_queue_duration_seconds"), mean("workqueue_work_duration_seconds"), mean("hitl_close_duration_seconds"))
		keys := make([]string, 0, len(now))
		for series := range now {
			if strings.HasPrefix(series, "hitl_") {
				keys = append(keys, series)
			}
		}
		sort.Strings(keys)
		for _, series := range keys {
			if d := delta(series); d != 0 {
				fmt.Fprintf(os.Stderr, "bench: %s, manager: %-60s %8.0f (%.3f per transition)\n", what, series, d, d/float64(n))
			}
		}
	}, nil
}

// managerSeries reads the manager's managerCounters, by series: none
// while it is stopped (it starts them from zero).
func (b *bench) managerSeries() (map[string]float64, error) {
	if b.manager == nil {
		return map[string]float64{}, nil
	}
	body, err := b.managerMetrics()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, metric := range managerCounters {
		var labels []string
		if strings.HasPrefix(metric, "workqueue_") {
			labels = []string{`name="userquestion"`}
		}
		series, err := seriesOf(body, metric, labels...)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, series)
	}
	return out, nil
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

// admissionPlugins are the API server's admission plugins that run hitl's
// policies and call its webhooks.
var admissionPlugins = []string{"MutatingAdmissionPolicy", "ValidatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"}

// apiServerMetrics reads the API server's /metrics.
func (b *bench) apiServerMetrics(ctx context.Context) ([]byte, error) {
	resp, err := b.apiServerGet(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// apiCalls counts what the API server has served since it started: the
// requests other than watches by verb, resource and subresource ("POST
// userquestions", "PUT userquestions/status") and the seconds they took
// ("seconds POST userquestions") and how many of them conflicted
// ("conflicts PUT userquestions/status"), admission webhook calls by webhook name
// ("webhook mquestionreply.hitl.dev"), and the seconds spent in the
// admission plugins that run hitl's policies and webhooks ("admission
// MutatingAdmissionPolicy") and in each policy ("policy
// hitl-reply-identity").
func (b *bench) apiCalls(ctx context.Context) (map[string]float64, error) {
	body, err := b.apiServerMetrics(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	request := func(series string) (string, bool) {
		verb := labelOf(series, "verb")
		if verb == "WATCH" || verb == "CONNECT" || labelOf(series, "dry_run") != "" {
			return "", false
		}
		what := labelOf(series, "resource")
		if sub := labelOf(series, "subresource"); sub != "" {
			what += "/" + sub
		}
		return verb + " " + what, true
	}
	requests, err := seriesOf(body, "apiserver_request_total")
	if err != nil {
		return nil, err
	}
	for series, v := range requests {
		if k, ok := request(series); ok {
			out[k] += v
			if labelOf(series, "code") == "409" {
				out["conflicts "+k] += v
			}
		}
	}
	took, err := seriesOf(body, "apiserver_request_duration_seconds_sum")
	if err != nil {
		return nil, err
	}
	for series, v := range took {
		if k, ok := request(series); ok {
			out["seconds "+k] += v
		}
	}
	buckets, err := seriesOf(body, "apiserver_request_duration_seconds_bucket")
	if err != nil {
		return nil, err
	}
	for series, v := range buckets {
		if k, ok := request(series); ok && labelOf(series, "le") != "+Inf" {
			out["le="+labelOf(series, "le")+" "+k] += v
		}
	}
	hooks, err := seriesOf(body, "apiserver_admission_webhook_admission_duration_seconds_count")
	if err != nil {
		return nil, err
	}
	for series, v := range hooks {
		out["webhook "+labelOf(series, "name")] += v
	}
	for _, kind := range []string{"mutating", "validating"} {
		checks, err := seriesOf(body, "apiserver_"+kind+"_admission_policy_check_duration_seconds_sum")
		if err != nil {
			return nil, err
		}
		for series, v := range checks {
			out["policy "+labelOf(series, "policy")] += v
		}
	}
	plugins, err := seriesOf(body, "apiserver_admission_controller_admission_duration_seconds_sum")
	if err != nil {
		return nil, err
	}
	for series, v := range plugins {
		if name := labelOf(series, "name"); slices.Contains(admissionPlugins, name) {
			out["admission "+name] += v
		}
	}
	return out, nil
}

// p99 is the upper bound of the histogram bucket that holds the 99th
// percentile of the requests what (their count) observed between two
// readings of its cumulative buckets (le=<bound> <what>); 0 when none or
// when it lies above the last bound.
func p99(before, after map[string]float64, what string) (bound float64) {
	type bucket struct{ le, count float64 }
	var bs []bucket
	for k, v := range after {
		le, rest, ok := strings.Cut(strings.TrimPrefix(k, "le="), " ")
		if !ok || !strings.HasPrefix(k, "le=") || rest != what {
			continue
		}
		f, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{f, v - before[k]})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	n := after[what] - before[what]
	for _, b := range bs {
		if n > 0 && b.count >= 0.99*n {
			return b.le
		}
	}
	return 0
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
	_, err := b.quietFor(ctx, 2*time.Minute, 100*time.Millisecond, 5)
	return err
}

// quietFor is quiet, waiting at most d, reading the manager's metrics
// every interval until calm readings in a row find it idle; it returns the
// time of the first of them, when the controller was seen idle. A reading
// costs the manager little at any size: every figure it serves is kept as
// it goes.
func (b *bench) quietFor(ctx context.Context, d, every time.Duration, calmReadings int) (idleSince time.Time, err error) {
	if b.manager == nil {
		return time.Now(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	calm := 0
	for calm < calmReadings {
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for the controller to go quiet: %w", ctx.Err())
		case <-time.After(every):
		}
		read := time.Now()
		body, err := b.managerMetrics()
		if err != nil {
			return time.Time{}, err
		}
		// The priority queue exports a depth series per priority once an
		// item of that priority has been queued: none yet is depth 0.
		depth, err := seriesOf(body, "workqueue_depth", `name="userquestion"`)
		if err != nil {
			return time.Time{}, err
		}
		busy, err := seriesOf(body, "controller_runtime_active_workers", `controller="userquestion"`)
		if err != nil {
			return time.Time{}, err
		}
		n := 0.0
		for _, v := range depth {
			n += v
		}
		for _, v := range busy {
			n += v
		}
		if n == 0 {
			if calm == 0 {
				idleSince = read
			}
			calm++
		} else {
			calm = 0
		}
	}
	return idleSince, nil
}
