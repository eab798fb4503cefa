// Package notify is hitl-notify: an answerer service, built on
// pkg/answerer, that tells people of the questions NotificationPolicies
// select, on the NotificationChannels they name. It watches the policies
// and channels of every namespace (one reconcile per namespace sets their
// Ready conditions and what the notifier knows of them), follows the
// questions of the agents the policies select through an Answerer per
// namespace, decides what is due with Plan, and delivers through one queue
// per channel: rate-limited, retried with backoff a bounded number of
// times, so that a failing channel never holds up another. What was sent
// is recorded on the question (its hitl.dev/notified annotation), so a
// restart neither loses nor repeats a notification.
package notify

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/reference"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify/channel"
	"github.com/hitl-dev/hitl/pkg/answerer"
)

// Options configure a Notifier.
type Options struct {
	// InboxURL is the web inbox's address; notifications link to
	// <InboxURL>/q/<namespace>/<name>. Empty: no link.
	InboxURL string
	// Retry says how often a notification is attempted; zero is
	// channel.DefaultRetry.
	Retry channel.Retry
	// HTTPClient sends the webhook, Slack and Teams requests; nil is
	// channel.NewHTTPClient(10s).
	HTTPClient *http.Client
	// EmailTLS verifies SMTP servers on STARTTLS; nil uses the system's
	// roots.
	EmailTLS *tls.Config
	// Resync is how often each namespace's Secrets are read again (a
	// channel's Secret created or changed is seen within it); zero is a
	// minute.
	Resync time.Duration
	// RecordQuiet is how long no new question must come before the
	// records and Events of the notifications sent while questions kept
	// arriving are written (recorder.go); zero is a second.
	RecordQuiet time.Duration
	// Clock is the notifier's time; nil is the real clock.
	Clock clock.WithTicker
	// SkipNameValidation lets tests set the notifier up more than once in
	// a process.
	SkipNameValidation bool
}

// Notifier is hitl-notify's engine, a manager Runnable with a controller.
type Notifier struct {
	opts     Options
	client   client.Client
	watcher  client.WithWatch
	resolver *Resolver
	events   recorder.EventRecorder
	log      logr.Logger

	started chan struct{}
	ctx     context.Context

	plan workqueue.TypedDelayingInterface[types.NamespacedName]

	mu         sync.Mutex
	namespaces map[string]*namespace
	queues     map[types.NamespacedName]*queue
	// sent is what this process delivered, per question, beyond what it
	// has read back from the question's annotation.
	sent map[types.UID]Record
	// pending holds the notifications queued or being sent, and given up
	// holds those given up on until their channel changes.
	pending, givenUp map[string]bool

	// records holds the questions whose record is to be written; hold
	// holds back those of what was sent while questions keep arriving,
	// and holdWake tells the releaser that it holds the first; unsent
	// holds the NotificationSent Events to emit once their question's
	// record was written (recorder.go).
	records  workqueue.TypedRateLimitingInterface[recordKey]
	hold     *holdBack
	holdWake chan struct{}
	unsent   map[recordKey][]sentEvent
	scheme   *runtime.Scheme
}

// namespace is what the notifier knows of one namespace.
type namespace struct {
	policies []*hitlv1.NotificationPolicy
	channels map[string]*hitlv1.NotificationChannel
	senders  map[string]channel.Sender
	// agents the policies select; nil with all for every agent.
	agents    []string
	all       bool
	stopWatch context.CancelFunc
	questions map[string]*hitlv1.UserQuestion
}

