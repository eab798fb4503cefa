// The notifier workloads: hitl-notify, the real binary, as its shipped
// ServiceAccount with the roles of config/notify, sending to a signed
// webhook receiver on loopback: questions asked at once, and the reminders
// of many open questions.

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify/channel"
	"github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

// The notifier workloads' agents: each workload's questions are asked by
// agents no other workload asks as, and the warm-up question by its own.
const (
	burstAgent  = "notify-burst"
	remindAgent = "notify-remind" // remindAgent-<i>, one per channel
	warmAgent   = "notify-warmup"
)

// notifyRate is the rate limit of the bench's channels: the most a channel
// may have, so that what is measured is the notifier, not its limit.
var notifyRate = &hitlv1.RateLimit{PerMinute: 6000, Burst: 1000}

// notifyBurst asks NotifyAsks questions at once, as fast as the bench's
// clients can create them, of an agent whose policy sends Asked to one
// webhook channel, and times each from when it was asked (the first sight
// of it by a watch of the agent's questions, or its create's response if
// that came first) until the receiver has it; then it reads the
// notifier's memory, stops it, and measures the burst's floor beside the
// target (notifyFloor).
func (b *bench) notifyBurst(ctx context.Context) error {
	n := b.s.NotifyAsks
	rcv, err := newWebhookReceiver()
	if err != nil {
		return err
	}
	defer rcv.close()
	if err := b.notifyConfig(ctx, rcv, "burst", burstAgent, hitlv1.NotificationPolicySpec{On: []hitlv1.NotificationEvent{hitlv1.EventAsked}}); err != nil {
		return err
	}
	proc, err := b.startNotifier(ctx, rcv)
	if err != nil {
		return err
	}
	defer proc.stop()

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	asked, err := b.watchAsks(watchCtx, burstAgent)
	if err != nil {
		return err
	}
	profiled := make(chan error, 1)
	go func() {
		profiled <- b.saveNotifierProfile(proc, fmt.Sprintf("profile?seconds=%d", b.askProfile()), "notify-cpu-burst.pprof")
	}()
	start := time.Now()
	names, askedAll, err := b.askAtOnce(ctx, asked, burstAgent, "burst", n)
	if err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := rcv.waitFor(wait, n, func(m *channel.Message) bool { return m.Question.Agent == burstAgent }); err != nil {
		return fmt.Errorf("%w (notifier log: %s)", err, proc.logPath)
	}
	allDelivered := time.Since(start)
	late := asked.toDelivered(rcv, names)
	recorded, err := b.waitRecorded(ctx, burstAgent, n, "asked", time.Minute)
	if err != nil {
		return err
	}
	hwm, rss, err := procMemory(proc.cmd.Process.Pid)
	if err != nil {
		return err
	}
	if err := <-profiled; err != nil {
		fmt.Fprintf(os.Stderr, "bench: profiling the notifier: %v\n", err)
	}
	if err := b.saveNotifierProfile(proc, "heap", "notify-heap-burst.pprof"); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
	}
	p50, p99, worst := percentiles(late)
	// The floor: the same burst right after, told by a bare client, for
	// the API server's part of the figure in this run on this machine.
	proc.stop()
	floor, err := b.notifyFloor(ctx, rcv, n)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: the burst's floor: %v\n", err)
	}
	f50, f99, fWorst := percentiles(floor)
	label := fmt.Sprintf("notify: %d asked at once", n)
	b.r.set(label+", s to ask them all", askedAll.Seconds())
	b.r.set(label+", s until every Asked delivered", allDelivered.Seconds())
	b.r.set(label+", s until every delivery recorded", recorded.Sub(start).Seconds())
	b.r.set(label+", asked to delivered ms p50", ms(p50))
	b.r.set(label+", asked to delivered ms p99", ms(p99))
	b.r.set(label+", asked to delivered ms max", ms(worst))
	b.r.set(label+", duplicates", float64(rcv.duplicates()))
	b.r.set(label+", notifier RSS MiB", float64(rss)/(1<<20))
	b.r.set(label+", notifier peak RSS (VmHWM) MiB", float64(hwm)/(1<<20))
	got := p99.Round(time.Millisecond).String()
	if len(floor) == n {
		b.r.set(label+", floor (a bare watch-and-POST client, right after), asked to delivered ms p50", ms(f50))
		b.r.set(label+", floor (a bare watch-and-POST client, right after), asked to delivered ms p99", ms(f99))
		b.r.set(label+", floor (a bare watch-and-POST client, right after), asked to delivered ms max", ms(fWorst))
		b.r.set(label+", asked to delivered p99 / floor p99", float64(p99)/float64(max(f99, time.Millisecond)))
		// The target is absolute; the floor is beside it: burst p99 / floor.
		got += " / floor " + f99.Round(time.Millisecond).String()
	}
	b.r.check(fmt.Sprintf("notify: %d asked, all delivered once", n), fmt.Sprint(n),
		fmt.Sprintf("%d (%d dup)", len(late), rcv.duplicates()), len(late) == n && rcv.duplicates() == 0)
	b.r.check(fmt.Sprintf("notify: %d asked, asked to delivered p99", n), "<= 500ms", got, p99 <= 500*time.Millisecond)
	b.r.check(fmt.Sprintf("notify: %d asked, notifier peak RSS", n), "<= 100MiB", fmt.Sprintf("%.0fMiB", float64(hwm)/(1<<20)), hwm <= 100<<20)
	return b.notifyClean(ctx)
}

