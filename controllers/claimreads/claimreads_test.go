package claimreads

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// countingClaims answers lists of QuestionClaims with its claims, counting
// the calls; while gate is set, each list waits for it to be closed.
type countingClaims struct {
	client.Reader
	lists  atomic.Int32
	gate   chan struct{}
	fail   atomic.Bool
	claims []hitlv1.QuestionClaim
}

func (c *countingClaims) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	c.lists.Add(1)
	if c.gate != nil {
		<-c.gate
	}
	if c.fail.Load() {
		return errors.New("the API server is away")
	}
	list.(*hitlv1.QuestionClaimList).Items = append([]hitlv1.QuestionClaim(nil), c.claims...)
	return nil
}

func claimOf(question, name string) hitlv1.QuestionClaim {
	return claimIn("agents", question, name)
}

func claimIn(namespace, question, name string) hitlv1.QuestionClaim {
	return hitlv1.QuestionClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: hitlv1.QuestionClaimSpec{QuestionRef: hitlv1.QuestionReference{Name: question}, Agent: "bot",
			Holder: &hitlv1.UserInfo{Username: name}, DurationSeconds: 30}}
}

var deployPlan = types.NamespacedName{Namespace: "agents", Name: "deploy-plan"}

func TestClaimReadsShareAReadSentAfterTheDeadline(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(seen)
	api := &countingClaims{gate: make(chan struct{}), claims: []hitlv1.QuestionClaim{
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
	api := &countingClaims{claims: []hitlv1.QuestionClaim{
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
	api := &countingClaims{}
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
	reads := New(&countingClaims{}, clk)
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
	api := &countingClaims{gate: make(chan struct{}), claims: []hitlv1.QuestionClaim{claimOf("deploy-plan", "alice")}}
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
	api := &countingClaims{gate: make(chan struct{})}
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

func awaitLists(t *testing.T, api *countingClaims, n int32) {
	t.Helper()
	for start := time.Now(); api.lists.Load() < n; time.Sleep(time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%d reads sent, want %d", api.lists.Load(), n)
		}
	}
}

// pagedClaims serves its claims a page at a time, as the API server does
// for a list with a limit, and records the options of each call.
type pagedClaims struct {
	client.Reader
	claims []hitlv1.QuestionClaim
	calls  []client.ListOptions
	// failCall, when set, is the call (1 for the first) that fails.
	failCall int
}

func (p *pagedClaims) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var o client.ListOptions
	o.ApplyOptions(opts)
	p.calls = append(p.calls, o)
	if len(p.calls) == p.failCall {
		return errors.New("the API server is away")
	}
	from := 0
	if o.Continue != "" {
		if _, err := fmt.Sscanf(o.Continue, "from-%d", &from); err != nil {
			return fmt.Errorf("a continue token the server never gave: %q", o.Continue)
		}
	}
	to := len(p.claims)
	if o.Limit > 0 {
		to = min(to, from+int(o.Limit))
	}
	l := list.(*hitlv1.QuestionClaimList)
	l.Items = append([]hitlv1.QuestionClaim(nil), p.claims[from:to]...)
	l.Continue = ""
	if to < len(p.claims) {
		l.Continue = fmt.Sprintf("from-%d", to)
	}
	return nil
}

// A flood of claims is read a page at a time, never in one list: the read
// holds every page's claims.
func TestClaimReadsReadAPageAtATime(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(seen)
	api := &pagedClaims{}
	n := 2*claimReadPage + 500
	for i := range n {
		question := "other-plan"
		if i%500 == 0 {
			question = "deploy-plan"
		}
		api.claims = append(api.claims, claimOf(question, fmt.Sprintf("c-%05d", i)))
	}
	r, err := New(api, clk).Since(ctx, seen)
	if err != nil {
		t.Fatal(err)
	}
	if len(api.calls) != 3 {
		t.Fatalf("%d list calls for %d claims in pages of %d, want 3", len(api.calls), n, claimReadPage)
	}
	for i, c := range api.calls {
		if c.Limit != claimReadPage {
			t.Errorf("call %d asked for %d claims, want a page of %d", i, c.Limit, claimReadPage)
		}
		if want := map[int]string{0: "", 1: "from-1000", 2: "from-2000"}[i]; c.Continue != want {
			t.Errorf("call %d continued from %q, want %q", i, c.Continue, want)
		}
	}
	if got := len(r.claims); got != n {
		t.Errorf("the read holds %d claims, want all %d", got, n)
	}
	var names []string
	for _, c := range r.Of(deployPlan) {
		names = append(names, c.Name)
	}
	if want := []string{"c-00000", "c-00500", "c-01000", "c-01500", "c-02000"}; !slices.Equal(names, want) {
		t.Errorf("claims of deploy-plan: %v, want %v, from every page", names, want)
	}
}

// A read whose later page fails is a failed read, not a read of the first
// pages: the claims of the missing pages would let windows close.
func TestClaimReadsAFailedPageFailsTheRead(t *testing.T) {
	clk := clocktesting.NewFakeClock(seen)
	api := &pagedClaims{failCall: 2}
	for i := range claimReadPage + 1 {
		api.claims = append(api.claims, claimOf("deploy-plan", fmt.Sprintf("c-%05d", i)))
	}
	if r, err := New(api, clk).Since(context.Background(), seen); err == nil {
		t.Fatalf("a read whose second page failed returned %d claims and no error", len(r.claims))
	}
}