// New sets a Notifier up in mgr: its controller of policies and channels
// and its delivery, run once mgr starts (and, with leader election, leads).
func New(mgr ctrl.Manager, o Options) (*Notifier, error) {
	if o.Retry.Attempts == 0 {
		o.Retry = channel.DefaultRetry
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Retry.Clock == nil {
		o.Retry.Clock = o.Clock
	}
	if o.Resync == 0 {
		o.Resync = time.Minute
	}
	if o.RecordQuiet == 0 {
		o.RecordQuiet = recordQuiet
	}
	if o.HTTPClient == nil {
		o.HTTPClient = channel.NewHTTPClient(10 * time.Second)
	}
	watcher, err := client.NewWithWatch(ownConnection(mgr.GetConfig()), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	n := &Notifier{
		opts: o, client: mgr.GetClient(), watcher: watcher,
		resolver: &Resolver{Reader: mgr.GetAPIReader(), HTTPClient: o.HTTPClient, EmailTLS: o.EmailTLS},
		events:   mgr.GetEventRecorder("hitl-notify"),
		log:      mgr.GetLogger().WithName("notify"),
		started:  make(chan struct{}),
		plan: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[types.NamespacedName]{
			Name: "hitl-notify-plan", Clock: o.Clock,
		}),
		records:    newRecordQueue(),
		hold:       newHoldBack(o.RecordQuiet, recordHoldMax),
		holdWake:   make(chan struct{}, 1),
		unsent:     map[recordKey][]sentEvent{},
		scheme:     mgr.GetScheme(),
		namespaces: map[string]*namespace{}, queues: map[types.NamespacedName]*queue{},
		sent: map[types.UID]Record{}, pending: map[string]bool{}, givenUp: map[string]bool{},
	}
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace()}}}
	})
	if err := ctrl.NewControllerManagedBy(mgr).Named("hitl-notify").
		Watches(&hitlv1.NotificationPolicy{}, toNamespace).
		Watches(&hitlv1.NotificationChannel{}, toNamespace).
		WithOptions(controller.Options{SkipNameValidation: &o.SkipNameValidation}).
		Complete(n); err != nil {
		return nil, err
	}
	return n, mgr.Add(n)
}

// ownConnection is cfg for a client with connections to the API server
// of its own. client-go shares one transport, and so one HTTP/2
// connection, among the clients of equal configs; the watches of the
// questions get their own, so that their events are not held up behind
// the notifier's writes (a burst of questions asked at once is a burst of
// record patches and Events, which on a shared connection held the
// watches' events back by tenths of a second, and at worst by more than a
// second, behind a bare client's watch). A config with a Proxy
// function is never shared; http.ProxyFromEnvironment is client-go's
// default.
func ownConnection(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.Proxy == nil {
		cfg.Proxy = http.ProxyFromEnvironment
	}
	return cfg
}

// Start runs the planning workers, the releaser of the bookkeeping held
// back and the record writers until ctx ends; then it writes, for a few
// seconds at most, the records of what was sent and not recorded yet.
func (n *Notifier) Start(ctx context.Context) error {
	n.ctx = ctx
	close(n.started)
	var wg, writers sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for n.planNext() {
			}
		})
	}
	wg.Go(func() { n.releaseHeld(ctx) })
	for range recordWorkers {
		writers.Go(func() { n.writeRecords(context.WithoutCancel(ctx)) })
	}
	<-ctx.Done()
	n.plan.ShutDown()
	wg.Wait()
	n.mu.Lock()
	held := n.hold.close()
	n.mu.Unlock()
	for _, k := range held {
		n.records.Add(k)
	}
	n.stopRecords()
	writers.Wait()
	n.mu.Lock()
	for _, ns := range n.namespaces {
		if ns.stopWatch != nil {
			ns.stopWatch()
		}
	}
	n.mu.Unlock()
	return nil
}

// Reconcile brings what the notifier knows of a namespace (req.Namespace)
// up to date with its policies and channels: each channel's sender and
// Ready condition, each policy's Ready condition, and the watch of the
// questions of the agents the policies select. It runs again every
// Options.Resync, to read the Secrets again.
func (n *Notifier) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	select {
	case <-n.started:
	case <-ctx.Done():
		return reconcile.Result{}, ctx.Err()
	}
	log := ctrl.LoggerFrom(ctx).WithValues("namespace", req.Namespace)
	var policies hitlv1.NotificationPolicyList
	var channels hitlv1.NotificationChannelList
	if err := n.client.List(ctx, &policies, client.InNamespace(req.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	if err := n.client.List(ctx, &channels, client.InNamespace(req.Namespace)); err != nil {
		return reconcile.Result{}, err
	}

	senders, states := map[string]channel.Sender{}, map[string]error{}
	byName := map[string]*hitlv1.NotificationChannel{}
	for i := range channels.Items {
		ch := &channels.Items[i]
		s, err := n.resolver.Sender(ctx, ch)
		if _, ok := err.(*NotReady); err != nil && !ok {
			return reconcile.Result{}, err
		}
		states[ch.Name], byName[ch.Name] = err, ch
		if err == nil {
			senders[ch.Name] = s
		}
		if err := n.setReady(ctx, ch, &ch.Status, err); err != nil {
			return reconcile.Result{}, err
		}
	}
	var ps []*hitlv1.NotificationPolicy
	for i := range policies.Items {
		p := &policies.Items[i]
		if p.DeletionTimestamp == nil {
			ps = append(ps, p)
		}
		if err := n.setReady(ctx, p, &p.Status, policyReady(p, states)); err != nil {
			return reconcile.Result{}, err
		}
	}
	n.configure(req.Namespace, ps, byName, senders)
	log.V(1).Info("Configured the namespace", "policies", len(ps), "channels", len(byName), "ready", len(senders))
	if len(ps) == 0 {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: n.opts.Resync}, nil
}

// setReady writes obj's Ready condition from err when it changed.
func (n *Notifier) setReady(ctx context.Context, obj client.Object, st *hitlv1.NotificationStatus, err error) error {
	before := obj.DeepCopyObject().(client.Object)
	c := readyCondition(obj.GetGeneration(), err)
	if !meta.SetStatusCondition(&st.Conditions, c) && st.ObservedGeneration == obj.GetGeneration() {
		return nil
	}
	st.ObservedGeneration = obj.GetGeneration()
	if err := n.client.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing the Ready condition of %s: %w", obj.GetName(), err)
	}
	return nil
}

