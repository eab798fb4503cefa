// The flood workload: deadlines while other clients flood the API server
// (run in a process of their own, --flood), with and without hitl's
// FlowSchema, against a bare client's floor under the same flood.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/testenv"
)

// floodNamespace holds the flooding clients' ServiceAccounts and the
// ConfigMaps they write.
const floodNamespace = "flood"

// flooder is other load on the API server: clients, each a ServiceAccount
// of its own with RBAC to write ConfigMaps (a normal identity, which API
// Priority and Fairness puts in the built-in workload-low priority level
// with every other ServiceAccount, hitl's manager among them when the
// hitl-manager FlowSchema is not installed), each writing on many
// goroutines as fast as the API server takes it. The flood runs in a
// process of its own (the bench's binary, run with --flood): in the
// bench's process its hundreds of goroutines would take the CPU from the
// agents' watch that times every transition, and from the floor's bare
// client.
type flooder struct {
	// spec is the file the flooding process reads: floodSpec as JSON.
	spec string
}

// floodSpec is what the flooding process is given.
type floodSpec struct {
	// Kubeconfigs are the clients' kubeconfigs, each with its
	// ServiceAccount's token.
	Kubeconfigs [][]byte `json:"kubeconfigs"`
	Workers     int      `json:"workers"`
}

// floodCount is what the flooding process reports when it stops.
type floodCount struct {
	Writes  int64   `json:"writes"`
	Errors  int64   `json:"errors"`
	Seconds float64 `json:"seconds"`
}

// newFlooder creates the flooding clients' ServiceAccounts, their Role and
// bindings, and a kubeconfig for each with its token, and writes them to a
// spec in dir for the flooding process.
func (b *bench) newFlooder(ctx context.Context, clients, workers int, dir string) (*flooder, error) {
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floodNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "flood", Namespace: floodNamespace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update", "patch", "delete"}}}}
	if err := b.c.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	spec := floodSpec{Workers: workers}
	for i := range clients {
		sa := fmt.Sprintf("flood-%d", i)
		if err := b.c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: floodNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: floodNamespace},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "flood"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: floodNamespace}}}
		if err := b.c.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		token, _, err := testenv.RequestToken(ctx, b.c, floodNamespace, sa, 3*time.Hour)
		if err != nil {
			return nil, err
		}
		data, err := testenv.TokenKubeconfig(b.cfg, "system:serviceaccount:"+floodNamespace+":"+sa, token, "")
		if err != nil {
			return nil, err
		}
		c, err := floodClient(data)
		if err != nil {
			return nil, err
		}
		// The RBAC authorizer learns of the binding from a watch.
		if err := waitAllowed(ctx, c); err != nil {
			return nil, fmt.Errorf("flooding client %s: %w", sa, err)
		}
		spec.Kubeconfigs = append(spec.Kubeconfigs, data)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	f := &flooder{spec: filepath.Join(dir, "flood-spec.json")}
	return f, os.WriteFile(f.spec, data, 0o600)
}

// floodClient is a client from a kubeconfig with no client-side rate
// limit.
func floodClient(kubeconfig []byte) (client.Client, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	return client.New(cfg, client.Options{Scheme: testenv.Scheme()})
}

// waitAllowed waits until c may patch ConfigMaps in the flood's namespace.
func waitAllowed(ctx context.Context, c client.Client) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: floodNamespace, Resource: "configmaps", Verb: "patch"},
		}}
		err := c.Create(ctx, review)
		if err == nil && review.Status.Allowed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("may not patch configmaps after 30s (err %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// start starts the flooding process and returns a function that stops it
// and returns the writes per second the API server took and the writes it
// refused or failed.
func (f *flooder) start(ctx context.Context) (stop func() (perSecond float64, failed int64, err error), err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "--flood", f.spec)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the bench
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the flood: %w", err)
	}
	return func() (float64, int64, error) {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			return 0, 0, fmt.Errorf("the flood: %w", err)
		}
		var n floodCount
		if err := json.Unmarshal(out.Bytes(), &n); err != nil {
			return 0, 0, fmt.Errorf("the flood's count %q: %w", out.String(), err)
		}
		return float64(n.Writes) / n.Seconds, n.Errors, nil
	}, nil
}