// askTimes is when each question of an agent was asked: the first sight of
// it by a watch of the agent's questions, or its create's response if that
// came first.
type askTimes struct {
	mu    sync.Mutex
	asked map[string]time.Time
}

func (a *askTimes) seen(name string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if first, ok := a.asked[name]; !ok || at.Before(first) {
		a.asked[name] = at
	}
}

// toDelivered is how long after its ask each of names had its Asked
// notification at rcv, for those that did.
func (a *askTimes) toDelivered(rcv *webhookReceiver, names []string) []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var late []time.Duration
	for _, name := range names {
		got, ok := rcv.first(name, "asked")
		if at := a.asked[name]; ok {
			late = append(late, got.Sub(at))
		}
	}
	return late
}

// watchAsks times the asks of agent's questions with a watch of the
// agent's questions alone, so that it is not behind on the rest of the
// namespace's changes, until ctx ends.
func (b *bench) watchAsks(ctx context.Context, agent string) (*askTimes, error) {
	a := &askTimes{asked: map[string]time.Time{}}
	watcher := newObserver()
	watcher.respond(func(q *hitlv1.UserQuestion) { a.seen(q.Name, time.Now()) })
	if err := watcher.run(ctx, b.c, ns, hitlv1.AgentLabel, agent); err != nil {
		return nil, err
	}
	return a, nil
}

// askAtOnce asks n questions of agent, named prefix-<i>, as fast as the
// bench's clients can create them (32 at a time), noting in a when each
// create returned; it returns their names and how long it took.
func (b *bench) askAtOnce(ctx context.Context, a *askTimes, agent, prefix string, n int) ([]string, time.Duration, error) {
	names := make([]string, n)
	took, err := parallel(ctx, n, 32, func(ctx context.Context, i int) error {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		if err := b.c.Create(ctx, agentQuestion(names[i], agent, 0)); err != nil {
			return err
		}
		// The question was asked by the time its create returned, if the
		// watch was slower to show it.
		a.seen(names[i], time.Now())
		return nil
	})
	return names, took, err
}

