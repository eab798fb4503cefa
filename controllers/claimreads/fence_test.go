package claimreads

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// informerStub hands the fence's handler to the test, which delivers the
// cache's events itself.
type informerStub struct {
	handler toolscache.ResourceEventHandler
}

func (i *informerStub) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	i.handler = h
	return nil, nil
}

// cacheStub is the manager's cache: it records whether the fence's write
// had reached it when the read listed the claims.
type cacheStub struct {
	client.Reader
	delivered   *atomic.Bool
	listedEarly atomic.Bool
	claims      []hitlv1.QuestionClaim
}

func (c *cacheStub) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if !c.delivered.Load() {
		c.listedEarly.Store(true)
	}
	list.(*hitlv1.QuestionClaimList).Items = append([]hitlv1.QuestionClaim(nil), c.claims...)
	return nil
}

func TestFenceReadWaitsUntilTheCacheHasSeenItsWrite(t *testing.T) {
	// The fake keeps a resourceVersion per object; the API server's are
	// one sequence. Objects far apart in it stand for that: the first read
	// creates the first fence object, the next ones renew theirs.
	var existing []client.Object
	for i, name := range FenceNames[1:3] {
		existing = append(existing, &hitlv1.QuestionClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "hitl-system", Name: name, ResourceVersion: strconv.Itoa(1000 * (i + 1))},
			Spec: hitlv1.QuestionClaimSpec{QuestionRef: hitlv1.QuestionReference{Name: FenceName}, Agent: FenceName}})
	}
	writer := fake.NewClientBuilder().WithScheme(hitlv1.NewScheme()).WithObjects(existing...).Build()
	var delivered atomic.Bool
	fenceClaim := hitlv1.QuestionClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "hitl-system", Name: FenceName}, Spec: hitlv1.QuestionClaimSpec{QuestionRef: hitlv1.QuestionReference{Name: FenceName}}}
	other := hitlv1.QuestionClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "c"}, Spec: hitlv1.QuestionClaimSpec{QuestionRef: hitlv1.QuestionReference{Name: "q"}}}
	cache := &cacheStub{delivered: &delivered, claims: []hitlv1.QuestionClaim{fenceClaim, other}}
	informer := &informerStub{}
	f, err := NewFence(writer, cache, informer, "hitl-system")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for round := range 3 {
		type result struct {
			claims []hitlv1.QuestionClaim
			err    error
		}
		done := make(chan result, 1)
		go func() {
			claims, err := f.read(ctx)
			done <- result{claims, err}
		}()
		// The write reaches the API server; the cache is slow to see it.
		written := newestFence(t, writer, fenceClaim.ResourceVersion)
		if written.Name != FenceNames[round] {
			t.Fatalf("round %d: the fence wrote %s, want %s: each read takes the object written longest ago", round, written.Name, FenceNames[round])
		}
		select {
		case r := <-done:
			t.Fatalf("round %d: the read returned (%v) before the cache saw the fence", round, r.err)
		case <-time.After(50 * time.Millisecond):
		}
		// An older event of the fence does not end the wait.
		stale := written.DeepCopy()
		rv, _ := strconv.ParseUint(written.ResourceVersion, 10, 64)
		stale.ResourceVersion = strconv.FormatUint(rv-1, 10)
		informer.handler.OnUpdate(nil, stale)
		select {
		case r := <-done:
			t.Fatalf("round %d: the read returned (%v) on an older version of the fence", round, r.err)
		case <-time.After(20 * time.Millisecond):
		}
		delivered.Store(true)
		informer.handler.OnUpdate(nil, written.DeepCopy())
		r := <-done
		if r.err != nil {
			t.Fatalf("round %d: %v", round, r.err)
		}
		if cache.listedEarly.Load() {
			t.Fatalf("round %d: the cache was read before it saw the fence", round)
		}
		if len(r.claims) != 1 || r.claims[0].Name != "c" {
			t.Fatalf("round %d: claims = %v, want the other claim alone (the fence claims nothing)", round, r.claims)
		}
		delivered.Store(false)
		fenceClaim = written
	}
}