// floodMain is the flooding process: every client of the spec patches its
// own ConfigMaps on the spec's goroutines until SIGTERM, then it prints
// its floodCount.
func floodMain(specPath string) error {
	data, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var spec floodSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return err
	}
	ctx := context.Background()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, os.Interrupt)
	// Stopped by a flag, not by cancelling a context: the writes in flight
	// end as they would.
	var stopped atomic.Bool
	var writes, errs atomic.Int64
	began := time.Now()
	var wg sync.WaitGroup
	payload := strings.Repeat("x", 512)
	for ci, kubeconfig := range spec.Kubeconfigs {
		c, err := floodClient(kubeconfig)
		if err != nil {
			return err
		}
		for w := range spec.Workers {
			wg.Go(func() {
				// Each goroutine writes its own ConfigMap: no conflicts, and
				// etcd holds one object per goroutine, not one per write.
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("flood-%d-%d", ci, w), Namespace: floodNamespace}}
				if err := c.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
					errs.Add(1)
				}
				for n := 0; !stopped.Load(); n++ {
					patch := fmt.Appendf(nil, `{"data":{"n":"%d","payload":%q}}`, n, payload)
					if err := c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch)); err != nil {
						errs.Add(1)
						continue
					}
					writes.Add(1)
				}
			})
		}
	}
	<-term
	elapsed := time.Since(began)
	n := writes.Load()
	stopped.Store(true)
	wg.Wait()
	return json.NewEncoder(os.Stdout).Encode(floodCount{Writes: n, Errors: errs.Load(), Seconds: elapsed.Seconds()})
}

// apfObjects are the FlowSchema and PriorityLevelConfiguration of
// config/default, rendered as it installs them.
func apfObjects() ([]*unstructured.Unstructured, error) {
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(testenv.Root(), "config", "default"))
	if err != nil {
		return nil, fmt.Errorf("rendering config/default: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		if k := r.GetKind(); k != "FlowSchema" && k != "PriorityLevelConfiguration" {
			continue
		}
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	if len(objs) != 2 {
		return nil, fmt.Errorf("config/default has %d FlowSchemas and PriorityLevelConfigurations, want one of each", len(objs))
	}
	return objs, nil
}