// notifyReminders asks NotifyReminders timed questions, spread over
// NotifyChannels agents, each with its policy and its webhook channel,
// whose one reminder (at 10 % of the window, so that no window closes
// meanwhile) falls due at times spread evenly over NotifyWindow, and
// measures how late each reminder reaches the receiver after the time it
// was due (the message's time, which the notifier computes from the
// question as the API server stored it).
func (b *bench) notifyReminders(ctx context.Context) error {
	n, k := b.s.NotifyReminders, b.s.NotifyChannels
	rcv, err := newWebhookReceiver()
	if err != nil {
		return err
	}
	defer rcv.close()
	for i := range k {
		agent := fmt.Sprintf("%s-%d", remindAgent, i)
		if err := b.notifyConfig(ctx, rcv, agent, agent, hitlv1.NotificationPolicySpec{
			On: []hitlv1.NotificationEvent{hitlv1.EventReminder}, Reminders: &hitlv1.Reminders{Percents: []int32{10}},
		}); err != nil {
			return err
		}
	}
	proc, err := b.startNotifier(ctx, rcv)
	if err != nil {
		return err
	}
	defer proc.stop()
	lead, err := b.calibrate(ctx, n)
	if err != nil {
		return err
	}
	b.r.set("notify: reminders asked ahead of the first one, s", lead.Seconds())
	names, first, err := b.askSpread(ctx, n, b.s.NotifyWindow, lead, func(i int, untilDue time.Duration) *hitlv1.UserQuestion {
		return agentQuestion(fmt.Sprintf("remind-%d", i), fmt.Sprintf("%s-%d", remindAgent, i%k), 10*untilDue)
	})
	if err != nil {
		return err
	}
	if time.Now().After(first) {
		return fmt.Errorf("asking %d questions took past the first reminder's time (lead %s)", n, lead)
	}
	hwmOpen, rssOpen, err := procMemory(proc.cmd.Process.Pid)
	if err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, time.Until(first)+b.s.NotifyWindow+time.Minute)
	defer cancel()
	if err := rcv.waitFor(wait, n, func(m *channel.Message) bool { return m.Event == hitlv1.EventReminder }); err != nil {
		return fmt.Errorf("%w (notifier log: %s)", err, proc.logPath)
	}
	var late []time.Duration
	early := 0
	for _, name := range names {
		got, due, ok := rcv.firstWithDue(name, "reminder-10")
		if !ok {
			continue
		}
		if got.Before(due) {
			early++
		}
		late = append(late, got.Sub(due))
	}
	hwm, rss, err := procMemory(proc.cmd.Process.Pid)
	if err != nil {
		return err
	}
	if err := b.saveNotifierProfile(proc, "heap", "notify-heap-reminders.pprof"); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
	}
	b.logSlices("reminder", late)
	p50, p99, worst := percentiles(late)
	label := fmt.Sprintf("notify: %d reminders over %s on %d channels", n, b.s.NotifyWindow, k)
	b.r.set(label+", lateness ms p50", ms(p50))
	b.r.set(label+", lateness ms p99", ms(p99))
	b.r.set(label+", lateness ms max", ms(worst))
	b.r.set(label+", early", float64(early))
	b.r.set(label+", duplicates", float64(rcv.duplicates()))
	b.r.set(label+", notifier RSS MiB once asked", float64(rssOpen)/(1<<20))
	b.r.set(label+", notifier peak RSS (VmHWM) MiB once asked", float64(hwmOpen)/(1<<20))
	b.r.set(label+", notifier RSS MiB", float64(rss)/(1<<20))
	b.r.set(label+", notifier peak RSS (VmHWM) MiB", float64(hwm)/(1<<20))
	b.r.check(fmt.Sprintf("notify: %d reminders, all delivered once, none early", n), fmt.Sprint(n),
		fmt.Sprintf("%d (%d early, %d dup)", len(late), early, rcv.duplicates()), len(late) == n && early == 0 && rcv.duplicates() == 0)
	b.r.check(fmt.Sprintf("notify: %d reminders, lateness max", n), "<= 1s",
		fmt.Sprintf("%s (p99 %s)", worst.Round(time.Millisecond), p99.Round(time.Millisecond)), worst <= time.Second)
	return b.notifyClean(ctx)
}

// agentQuestion is a question of agent as the agent SDK asks it, timed
// when timeout is not zero.
func agentQuestion(name, agent string, timeout time.Duration) *hitlv1.UserQuestion {
	q := builders.Question(name, ns).Agent(agent).Label(hitlv1.AgentLabel, agent).Ask("q", "Proceed?", "yes", "no")
	if timeout > 0 {
		q = q.Timeout(timeout)
	}
	return q.Obj()
}

// notifyConfig creates, as the platform team would, a webhook channel
// named name to rcv's path /name (with the Secret of its HMAC key and the
// bench's rate limit) and a policy of the same name that sends to it what
// spec says about the questions of agent.
func (b *bench) notifyConfig(ctx context.Context, rcv *webhookReceiver, name, agent string, spec hitlv1.NotificationPolicySpec) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-hmac", Namespace: ns}, Data: map[string][]byte{"key": rcv.key}}
	ch := &hitlv1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: hitlv1.NotificationChannelSpec{
		Webhook:   &hitlv1.WebhookChannel{URL: rcv.url + "/" + name, SecretRef: hitlv1.SecretKeyReference{Name: sec.Name}},
		RateLimit: notifyRate,
	}}
	spec.Selector = hitlv1.ApprovalSelector{Agents: []string{agent}}
	spec.Channels = []string{name}
	p := &hitlv1.NotificationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	for _, o := range []client.Object{sec, ch, p} {
		if err := b.c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s: %w", o.GetName(), err)
		}
	}
	return nil
}