// configure installs a namespace's policies and channels, restarts its
// question watch when the agents selected changed, and plans each of its
// questions again.
func (n *Notifier) configure(name string, policies []*hitlv1.NotificationPolicy, channels map[string]*hitlv1.NotificationChannel, senders map[string]channel.Sender) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ns := n.namespaces[name]
	if ns == nil {
		ns = &namespace{questions: map[string]*hitlv1.UserQuestion{}}
		n.namespaces[name] = ns
	}
	for chName, ch := range channels {
		key := types.NamespacedName{Namespace: name, Name: chName}
		l := ch.Spec.Limit()
		q := n.queues[key]
		if q == nil {
			q = newQueue(key, l)
			n.queues[key] = q
			go q.run(n.ctx, n)
		}
		q.limiter.SetLimit(rate.Limit(float64(l.PerMinute) / 60))
		q.limiter.SetBurst(int(l.Burst))
		if old := ns.channels[chName]; old == nil || old.Generation != ch.Generation {
			n.forgiveLocked(name, chName)
		}
	}
	ns.policies, ns.channels, ns.senders = policies, channels, senders

	var agents []string
	all := false
	for _, p := range policies {
		if len(p.Spec.Selector.Agents) == 0 {
			all = true
		}
		agents = append(agents, p.Spec.Selector.Agents...)
	}
	slices.Sort(agents)
	agents = slices.Compact(agents)
	if all {
		agents = nil
	}
	watching := ns.stopWatch != nil
	if len(policies) == 0 || !watching || all != ns.all || !slices.Equal(agents, ns.agents) {
		if watching {
			ns.stopWatch()
			ns.stopWatch = nil
		}
		if len(policies) > 0 {
			ctx, cancel := context.WithCancel(n.ctx)
			ns.stopWatch, ns.agents, ns.all = cancel, agents, all
			go n.watch(ctx, name, agents)
		} else {
			delete(n.namespaces, name)
		}
	}
	for qname := range ns.questions {
		n.plan.Add(types.NamespacedName{Namespace: name, Name: qname})
	}
}

// forgiveLocked lets the notifications given up on for a channel be tried
// again, after the channel changed.
func (n *Notifier) forgiveLocked(namespace, channelName string) {
	for k := range n.givenUp {
		if _, ns, ch, _ := splitKey(k); ns == namespace && ch == channelName {
			delete(n.givenUp, k)
		}
	}
}

// watch follows the questions of agents (every agent when nil) in a
// namespace through an Answerer until ctx ends, starting again when the
// watch cannot start (RBAC, an outage).
func (n *Notifier) watch(ctx context.Context, name string, agents []string) {
	a := answerer.New(n.watcher, name, "hitl-notify", agents...)
	a.Clock = n.opts.Clock
	for ctx.Err() == nil {
		evs, err := a.Watch(ctx)
		if err != nil {
			n.log.Error(err, "Cannot watch the questions", "namespace", name, "agents", agents)
			select {
			case <-ctx.Done():
			case <-n.opts.Clock.After(5 * time.Second):
			}
			continue
		}
		for ev := range evs {
			n.observe(name, ev)
		}
	}
}

// observe notes a change of a question and plans it.
func (n *Notifier) observe(name string, ev answerer.Event) {
	q := ev.Question
	n.mu.Lock()
	ns := n.namespaces[name]
	if ns == nil {
		n.mu.Unlock()
		return
	}
	if ev.Type == watch.Deleted {
		if old := ns.questions[q.Name]; old != nil && old.UID == q.UID {
			delete(ns.questions, q.Name)
			delete(n.sent, q.UID)
		}
	} else {
		if old := ns.questions[q.Name]; old == nil || old.UID != q.UID {
			n.hold.arrived(n.opts.Clock.Now())
		}
		ns.questions[q.Name] = q
	}
	n.mu.Unlock()
	n.plan.Add(types.NamespacedName{Namespace: name, Name: q.Name})
}