// apf reads the API server's API Priority and Fairness metrics, keyed
// "<what> <priority level>/<flow schema>": dispatched requests, rejected
// requests, and the seconds and count of their waits in queues; and
// "seats <priority level>", the level's nominal seats.
func (b *bench) apf(ctx context.Context) (map[string]float64, error) {
	body, err := b.apiServerMetrics(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range []struct{ metric, key string }{
		{"apiserver_flowcontrol_dispatched_requests_total", "dispatched"},
		{"apiserver_flowcontrol_rejected_requests_total", "rejected"},
		{"apiserver_flowcontrol_request_wait_duration_seconds_sum", "wait seconds"},
		{"apiserver_flowcontrol_request_wait_duration_seconds_count", "waits"},
	} {
		series, err := seriesOf(body, m.metric)
		if err != nil {
			return nil, err
		}
		for s, v := range series {
			out[m.key+" "+labelOf(s, "priority_level")+"/"+labelOf(s, "flow_schema")] += v
		}
	}
	seats, err := seriesOf(body, "apiserver_flowcontrol_nominal_limit_seats")
	if err != nil {
		return nil, err
	}
	for s, v := range seats {
		out["seats "+labelOf(s, "priority_level")] = v
	}
	return out, nil
}

// flood runs the spread deadlines of the deadline workload while other
// clients flood the API server with writes, twice: without the
// hitl-manager FlowSchema, where the manager's requests share the
// workload-low priority level with the flood, then with it.
func (b *bench) flood(ctx context.Context) error {
	f, err := b.newFlooder(ctx, b.s.FloodClients, b.s.FloodWorkers, b.outDir)
	if err != nil {
		return err
	}
	objs, err := apfObjects()
	if err != nil {
		return err
	}
	defer func() {
		for _, o := range objs {
			_ = b.c.Delete(context.Background(), o)
		}
	}()
	b.r.set("flood: clients (ServiceAccounts) x goroutines", float64(b.s.FloodClients*b.s.FloodWorkers))
	var lead, p99With time.Duration
	for _, with := range []bool{false, true} {
		run, tag := "without FlowSchema", "a"
		if with {
			run, tag = "with FlowSchema", "b"
			if err := b.installAPF(ctx, objs); err != nil {
				return err
			}
		}
		before, err := b.apf(ctx)
		if err != nil {
			return err
		}
		label := fmt.Sprintf("flood, %s: ", run)
		var late []time.Duration
		var early, open int
		if err := b.whileFlooding(ctx, f, label, func() error {
			var err error
			if lead, err = b.calibrate(ctx, b.s.SpreadDeadline); err != nil {
				return err
			}
			explain, err := b.explainTransitions(ctx)
			if err != nil {
				return err
			}
			late, early, open, err = b.floodedDeadlines(ctx, tag, lead)
			if err == nil {
				explain(strings.TrimSuffix(label, ": "), len(late))
			}
			return err
		}); err != nil {
			return fmt.Errorf("%s: %w", run, err)
		}
		after, err := b.apf(ctx)
		if err != nil {
			return err
		}
		p50, p99, worst := percentiles(late)
		b.r.set(label+fmt.Sprintf("deadline lateness ms, %d spread p50", len(late)), ms(p50))
		b.r.set(label+fmt.Sprintf("deadline lateness ms, %d spread p99", len(late)), ms(p99))
		b.r.set(label+fmt.Sprintf("deadline lateness ms, %d spread max", len(late)), ms(worst))
		b.r.set(label+"early transitions", float64(early))
		names := make([]string, len(late))
		for i := range names {
			names[i] = fmt.Sprintf("flood-%s-%d", tag, i)
		}
		b.decidedLateness(label, names)
		b.reportAPF(label, before, after)
		b.r.set(label+"windows still open a minute after the last deadline", float64(open))
		b.r.check("every window closed, flood, "+run, "0 open", fmt.Sprintf("%d open", open), open == 0)
		b.r.check("no early transition, flood, "+run, "0", strconv.Itoa(early), early == 0)
		if with {
			n := after["dispatched hitl-manager/hitl-manager"] - before["dispatched hitl-manager/hitl-manager"]
			b.r.check("manager's requests in priority level hitl-manager", "> 0", fmt.Sprintf("%.0f", n), n > 0)
			p99With = p99
		}
		if err := b.clean(ctx); err != nil {
			return err
		}
		if err := b.quiet(ctx); err != nil {
			return err
		}
	}
	return b.floodFloor(ctx, f, lead, p99With)
}

// floodFloorTarget is the most the flooded windows' p99 lateness may be,
// with the shipped FlowSchema, as a multiple of the bare client's under
// the same flood: the absolute lateness is the flood's, not hitl's.
const floodFloorTarget = 1.2

// floodFloor is the floor of the flooded windows, in the same run: the same
// flood, and with the manager stopped a bare client closes as many windows,
// spread the same way from the lead calibrated in the run with the
// FlowSchema, each at its deadline. The bare client is the bench's
// administrator, whom API Priority and Fairness exempts: no client gets its
// writes through a flood faster, so what it misses, the API server's CPU
// makes impossible for the manager too.
func (b *bench) floodFloor(ctx context.Context, f *flooder, lead, p99With time.Duration) error {
	var p99 time.Duration
	if err := b.whileFlooding(ctx, f, "flood, floor: ", func() error {
		var err error
		p99, err = b.spreadFloor(ctx, b.s.SpreadDeadline, lead, func(int) string { return ns }, "flood, floor: ", false)
		return err
	}); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	if p99With > 0 && p99 > 0 {
		b.r.set("flood, with FlowSchema: deadline lateness p99 / floor", p99With.Seconds()/p99.Seconds())
		b.checkAgainstFloor("deadline lateness p99, flood, with FlowSchema", p99With, p99, floodFloorTarget)
	}
	return b.clean(ctx)
}

// whileFlooding runs run once the flood has run at full strength for 3 s,
// stops the flood, and records its writes per second and the writes it
// had refused or failed, named with label.
func (b *bench) whileFlooding(ctx context.Context, f *flooder, label string, run func() error) error {
	stop, err := f.start(ctx)
	if err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	err = run()
	rate, failed, stopErr := stop()
	if err = errors.Join(err, stopErr); err != nil {
		return err
	}
	b.r.set(label+"flood writes/s", rate)
	b.r.set(label+"flood writes refused or failed", float64(failed))
	return nil
}

// floodedDeadlines asks the spread deadlines of the deadline workload,
// named flood-<tag>-<i>, from lead on, and returns their lateness, how many were early,
// and how many were still open a minute after the last deadline.
func (b *bench) floodedDeadlines(ctx context.Context, tag string, lead time.Duration) (late []time.Duration, early, open int, err error) {
	names, start, err := b.askSpread(ctx, b.s.SpreadDeadline, b.s.SpreadWindow, lead, func(i int, timeout time.Duration) *hitlv1.UserQuestion {
		return timed(fmt.Sprintf("flood-%s-%d", tag, i), timeout)
	})
	if err != nil {
		return nil, 0, 0, err
	}
	if caughtUp, err := waitOpen(ctx, b.obs, names); err != nil {
		return nil, 0, 0, err
	} else if caughtUp.After(start) {
		fmt.Fprintf(os.Stderr, "bench: flood %s: the last Open status came %s after the first deadline\n", tag, caughtUp.Sub(start))
	}
	// Under a flood the controller may fall minutes behind: that is a
	// figure, not the end of the run.
	wait, cancel := context.WithDeadline(ctx, start.Add(b.s.SpreadWindow+60*time.Second))
	defer cancel()
	late, early, _, unclosed := latenessWhile(wait, b.obs, names)
	b.logSlices("flood "+tag+": spread", late)
	return late, early, len(unclosed), nil
}

// installAPF creates the FlowSchema and its priority level and waits until
// the API server dispatches by them: it reports the level's seats.
func (b *bench) installAPF(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if err := b.c.Create(ctx, o.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := b.apf(ctx)
		if err != nil {
			return err
		}
		if m["seats hitl-manager"] > 0 {
			b.r.set("flood: seats of priority level hitl-manager", m["seats hitl-manager"])
			b.r.set("flood: seats of priority level workload-low", m["seats workload-low"])
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server has no priority level hitl-manager 30s after it was created")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// reportAPF records where the API server dispatched requests during a
// flood run: the manager's level (hitl-manager) and the level it shares
// with the flood without it (workload-low), with their mean wait in queue
// and the requests refused.
func (b *bench) reportAPF(label string, before, after map[string]float64) {
	delta := func(key string) float64 { return after[key] - before[key] }
	for _, level := range []string{"hitl-manager/hitl-manager", "workload-low/service-accounts"} {
		n := delta("dispatched " + level)
		b.r.set(label+"APF requests dispatched, "+level, n)
		b.r.set(label+"APF requests refused, "+level, delta("rejected "+level))
		if waits := delta("waits " + level); waits > 0 {
			b.r.set(label+"APF mean wait in queue ms, "+level, 1000*delta("wait seconds "+level)/waits)
		}
	}
}
