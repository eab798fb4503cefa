package rewatch

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// scripted is an API server that answers lists and watches as a test
// says, in turn; once the script is used up its last answer repeats.
type scripted struct {
	mu          sync.Mutex
	lists       []listAnswer
	watches     []watchAnswer
	listCalls   []metav1.ListOptions
	watchCalls  []metav1.ListOptions
	watchCalled chan struct{}
}

type listAnswer struct {
	items []corev1.ConfigMap
	rv    string
	err   error
}

type watchAnswer struct {
	w   *watch.FakeWatcher
	err error
}

func newScripted() *scripted { return &scripted{watchCalled: make(chan struct{}, 100)} }

func (s *scripted) IsWatchListSemanticsUnSupported() bool { return true }

func (s *scripted) List(opts metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listCalls = append(s.listCalls, opts)
	a := s.lists[0]
	if len(s.lists) > 1 {
		s.lists = s.lists[1:]
	}
	if a.err != nil {
		return nil, a.err
	}
	return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: a.rv}, Items: a.items}, nil
}

func (s *scripted) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchCalls = append(s.watchCalls, opts)
	defer func() { s.watchCalled <- struct{}{} }()
	a := s.watches[0]
	if len(s.watches) > 1 {
		s.watches = s.watches[1:]
	}
	if a.err != nil {
		return nil, a.err
	}
	return a.w, nil
}

func (s *scripted) watchVersions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, o := range s.watchCalls {
		out = append(out, o.ResourceVersion)
	}
	return out
}

func cm(name, rv string) corev1.ConfigMap {
	return corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv, Labels: map[string]string{"app": name}}}
}

func fake() *watch.FakeWatcher { return watch.NewFakeWithChanSize(16, false) }

var refused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

// informer runs a shared informer over a ListWatch of api, and records
// what its Reflector was told of failures and what its handlers saw
// deleted.
type informer struct {
	t       *testing.T
	inf     toolscache.SharedIndexInformer
	mu      sync.Mutex
	errs    []error
	deleted []*corev1.ConfigMap
	updated []string
}

func run(t *testing.T, api *scripted) *informer {
	t.Helper()
	lw := Wrap(api, &corev1.ConfigMap{})
	lw.retry.Duration, lw.retry.Cap = time.Millisecond, 5*time.Millisecond
	inf := toolscache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	lw.SetStore(inf.GetStore())
	i := &informer{t: t, inf: inf}
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		i.mu.Lock()
		defer i.mu.Unlock()
		i.errs = append(i.errs, err)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
		i.mu.Lock()
		defer i.mu.Unlock()
		i.updated = append(i.updated, obj.(*corev1.ConfigMap).Name)
	}, DeleteFunc: func(obj any) {
		i.mu.Lock()
		defer i.mu.Unlock()
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			// What a Reflector's own list after an outage delivers.
			obj = d.Obj
		}
		i.deleted = append(i.deleted, obj.(*corev1.ConfigMap))
	}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer never synced")
	}
	return i
}

// holds waits until the informer's store holds exactly want (name:rv).
func (i *informer) holds(want ...string) {
	i.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var got []string
		for _, o := range i.inf.GetStore().List() {
			c := o.(*corev1.ConfigMap)
			got = append(got, c.Name+":"+c.ResourceVersion)
		}
		if sameSet(got, want) {
			return
		}
		if time.Now().After(deadline) {
			i.t.Fatalf("the store holds %v, want %v", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (i *informer) reflectorErrors() []error {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]error(nil), i.errs...)
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		if m[x] == 0 {
			return false
		}
		m[x]--
	}
	return true
}

func waitCalls(t *testing.T, api *scripted, n int) {
	t.Helper()
	for range n {
		select {
		case <-api.watchCalled:
		case <-time.After(5 * time.Second):
			t.Fatalf("watch called %d times, want %d", len(api.watchVersions()), n)
		}
	}
}

func TestAWatchAnOutageBrokeResumesFromItsLastVersion(t *testing.T) {
	first, second := fake(), fake()
	api := newScripted()
	api.lists = []listAnswer{{items: []corev1.ConfigMap{cm("a", "10")}, rv: "10"}}
	// The API server goes: the watch is cut, and two attempts are refused.
	api.watches = []watchAnswer{{w: first}, {err: refused}, {err: apierrors.NewServiceUnavailable("starting")}, {w: second}}
	i := run(t, api)
	waitCalls(t, api, 1)
	b := cm("b", "11")
	first.Add(&b)
	first.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError,
		Message: "unable to decode an event from the watch stream: unexpected EOF"})
	waitCalls(t, api, 3)
	a := cm("a", "12")
	second.Modify(&a)
	i.holds("a:12", "b:11")
	if got := api.watchVersions(); len(got) != 4 || got[1] != "11" || got[2] != "11" || got[3] != "11" {
		t.Fatalf("watches opened at versions %v, want 10 then 11 three times", got)
	}
	if errs := i.reflectorErrors(); len(errs) != 0 {
		t.Fatalf("the Reflector was told of failures %v; it waits after each", errs)
	}
}