// planNext plans one question: it queues what is due on the channels'
// queues and plans the question again when the next notification falls
// due. It returns false once the queue is shut down.
func (n *Notifier) planNext() bool {
	key, shutdown := n.plan.Get()
	if shutdown {
		return false
	}
	defer n.plan.Done(key)
	now := n.opts.Clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	q, policies, ns := n.questionLocked(key)
	if q == nil {
		return true
	}
	due, next := Plan(q, policies, n.recordLocked(q), now)
	for _, d := range due {
		k := dueKey(q, d)
		if n.pending[k] || n.givenUp[k] || ns.senders[d.Channel] == nil {
			continue
		}
		n.pending[k] = true
		n.queues[types.NamespacedName{Namespace: q.Namespace, Name: d.Channel}].push(d, key, q.UID)
	}
	if !next.IsZero() {
		n.plan.AddAfter(key, next.Sub(now))
	}
	return true
}

// questionLocked is the question of key as last seen, the policies of its
// namespace that select it, and its namespace; nil when there is none.
func (n *Notifier) questionLocked(key types.NamespacedName) (*hitlv1.UserQuestion, []*hitlv1.NotificationPolicy, *namespace) {
	ns := n.namespaces[key.Namespace]
	if ns == nil {
		return nil, nil, nil
	}
	q := ns.questions[key.Name]
	if q == nil {
		return nil, nil, nil
	}
	var selecting []*hitlv1.NotificationPolicy
	for _, p := range ns.policies {
		if p.Selects(q, q.Labels) {
			selecting = append(selecting, p)
		}
	}
	return q, selecting, ns
}

// recordLocked is what was sent about q: its annotation and what this
// process sent since.
func (n *Notifier) recordLocked(q *hitlv1.UserQuestion) Record {
	r := RecordOf(q)
	r.Merge(n.sent[q.UID])
	return r
}

// dueKey identifies a notification among those queued: the question's
// UID, its namespace, the channel and the event's key.
func dueKey(q *hitlv1.UserQuestion, d Due) string {
	return string(q.UID) + "\x00" + q.Namespace + "\x00" + d.Channel + "\x00" + d.Key
}

func splitKey(k string) (uid, namespace, channelName, key string) {
	p := append(strings.SplitN(k, "\x00", 4), "", "", "", "")
	return p[0], p[1], p[2], p[3]
}

// deliver sends one queued notification: if it is still due (the question
// may have moved on while it waited), through the channel's sender with
// retries; then counts it, and queues its question for the record, then
// to be told of in an Event: at once or, while questions keep arriving,
// once they stop (recorder.go).
func (n *Notifier) deliver(ctx context.Context, it item) {
	n.mu.Lock()
	q, policies, ns := n.questionLocked(it.question)
	k := ""
	if q != nil {
		k = dueKey(q, it.due)
	}
	var sender channel.Sender
	var typ hitlv1.ChannelType
	stillDue := false
	if q != nil && q.UID == it.uid {
		due, _ := Plan(q, policies, n.recordLocked(q), n.opts.Clock.Now())
		stillDue = slices.ContainsFunc(due, func(d Due) bool { return d.Key == it.due.Key && d.Channel == it.due.Channel })
		sender = ns.senders[it.due.Channel]
		if ch := ns.channels[it.due.Channel]; ch != nil {
			typ = ch.Spec.Type()
		}
	}
	if !stillDue || sender == nil {
		if k != "" {
			delete(n.pending, k)
		}
		n.mu.Unlock()
		return
	}
	q = q.DeepCopy()
	n.mu.Unlock()

	d := it.due
	id := fmt.Sprintf("%s/%s/%s", q.UID, d.Key, d.Channel)
	m := channel.NewMessage(q, d.Event, id, d.At, n.opts.InboxURL)
	m.Reminder, m.Escalation, m.Quorum = d.Reminder, d.Escalation, d.Quorum
	log := n.log.WithValues("question", client.ObjectKeyFromObject(q), "event", d.Event, "key", d.Key, "channel", d.Channel)
	err := n.opts.Retry.Do(ctx, func(ctx context.Context) error { return sender.Send(ctx, m) }, func(attempt int, err error) {
		retriedTotal.WithLabelValues(string(typ)).Inc()
		log.Info("Sending again after a transient failure", "attempt", attempt, "error", err.Error())
	})
	if err != nil && ctx.Err() != nil {
		return // stopping: what was not sent is the next leader's
	}
	if err != nil {
		failedTotal.WithLabelValues(string(typ), string(d.Event)).Inc()
		log.Error(err, "Giving up on a notification")
		n.events.Eventf(q, nil, corev1.EventTypeWarning, "NotificationFailed", "Notify",
			"%s notification to channel %s failed: %v", d.Event, d.Channel, err)
		n.mu.Lock()
		delete(n.pending, k)
		n.givenUp[k] = true
		n.mu.Unlock()
		return
	}
	sentTotal.WithLabelValues(string(typ), string(d.Event)).Inc()
	deliverySeconds.WithLabelValues(string(typ)).Observe(max(0, n.opts.Clock.Since(d.At).Seconds()))
	n.mu.Lock()
	r := n.sent[q.UID]
	if r == nil {
		r = Record{}
		n.sent[q.UID] = r
	}
	r.Add(d.Channel, d.Key)
	delete(n.pending, k)
	// The Event names the question as it was when sent, without keeping
	// the whole of it while it is held back.
	var regarding runtime.Object = q
	if ref, err := reference.GetReference(n.scheme, q); err == nil {
		regarding = ref
	}
	rk := recordKey{it.question, q.UID}
	held := n.sentLocked(rk, sentEvent{regarding: regarding, event: d.Event, channel: d.Channel})
	n.mu.Unlock()
	if !held {
		n.records.Add(rk)
	}
}