// notifyClean deletes the notifier workload's policies, channels and
// Secrets, so that the next notifier serves none of them.
func (b *bench) notifyClean(ctx context.Context) error {
	for _, obj := range []client.Object{&hitlv1.NotificationPolicy{}, &hitlv1.NotificationChannel{}, &corev1.Secret{}} {
		if err := b.c.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
			return err
		}
	}
	return nil
}

// waitRecorded waits until n questions of agent record key in their
// hitl.dev/notified annotation, and returns when they were seen to.
func (b *bench) waitRecorded(ctx context.Context, agent string, n int, key string, within time.Duration) (time.Time, error) {
	deadline := time.Now().Add(within)
	for {
		var list hitlv1.UserQuestionList
		if err := b.c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{hitlv1.AgentLabel: agent}); err != nil {
			return time.Time{}, err
		}
		done := 0
		for i := range list.Items {
			if strings.Contains(list.Items[i].Annotations[hitlv1.NotifiedAnnotation], `"`+key+`"`) {
				done++
			}
		}
		if done >= n {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%d of %d questions record %s after %s", done, n, key, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// notifierProc is a running hitl-notify.
type notifierProc struct {
	cmd     *exec.Cmd
	pprof   string
	logPath string
	exited  chan struct{}
}

// startNotifier runs hitl-notify with the flags its Deployment ships
// (--leader-elect, with the Lease in the install namespace, which a process
// outside a Pod must name) as its ServiceAccount, with the shipped roles
// and the Secrets binding in the bench's namespace, and returns once a
// warm-up question has been delivered to rcv: its watches and its
// connection to the receiver are up.
func (b *bench) startNotifier(ctx context.Context, rcv *webhookReceiver) (*notifierProc, error) {
	kubeconfig, err := b.notifierKubeconfig(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.notifyConfig(ctx, rcv, "warmup", warmAgent, hitlv1.NotificationPolicySpec{On: []hitlv1.NotificationEvent{hitlv1.EventAsked}}); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &notifierProc{pprof: fmt.Sprintf("127.0.0.1:%d", port), logPath: filepath.Join(b.outDir, "notify.log"), exited: make(chan struct{})}
	p.cmd = exec.Command(b.notifyBin, "--kubeconfig", kubeconfig, "--leader-elect", "--leader-election-namespace", b.install.Namespace,
		"--health-probe-bind-address", "0", "--metrics-bind-address", "0", "--pprof-bind-address", p.pprof,
		"--inbox-url", "https://hitl.example.com")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() {
		defer close(p.exited)
		defer logFile.Close()
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			fmt.Fprintln(logFile, s.Text())
		}
		_ = p.cmd.Wait()
	}()
	warm := agentQuestion(name("warmup"), warmAgent, 0)
	if err := b.c.Create(ctx, warm); err != nil {
		p.stop()
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := rcv.waitFor(wait, 1, func(m *channel.Message) bool { return m.Question.Name == warm.Name }); err != nil {
		p.stop()
		return nil, fmt.Errorf("hitl-notify did not deliver the warm-up question: %w (its log: %s)", err, p.logPath)
	}
	return p, nil
}

// stop ends the notifier with SIGTERM, as a rollout does.
func (p *notifierProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// notifierKubeconfig installs, once, the notifier's ServiceAccount and the
// roles config/notify ships, binds the Secrets role in the bench's
// namespace as docs/notifications.md says, and writes a kubeconfig with a
// token of the ServiceAccount.
func (b *bench) notifierKubeconfig(ctx context.Context) (string, error) {
	if b.notifyKube != "" {
		return b.notifyKube, nil
	}
	id, err := testenv.InstallNotifierRBAC(ctx, b.c)
	if err != nil {
		return "", err
	}
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: id.Namespace, Name: id.ServiceAccount}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: id.SecretsRole, Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: id.SecretsRole}, Subjects: []rbacv1.Subject{sa}}
	if err := b.c.Create(ctx, rb); err != nil {
		return "", err
	}
	if err := testenv.AwaitBinding(ctx, b.c, ns, rb.RoleRef, rb.Subjects, testenv.GrantWait); err != nil {
		return "", err
	}
	if err := testenv.AwaitBinding(ctx, b.c, "", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: strings.TrimSuffix(id.SecretsRole, "-secrets")},
		[]rbacv1.Subject{sa}, testenv.GrantWait); err != nil {
		return "", err
	}
	token, _, err := testenv.RequestToken(ctx, b.c, id.Namespace, id.ServiceAccount, 3*time.Hour)
	if err != nil {
		return "", err
	}
	data, err := testenv.TokenKubeconfig(b.cfg, id.Username(), token, "")
	if err != nil {
		return "", err
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("hitl-bench-notify-%d.kubeconfig", os.Getpid()))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	b.notifyKube = path
	return path, nil
}