// newestFence waits until a fence object newer than resourceVersion is
// written and returns it.
func newestFence(t *testing.T, writer client.Client, resourceVersion string) hitlv1.QuestionClaim {
	t.Helper()
	after, _ := strconv.ParseUint(resourceVersion, 10, 64) // "" for none yet
	deadline := time.Now().Add(5 * time.Second)
	for {
		var list hitlv1.QuestionClaimList
		if err := writer.List(context.Background(), &list, client.InNamespace("hitl-system")); err != nil {
			t.Fatal(err)
		}
		for _, c := range list.Items {
			if rv, _ := strconv.ParseUint(c.ResourceVersion, 10, 64); rv > after && c.Spec.RenewTime != nil {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fence was written after resourceVersion %q", resourceVersion)
		}
		time.Sleep(time.Millisecond)
	}
}

// Reads in flight together write different fence objects, so that they do
// not contend for one; the cache's seeing the newest write ends them all.
func TestReadsInFlightTogetherWriteDifferentFences(t *testing.T) {
	var mu sync.Mutex
	patched := map[string]int{}
	writer := interceptor.NewClient(fake.NewClientBuilder().WithScheme(hitlv1.NewScheme()).Build(), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			mu.Lock()
			patched[obj.GetName()]++
			mu.Unlock()
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	var delivered atomic.Bool
	cache := &cacheStub{delivered: &delivered}
	informer := &informerStub{}
	f, err := NewFence(writer, cache, informer, "hitl-system")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	errs := make(chan error, len(FenceNames))
	for range FenceNames {
		go func() {
			_, err := f.read(ctx)
			errs <- err
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(patched)
		mu.Unlock()
		if n == len(FenceNames) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d reads in flight wrote %v, want each of %v once", len(FenceNames), patched, FenceNames)
		}
		time.Sleep(time.Millisecond)
	}
	var newest hitlv1.QuestionClaim
	for _, name := range FenceNames {
		var c hitlv1.QuestionClaim
		if err := writer.Get(ctx, client.ObjectKey{Namespace: "hitl-system", Name: name}, &c); err != nil {
			t.Fatalf("fence %s: %v", name, err)
		}
		if !IsFence(&c) {
			t.Fatalf("%s is not recognised as a fence object: %+v", name, c.Spec)
		}
		a, _ := strconv.ParseUint(c.ResourceVersion, 10, 64)
		b, _ := strconv.ParseUint(newest.ResourceVersion, 10, 64)
		if a > b {
			newest = c
		}
	}
	delivered.Store(true)
	informer.handler.OnUpdate(nil, newest.DeepCopy())
	for range FenceNames {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for name, n := range patched {
		if n != 1 {
			t.Errorf("fence %s written %d times by %d reads in flight together, want once", name, n, len(FenceNames))
		}
	}
}

func TestAFenceWithoutItsGrantsIsTriedAgainAfterAWhile(t *testing.T) {
	var patches atomic.Int32
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "hitl.dev", Resource: "questionclaims"}, FenceName, errors.New("no grant yet"))
	writer := fake.NewClientBuilder().WithScheme(hitlv1.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			patches.Add(1)
			return forbidden
		},
	}).Build()
	f, err := NewFence(writer, &cacheStub{delivered: &atomic.Bool{}}, &informerStub{}, "hitl-system")
	if err != nil {
		t.Fatal(err)
	}
	api := &countingClaims{claims: []hitlv1.QuestionClaim{claimOf("deploy-plan", "alice")}}
	clk := clocktesting.NewFakeClock(seen)
	reads := New(api, clk)
	reads.UseFence(f)
	ctx := context.Background()
	read := func(want int32) {
		t.Helper()
		r, err := reads.Since(ctx, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got := len(r.Of(deployPlan)); got != 1 {
			t.Fatalf("the read holds %d claims of %s, want 1", got, deployPlan)
		}
		if got := patches.Load(); got != want {
			t.Fatalf("the fence was tried %d times, want %d", got, want)
		}
	}
	read(1) // refused: listed from the API server
	clk.Step(time.Second)
	read(1) // listed, the fence not tried again yet
	clk.Step(fenceRetry)
	read(2) // tried again
	if got := api.lists.Load(); got != 3 {
		t.Fatalf("the API server was listed %d times, want 3", got)
	}
}
