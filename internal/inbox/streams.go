package inbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// errTooManyStreams refuses a person's event stream past Options.MaxStreams.
var errTooManyStreams = errors.New("too many live streams")

// streams counts the live event streams of each person and lets the
// streams of one identity share one informer per namespace, started by
// the first stream and stopped when the last one ends.
//
// An informer lists and watches as the identity it was started for (the
// person, through impersonation), so a stream sees what RBAC lets its
// person list and no more: sharing stops at the identity (username and
// groups). Two tabs of alice share her watches; bob's stream never reads
// from them.
type streams struct {
	// ctx stops every informer (Server.Close).
	ctx context.Context
	// max bounds the live streams of one username.
	max int
	// selector selects the questions of the server's agents; a stream
	// narrows them further itself.
	selector labels.Selector
	log      logr.Logger

	mu   sync.Mutex
	open map[string]int
	// informers are the informers streams join; running counts those
	// that run, with the ones a fresh informer replaced.
	informers map[informerKey]*sharedInformer
	running   int
}

// informerKey names a shared informer: whose identity it acts as, and the
// namespace it watches ("" for all).
type informerKey struct{ identity, namespace string }

// sharedInformer is an informer and the streams that read from it.
type sharedInformer struct {
	key      informerKey
	informer toolscache.SharedIndexInformer
	stop     context.CancelFunc
	// streams counts the subscriptions; guarded by streams.mu.
	streams int

	mu sync.Mutex
	// problems are the subscribed streams' channels for watch errors.
	problems map[chan string]struct{}
	// problem is the last watch error, told to a stream that subscribes
	// before the informer has synced (a refused list is retried with a
	// backoff, so the next error may be long in coming).
	problem string
}

func newStreams(ctx context.Context, maxPerPerson int, selector labels.Selector, log logr.Logger) *streams {
	return &streams{ctx: ctx, max: maxPerPerson, selector: selector, log: log,
		open: map[string]int{}, informers: map[informerKey]*sharedInformer{}}
}

// subscription is one stream's share of the informers it reads from.
type subscription struct {
	streams  *streams
	user     string
	shared   []*sharedInformer
	regs     []toolscache.ResourceEventHandlerRegistration
	problems chan string
}

// subscribe counts a stream of p against p's limit and subscribes it to
// the informers of p's identity over namespaces, starting with c (which
// acts as p) those that do not run yet; h receives their changes. close
// undoes it.
//
// A running informer is joined only if p may list its namespace now (one
// list of at most one question, as p): its cache holds what p could list
// when it started, and a stream must show no more than its own list would,
// were p's rights revoked since. Otherwise the stream starts a fresh
// informer, which fails (and says why) or lists what p may list now; later
// streams join that one.
func (st *streams) subscribe(ctx context.Context, p Person, c client.WithWatch, namespaces []string, h toolscache.ResourceEventHandler) (*subscription, error) {
	identity := p.identity()
	st.mu.Lock()
	if st.open[p.Username] >= st.max {
		st.mu.Unlock()
		return nil, errTooManyStreams
	}
	st.open[p.Username]++
	var running []string
	for _, ns := range namespaces {
		if st.informers[informerKey{identity, ns}] != nil {
			running = append(running, ns)
		}
	}
	st.mu.Unlock()
	sub := &subscription{streams: st, user: p.Username, problems: make(chan string, 8)}
	refused := map[string]bool{}
	for _, ns := range running {
		refused[ns] = st.mayList(ctx, c, ns) != nil
		if ctx.Err() != nil { // the stream is gone: start nothing for it
			sub.close()
			return nil, ctx.Err()
		}
	}

	st.mu.Lock()
	for _, ns := range namespaces {
		k := informerKey{identity: identity, namespace: ns}
		si := st.informers[k]
		// One not running at the check was started since by another
		// stream of p: its list is as recent as a check.
		if si == nil || refused[ns] {
			si = st.start(k, p.Username, c)
			st.informers[k] = si
		}
		si.streams++
		si.subscribe(sub.problems)
		sub.shared = append(sub.shared, si)
	}
	st.mu.Unlock()
	// The count keeps the informers running; adding a handler replays
	// their stores, so it is done without holding up other streams.
	for _, si := range sub.shared {
		reg, err := si.informer.AddEventHandler(h)
		if err != nil {
			sub.close()
			return nil, fmt.Errorf("following the questions of %s: %w", where(si.key.namespace), err)
		}
		sub.regs = append(sub.regs, reg)
	}
	return sub, nil
}