// saveNotifierProfile writes one of the notifier's pprof profiles next to
// the results.
func (b *bench) saveNotifierProfile(p *notifierProc, profile, file string) error {
	resp, err := http.Get("http://" + p.pprof + "/debug/pprof/" + profile)
	if err != nil {
		return err
	}
	return b.saveBody(resp, file)
}

// procMemory reads a process's peak and current resident memory (VmHWM,
// VmRSS), in bytes.
func procMemory(pid int) (hwm, rss int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || (f[0] != "VmHWM:" && f[0] != "VmRSS:") {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, 0, err
		}
		if f[0] == "VmHWM:" {
			hwm = kb * 1024
		} else {
			rss = kb * 1024
		}
	}
	if hwm == 0 || rss == 0 {
		return 0, 0, fmt.Errorf("no VmHWM or VmRSS for pid %d", pid)
	}
	return hwm, rss, nil
}

// webhookReceiver is the channels' endpoint on loopback: it verifies each
// request's signature as docs/notifications.md says a receiver should, and
// keeps the first arrival of each deduplication id, counting repeats.
type webhookReceiver struct {
	key []byte
	url string
	srv *http.Server

	mu   sync.Mutex
	got  map[string]*arrival // by deduplication id
	byQ  map[string]*arrival // by question name and event key
	dups int
	bad  int
	wake chan struct{}
}

// arrival is the first delivery of one notification.
type arrival struct {
	at  time.Time
	msg channel.Message
}

func newWebhookReceiver() (*webhookReceiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &webhookReceiver{key: []byte(fmt.Sprintf("bench-hmac-%d", time.Now().UnixNano())), url: "http://" + l.Addr().String(),
		got: map[string]*arrival{}, byQ: map[string]*arrival{}, wake: make(chan struct{}, 1)}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(l) }()
	return r, nil
}

func (r *webhookReceiver) close() { _ = r.srv.Close() }

func (r *webhookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(req.Body)
	var m channel.Message
	if err == nil {
		err = channel.Verify(r.key, req.Header.Get(channel.SignatureHeader), body, at, channel.DefaultTolerance)
	}
	if err == nil {
		err = json.Unmarshal(body, &m)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.got[m.ID] != nil {
		r.dups++
		return
	}
	a := &arrival{at: at, msg: m}
	r.got[m.ID] = a
	if parts := strings.Split(m.ID, "/"); len(parts) == 3 {
		r.byQ[m.Question.Name+"\x00"+parts[1]] = a
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// waitFor waits until n distinct notifications that match have arrived.
func (r *webhookReceiver) waitFor(ctx context.Context, n int, match func(*channel.Message) bool) error {
	for {
		r.mu.Lock()
		got, bad := 0, r.bad
		for _, a := range r.got {
			if match(&a.msg) {
				got++
			}
		}
		r.mu.Unlock()
		if bad > 0 {
			return fmt.Errorf("%d requests whose signature or body was refused", bad)
		}
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d notifications arrived: %w", got, n, ctx.Err())
		case <-r.wake:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// first is when the notification of key (Due.Key, from the deduplication
// id <uid>/<key>/<channel>) about question first arrived.
func (r *webhookReceiver) first(question, key string) (time.Time, bool) {
	at, _, ok := r.firstWithDue(question, key)
	return at, ok
}

// firstWithDue is first, and the time the message says the event was due.
func (r *webhookReceiver) firstWithDue(question, key string) (at, due time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.byQ[question+"\x00"+key]; a != nil {
		return a.at, a.msg.Time, true
	}
	return time.Time{}, time.Time{}, false
}

func (r *webhookReceiver) duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dups
}