// item is a notification in a channel's queue.
type item struct {
	due      Due
	question types.NamespacedName
	uid      types.UID
}

// sendsInFlight is how many notifications a channel's queue sends at once:
// a few, so that a burst of questions asked together is not sent one
// round trip after another, and never two of one question.
const sendsInFlight = 4

// queue is one channel's deliveries, sent in order at the channel's rate,
// up to sendsInFlight at once, one question's one at a time: a question's
// next notification starts once its last one was delivered or given up
// on, so its notifications arrive in the order they fell due.
type queue struct {
	key     types.NamespacedName
	limiter *rate.Limiter

	mu    sync.Mutex
	items []item
	// busy holds the questions (by UID) with a notification being sent.
	busy map[types.UID]bool
	wake chan struct{}
}

// newQueue makes the queue of a channel limited to l. Its limiter starts
// full, with l's whole burst: a channel new to the notifier (or a notifier
// just started) comes after a quiet time.
func newQueue(key types.NamespacedName, l hitlv1.RateLimit) *queue {
	return &queue{key: key, limiter: rate.NewLimiter(rate.Limit(float64(l.PerMinute)/60), int(l.Burst)),
		busy: map[types.UID]bool{}, wake: make(chan struct{}, 1)}
}

func (q *queue) push(d Due, question types.NamespacedName, uid types.UID) {
	q.mu.Lock()
	q.items = append(q.items, item{due: d, question: question, uid: uid})
	q.mu.Unlock()
	q.signal()
}

// signal wakes run, if it waits for an item.
func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next waits for the first item whose question has no notification being
// sent, takes it out of the queue and marks its question busy; false when
// ctx ended first.
func (q *queue) next(ctx context.Context) (item, bool) {
	for {
		q.mu.Lock()
		for i, it := range q.items {
			if q.busy[it.uid] {
				continue
			}
			if i == 0 {
				q.items[0] = item{}
				q.items = q.items[1:]
			} else {
				q.items = slices.Delete(q.items, i, i+1)
			}
			q.busy[it.uid] = true
			q.mu.Unlock()
			return it, true
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return item{}, false
		case <-q.wake:
		}
	}
}

// done lets the question of it send its next notification.
func (q *queue) done(it item) {
	q.mu.Lock()
	delete(q.busy, it.uid)
	q.mu.Unlock()
	q.signal()
}

// run delivers the queue's items until ctx ends, each once the channel's
// rate allows, up to sendsInFlight at once.
func (q *queue) run(ctx context.Context, n *Notifier) {
	slots := make(chan struct{}, sendsInFlight)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		it, ok := q.next(ctx)
		if !ok {
			return
		}
		if err := q.limiter.Wait(ctx); err != nil {
			return
		}
		go func() {
			defer func() {
				q.done(it)
				<-slots
			}()
			n.deliver(ctx, it)
		}()
	}
}