func TestAnExpiredVersionListsAndDeliversTheDifference(t *testing.T) {
	first, second := fake(), fake()
	api := newScripted()
	api.lists = []listAnswer{
		{items: []corev1.ConfigMap{cm("a", "10"), cm("b", "10"), cm("e", "9")}, rv: "10"},
		// The restarted API server fails a first list, then has a changed,
		// c new, b gone and e as it was.
		{err: apierrors.NewTooManyRequests("the watch cache is starting", 1)},
		{items: []corev1.ConfigMap{cm("a", "15"), cm("c", "18"), cm("e", "9")}, rv: "20"},
	}
	api.watches = []watchAnswer{{w: first}, {err: refused}, {err: apierrors.NewResourceExpired("too old resource version: 10 (18)")}, {w: second}}
	i := run(t, api)
	waitCalls(t, api, 1)
	first.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError, Message: "stream error"})
	i.holds("a:15", "c:18", "e:9")
	waitCalls(t, api, 3)
	d := cm("d", "21")
	second.Add(&d)
	i.holds("a:15", "c:18", "d:21", "e:9")
	if got := api.watchVersions(); got[len(got)-1] != "20" {
		t.Fatalf("watches opened at %v, want the last from the list's version 20", got)
	}
	if errs := i.reflectorErrors(); len(errs) != 0 {
		t.Fatalf("the Reflector was told of failures %v", errs)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if len(i.deleted) != 1 || i.deleted[0].Name != "b" || i.deleted[0].Labels["app"] != "b" {
		t.Fatalf("deleted %v, want b with its last known labels", i.deleted)
	}
	if fmt.Sprint(i.updated) != "[a]" {
		t.Fatalf("updates %v, want a's alone (e did not change)", i.updated)
	}
}

func TestAnExpiredWatchOpenedAfterAnOutageLists(t *testing.T) {
	// The API server answers the reopened watch with a 410 event rather
	// than refusing to open it.
	first, second, third := fake(), fake(), fake()
	api := newScripted()
	api.lists = []listAnswer{
		{items: []corev1.ConfigMap{cm("a", "10")}, rv: "10"},
		{items: []corev1.ConfigMap{cm("a", "30")}, rv: "31"},
	}
	api.watches = []watchAnswer{{w: first}, {w: second}, {w: third}}
	i := run(t, api)
	waitCalls(t, api, 1)
	first.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 503, Reason: metav1.StatusReasonServiceUnavailable})
	waitCalls(t, api, 1)
	second.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"})
	i.holds("a:30")
	waitCalls(t, api, 1)
	if got := api.watchVersions(); fmt.Sprint(got) != "[10 10 31]" {
		t.Fatalf("watches opened at %v, want [10 10 31]", got)
	}
	if errs := i.reflectorErrors(); len(errs) != 0 {
		t.Fatalf("the Reflector was told of failures %v", errs)
	}
}

func TestARefusalReachesTheReflector(t *testing.T) {
	api := newScripted()
	api.lists = []listAnswer{{rv: "10"}}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", fmt.Errorf("no"))
	api.watches = []watchAnswer{{err: forbidden}}
	lw := Wrap(api, &corev1.ConfigMap{})
	start := time.Now()
	_, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "10"})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("got %v, want the refusal", err)
	}
	if calls := len(api.watchVersions()); calls != 1 {
		t.Fatalf("a refusal was tried %d times", calls)
	}
	if time.Since(start) > time.Second {
		t.Fatal("a refusal waited")
	}
}

func TestARefusalJustAfterAnOutageIsTheAPIServerStarting(t *testing.T) {
	w := fake()
	api := newScripted()
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", fmt.Errorf("RBAC: not ready"))
	api.lists = []listAnswer{{rv: "10"}}
	api.watches = []watchAnswer{{err: refused}, {err: forbidden}, {err: forbidden}, {w: w}}
	lw, got := listThenWatch(t, api)
	got.Stop()
	if calls := len(api.watchVersions()); calls != 4 {
		t.Fatalf("%d attempts, want 4", calls)
	}
	// Answered: the next refusal is a refusal again.
	api.watches = []watchAnswer{{err: forbidden}}
	if _, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "10"}); !apierrors.IsForbidden(err) {
		t.Fatalf("got %v after the API server answered, want the refusal", err)
	}
}

func TestAnOutageLongerThanThePatienceReachesTheReflector(t *testing.T) {
	api := newScripted()
	api.lists = []listAnswer{{rv: "10"}}
	api.watches = []watchAnswer{{err: refused}}
	lw := Wrap(api, &corev1.ConfigMap{})
	lw.retry.Duration, lw.retry.Cap, lw.patience = time.Millisecond, 5*time.Millisecond, 100*time.Millisecond
	if _, err := lw.List(metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "10"}); err == nil {
		t.Fatal("an endless outage was hidden")
	}
	if calls := len(api.watchVersions()); calls < 5 {
		t.Fatalf("tried %d times in the patience, want several", calls)
	}
}

