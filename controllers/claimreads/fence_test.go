package claimreads

import (
	"context"
	"errors"
	"strconv"
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
	writer := fake.NewClientBuilder().WithScheme(hitlv1.NewScheme()).Build()
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
		var written hitlv1.QuestionClaim
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := writer.Get(ctx, client.ObjectKey{Namespace: "hitl-system", Name: FenceName}, &written)
			if err == nil && written.Spec.RenewTime != nil && (round == 0 || written.ResourceVersion != fenceClaim.ResourceVersion) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the fence was never written", round)
			}
			time.Sleep(time.Millisecond)
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
