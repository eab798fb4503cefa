package claimreads

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// countingLeases answers lists of Leases with its claims, counting them;
// while gate is set, each list waits for it to be closed.
type countingLeases struct {
	client.Reader
	lists  atomic.Int32
	gate   chan struct{}
	fail   atomic.Bool
	leases []coordinationv1.Lease
}

func (c *countingLeases) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	c.lists.Add(1)
	if c.gate != nil {
		<-c.gate
	}
	if c.fail.Load() {
		return errors.New("the API server is away")
	}
	list.(*coordinationv1.LeaseList).Items = append([]coordinationv1.Lease(nil), c.leases...)
	return nil
}

func claimOf(question, name string) coordinationv1.Lease {
	return claimIn("agents", question, name)
}

func claimIn(namespace, question, name string) coordinationv1.Lease {
	return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels: map[string]string{hitlv1.ClaimLabel: "true", hitlv1.QuestionLabel: question}}}
}

var deployPlan = types.NamespacedName{Namespace: "agents", Name: "deploy-plan"}

func TestClaimReadsShareAReadSentAfterTheDeadline(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(seen)
	api := &countingLeases{gate: make(chan struct{}), leases: []coordinationv1.Lease{
		claimOf("deploy-plan", "alice"), claimOf("other-plan", "bob"), claimIn("others", "deploy-plan", "dave"), claimOf("deploy-plan", "carol")}}
	reads := New(api, clk)
	deadline := seen

	// A burst of windows sharing a deadline: the first sends the read,
	// the others, due no later than it was sent, wait for it.
	clk.Step(5 * time.Millisecond)
	var wg sync.WaitGroup
	got := make([]*Read, 16)
	for i := range got {
		wg.Go(func() {
			r, err := reads.Since(ctx, deadline)
			if err != nil {
				t.Error(err)
			}
			got[i] = r
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(api.gate)
	wg.Wait()
	if n := api.lists.Load(); n != 1 {
		t.Fatalf("%d reads for 16 windows sharing a deadline, want 1", n)
	}
	for _, r := range got {
		if r != got[0] || !r.at.Equal(seenPlus(0.005)) {
			t.Fatalf("a window got the read sent at %v, want the one sent at %v", r.at, seenPlus(0.005))
		}
	}
	if claims := got[0].Of(deployPlan); len(claims) != 2 || claims[0].Name != "alice" || claims[1].Name != "carol" {
		t.Errorf("claims of deploy-plan: %v", claims)
	}

	// Still usable for a window due before it was sent, even later on.
	clk.Step(time.Second)
	if r, err := reads.Since(ctx, deadline); err != nil || r != got[0] || api.lists.Load() != 1 {
		t.Errorf("an overdue window sent another read (%d) or got another (%v, %v)", api.lists.Load(), r, err)
	}
	// Never once it is older than claimReadMaxAge, nor for a window due
	// after it was sent.
	clk.Step(claimReadMaxAge)
	if r, err := reads.Since(ctx, deadline); err != nil || r == got[0] || api.lists.Load() != 2 {
		t.Errorf("a read %s old closed a window (%v, %d reads)", claimReadMaxAge+time.Second, err, api.lists.Load())
	}
	clk.Step(time.Millisecond)
	if r, err := reads.Since(ctx, clk.Now()); err != nil || !r.at.Equal(clk.Now()) || api.lists.Load() != 3 {
		t.Errorf("a window due after the read was sent got %v (%v), %d reads", r, err, api.lists.Load())
	}
}

// Windows closing in many namespaces share the reads: a read holds the
// claims of every namespace, and each window gets its own.
func TestClaimReadsAreSharedAcrossNamespaces(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(seen)
	api := &countingLeases{leases: []coordinationv1.Lease{
		claimIn("team-a", "plan", "alice"), claimIn("team-b", "plan", "bob"), claimIn("team-b", "other", "carol")}}
	reads := New(api, clk)
	clk.Step(200 * time.Millisecond)
	first, err := reads.Since(ctx, seen)
	if err != nil {
		t.Fatal(err)
	}
	// Windows due in the 200 ms before it was sent, closing over the next
	// second: the read has the claims of all their namespaces.
	for i := range 100 {
		clk.Step(10 * time.Millisecond)
		r, err := reads.Since(ctx, seen.Add(time.Duration(2*i)*time.Millisecond))
		if err != nil || r != first {
			t.Fatalf("window %d, due before the read was sent, got %v (%v), not the read", i, r, err)
		}
	}
	if n := api.lists.Load(); n != 1 {
		t.Errorf("%d reads for 101 windows due before the first was sent, want 1", n)
	}
	for ns, want := range map[string][]string{"team-a": {"alice"}, "team-b": {"bob"}, "team-c": nil} {
		var got []string
		for _, l := range first.Of(types.NamespacedName{Namespace: ns, Name: "plan"}) {
			got = append(got, l.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("claims of %s/plan: %v, want %v", ns, got, want)
		}
	}
}

func TestClaimReadsFailedReadIsNotShared(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(seen)
	api := &countingLeases{}
	api.fail.Store(true)
	reads := New(api, clk)
	if _, err := reads.Since(ctx, seen); err == nil {
		t.Fatal("a failed read returned no error")
	}
	api.fail.Store(false)
	if _, err := reads.Since(ctx, seen); err != nil || api.lists.Load() != 2 {
		t.Errorf("after a failed read: %v, %d reads, want a second read that succeeds", err, api.lists.Load())
	}
}

func TestClaimReadsKeepOnlyTheNewest(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(seen)
	reads := New(&countingLeases{}, clk)
	for range 5 {
		clk.Step(claimReadMaxAge + time.Second)
		if _, err := reads.Since(ctx, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if len(reads.reads) != 1 || !reads.reads[0].at.Equal(clk.Now()) {
		t.Errorf("%d reads kept, want only the newest", len(reads.reads))
	}
}

// A window due while a read is in flight gets a read sent at most
// claimReadSpacing after that one, in flight beside it, or sooner when a
// read returns: not the read after the one in flight returns.
func TestClaimReadsAWindowDueDuringAReadGetsAReadSentWithinTheSpacing(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(seen)
	api := &countingLeases{gate: make(chan struct{}), leases: []coordinationv1.Lease{claimOf("deploy-plan", "alice")}}
	reads := New(api, clk)
	window := func(due time.Time) <-chan *Read {
		got := make(chan *Read, 1)
		go func() {
			r, err := reads.Since(ctx, due)
			if err != nil {
				t.Error(err)
			}
			got <- r
		}()
		return got
	}
	first := window(seen)
	awaitLists(t, api, 1)

	clk.Step(5 * time.Millisecond)
	second := window(clk.Now())
	time.Sleep(30 * time.Millisecond)
	if n := api.lists.Load(); n != 1 {
		t.Fatalf("%d reads sent before the spacing passed, want 1", n)
	}
	clk.Step(claimReadSpacing - 5*time.Millisecond)
	awaitLists(t, api, 2) // beside the first, still in flight

	clk.Step(5 * time.Millisecond)
	third := window(clk.Now())
	time.Sleep(30 * time.Millisecond)
	close(api.gate) // the first two return, and the third is sent then
	awaitLists(t, api, 3)

	for i, w := range []struct {
		got  <-chan *Read
		want time.Time
	}{{first, seen}, {second, seen.Add(claimReadSpacing)}, {third, seen.Add(claimReadSpacing + 5*time.Millisecond)}} {
		if r := <-w.got; r == nil || !r.at.Equal(w.want) || len(r.Of(deployPlan)) != 1 {
			t.Errorf("window %d got %+v, want the read sent at %v with alice's claim", i+1, r, w.want)
		}
	}
}

// Windows falling due one after another while the API server does not
// answer share reads sent claimReadSpacing apart, no more than
// claimReadsInFlight in flight at once, and then one more, sent when a read
// returns; each gets a read sent no earlier than its deadline.
func TestClaimReadsNoMoreThanClaimReadsInFlight(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(seen)
	api := &countingLeases{gate: make(chan struct{})}
	reads := New(api, clk)
	var wg sync.WaitGroup
	due := make([]time.Time, 100)
	got := make([]*Read, len(due))
	for i := range due {
		due[i] = clk.Now()
		wg.Go(func() {
			r, err := reads.Since(ctx, due[i])
			if err != nil {
				t.Error(err)
			}
			got[i] = r
		})
		time.Sleep(time.Millisecond)
		clk.Step(6 * time.Millisecond)
	}
	awaitLists(t, api, claimReadsInFlight)
	time.Sleep(50 * time.Millisecond)
	if n := api.lists.Load(); n != claimReadsInFlight {
		t.Fatalf("%d reads in flight at once, want %d", n, claimReadsInFlight)
	}
	close(api.gate)
	wg.Wait()
	// The next, if a window fell due after the last of them was sent.
	if n := api.lists.Load(); n > claimReadsInFlight+1 {
		t.Errorf("%d reads for 100 windows, want at most %d: those in flight and the next", n, claimReadsInFlight+1)
	}
	for i, r := range got {
		if r == nil || r.at.Before(due[i]) {
			t.Fatalf("window %d, due at %v, got %+v", i, due[i], r)
		}
	}
}

func awaitLists(t *testing.T, api *countingLeases, n int32) {
	t.Helper()
	for start := time.Now(); api.lists.Load() < n; time.Sleep(time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%d reads sent, want %d", api.lists.Load(), n)
		}
	}
}