// mayList lists, with c, at most one question of namespace that the
// server's informers would list: whether c's identity may list them now.
func (st *streams) mayList(ctx context.Context, c client.WithWatch, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.List(ctx, &hitlv1.UserQuestionList{}, client.InNamespace(namespace),
		client.MatchingLabelsSelector{Selector: st.selector}, client.Limit(1))
}

// start runs an informer over the questions of k's namespace that the
// server's agents asked, acting with c.
func (st *streams) start(k informerKey, user string, c client.WithWatch) *sharedInformer {
	ctx, stop := context.WithCancel(st.ctx)
	st.running++
	si := &sharedInformer{key: k, informer: newInformer(c, k.namespace, st.selector), stop: stop, problems: map[chan string]struct{}{}}
	// Cards never show managedFields, often the bulk of an object.
	_ = si.informer.SetTransform(func(obj any) (any, error) {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetManagedFields(nil)
		}
		return obj, nil
	})
	_ = si.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		si.report(fmt.Sprintf("cannot watch the questions of %s: %v", where(k.namespace), err))
	})
	st.log.V(1).Info("Watching questions", "namespace", k.namespace, "user", user)
	go si.informer.RunWithContext(ctx)
	return si
}

// close ends a subscription: the last stream of an informer stops it.
func (sub *subscription) close() {
	for i, reg := range sub.regs {
		_ = sub.shared[i].informer.RemoveEventHandler(reg)
	}
	st := sub.streams
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.open[sub.user]--; st.open[sub.user] <= 0 {
		delete(st.open, sub.user)
	}
	for _, si := range sub.shared {
		si.unsubscribe(sub.problems)
		if si.streams--; si.streams == 0 {
			if st.informers[si.key] == si { // not replaced by a fresh one
				delete(st.informers, si.key)
			}
			si.stop()
			st.running--
			st.log.V(1).Info("Stopped watching questions", "namespace", si.key.namespace)
		}
	}
}

// synced reports whether every informer of the subscription has listed
// and handed its list to the stream.
func (sub *subscription) synced() bool {
	return len(sub.regs) == len(sub.shared) && !slices.ContainsFunc(sub.regs, func(r toolscache.ResourceEventHandlerRegistration) bool { return !r.HasSynced() })
}

// list is every question the subscription's informers hold.
func (sub *subscription) list() []*hitlv1.UserQuestion {
	var out []*hitlv1.UserQuestion
	for _, si := range sub.shared {
		for _, obj := range si.informer.GetStore().List() {
			if q, ok := obj.(*hitlv1.UserQuestion); ok {
				out = append(out, q)
			}
		}
	}
	return out
}

// count is how many informers run and how many streams are open.
func (st *streams) count() (informers, streams int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, n := range st.open {
		streams += n
	}
	return st.running, streams
}

func (si *sharedInformer) subscribe(problems chan string) {
	si.mu.Lock()
	defer si.mu.Unlock()
	si.problems[problems] = struct{}{}
	if si.problem != "" && !si.informer.HasSynced() {
		select {
		case problems <- si.problem:
		default:
		}
	}
}

func (si *sharedInformer) unsubscribe(problems chan string) {
	si.mu.Lock()
	defer si.mu.Unlock()
	delete(si.problems, problems)
}

// report tells every subscribed stream of a watch error.
func (si *sharedInformer) report(problem string) {
	si.mu.Lock()
	defer si.mu.Unlock()
	si.problem = problem
	for ch := range si.problems {
		select {
		case ch <- problem:
		default: // the stream has not yet told the last ones
		}
	}
}

// newInformer watches, as c's identity, the questions of namespace ("" for
// all) that sel selects; client-go's reflector lists, watches, resumes and
// lists again after an expired watch.
func newInformer(c client.WithWatch, namespace string, sel labels.Selector) toolscache.SharedIndexInformer {
	opts := func(raw metav1.ListOptions) []client.ListOption {
		return []client.ListOption{client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel},
			&client.ListOptions{Raw: &raw}}
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list := &hitlv1.UserQuestionList{}
			return list, c.List(ctx, list, opts(o)...)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, &hitlv1.UserQuestionList{}, opts(o)...)
		},
	}
	return toolscache.NewSharedIndexInformerWithOptions(lw, &hitlv1.UserQuestion{}, toolscache.SharedIndexInformerOptions{})
}

// where names a namespace ("" for all) in a message.
func where(namespace string) string {
	if namespace == "" {
		return "all namespaces"
	}
	return "namespace " + namespace
}