// watchList opens a stream that starts with every object, as a
// Reflector's watch-list does, through a ListWatch of api.
func watchList(t *testing.T, api *scripted) watch.Interface {
	t.Helper()
	got, err := Wrap(api, &corev1.ConfigMap{}).WatchWithContext(context.Background(),
		metav1.ListOptions{SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(got.Stop)
	return got
}

// cut ends w as an outage does: an internal error event.
func cut(w *watch.FakeWatcher) {
	w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError})
}

func TestAnOutageDuringTheInitialEventsEndsTheStream(t *testing.T) {
	// A watch-list: the Reflector replaces its store only at the end of
	// the initial events, so a stream cut before then is its to restart.
	w := fake()
	api := newScripted()
	api.watches = []watchAnswer{{w: w}}
	got := watchList(t, api)
	a := cm("a", "10")
	w.Add(&a)
	cut(w)
	var types []watch.EventType
	for ev := range got.ResultChan() {
		types = append(types, ev.Type)
	}
	if fmt.Sprint(types) != "[ADDED ERROR]" {
		t.Fatalf("events %v, want the added object then the error", types)
	}
	if calls := len(api.watchVersions()); calls != 1 {
		t.Fatalf("%d watches opened, want 1", calls)
	}
}

func TestAnOutageAfterTheInitialEventsIsResumed(t *testing.T) {
	first, second := fake(), fake()
	api := newScripted()
	api.watches = []watchAnswer{{w: first}, {w: second}}
	got := watchList(t, api)
	a := cm("a", "10")
	first.Add(&a)
	first.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "12",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	cut(first)
	b := cm("b", "13")
	second.Add(&b)
	var seen []string
	for ev := range got.ResultChan() {
		seen = append(seen, string(ev.Type))
		if ev.Type == watch.Added && ev.Object.(*corev1.ConfigMap).Name == "b" {
			break
		}
	}
	if fmt.Sprint(seen) != "[ADDED BOOKMARK ADDED]" {
		t.Fatalf("events %v", seen)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if o := api.watchCalls[1]; o.ResourceVersion != "12" || o.SendInitialEvents != nil || o.ResourceVersionMatch != "" {
		t.Fatalf("resumed with %+v, want a plain watch from 12", o)
	}
}

func TestStopEndsTheStream(t *testing.T) {
	w := fake()
	api := newScripted()
	api.watches = []watchAnswer{{w: w}}
	got, err := Wrap(api, &corev1.ConfigMap{}).WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	got.Stop()
	select {
	case _, ok := <-got.ResultChan():
		if ok {
			t.Fatal("an event after Stop")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream stayed open after Stop")
	}
	if !w.IsStopped() {
		t.Fatal("the API server's watch was left open")
	}
}

func TestAnAPIServerNeverReachedIsTheCallersToSee(t *testing.T) {
	api := newScripted()
	api.lists = []listAnswer{{err: refused}}
	lw := Wrap(api, &corev1.ConfigMap{})
	if _, err := lw.List(metav1.ListOptions{}); err == nil {
		t.Fatal("no error")
	}
	if calls := len(api.listCalls); calls != 1 {
		t.Fatalf("tried %d times before the API server ever answered, want once", calls)
	}
}

func TestAWatchThatEndsWithoutAWordIsOpenedAgainHere(t *testing.T) {
	// A killed API server drops the connection: the watch just ends. Left
	// to the Reflector, a watch that ended within a second of opening made
	// it wait, and the next attempts failed while the API server was down.
	first, second := fake(), fake()
	api := newScripted()
	api.lists = []listAnswer{{rv: "10"}}
	api.watches = []watchAnswer{{w: first}, {err: refused}, {w: second}}
	_, got := listThenWatch(t, api)
	defer got.Stop()
	a := cm("a", "11")
	first.Add(&a)
	first.Stop()
	b := cm("b", "12")
	second.Add(&b)
	var names []string
	for ev := range got.ResultChan() {
		names = append(names, ev.Object.(*corev1.ConfigMap).Name)
		if len(names) == 2 {
			break
		}
	}
	if fmt.Sprint(names) != "[a b]" {
		t.Fatalf("delivered %v, want a then b on one stream", names)
	}
	if got := api.watchVersions(); fmt.Sprint(got) != "[10 11 11]" {
		t.Fatalf("watches opened at %v, want 10, then 11 until the API server answered", got)
	}
}

// listThenWatch wraps api with retries a millisecond apart, lists (at
// resourceVersion 10, as the tests script it) and opens a watch from there.
func listThenWatch(t *testing.T, api *scripted) (*ListWatch, watch.Interface) {
	t.Helper()
	lw := Wrap(api, &corev1.ConfigMap{})
	lw.retry.Duration, lw.retry.Cap = time.Millisecond, time.Millisecond
	if _, err := lw.List(metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	return lw, got
}
