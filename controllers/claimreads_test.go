package controllers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: name,
		Labels: map[string]string{hitlv1.ClaimLabel: "true", hitlv1.QuestionLabel: question}}}
}

func TestClaimReadsShareAReadSentAfterTheDeadline(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(seen)
	api := &countingLeases{gate: make(chan struct{}), leases: []coordinationv1.Lease{
		claimOf("deploy-plan", "alice"), claimOf("other-plan", "bob"), claimOf("deploy-plan", "carol")}}
	reads := newClaimReads(api, clk)
	deadline := seen

	// A burst of windows sharing a deadline: the first sends the read,
	// the others, due no later than it was sent, wait for it.
	clk.Step(5 * time.Millisecond)
	var wg sync.WaitGroup
	got := make([]*claimRead, 16)
	for i := range got {
		wg.Go(func() {
			r, err := reads.since(ctx, "agents", deadline)
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
	if claims := got[0].of("deploy-plan"); len(claims) != 2 || claims[0].Name != "alice" || claims[1].Name != "carol" {
		t.Errorf("claims of deploy-plan: %v", claims)
	}

	// Still usable for a window due before it was sent, even later on.
	clk.Step(time.Second)
	if r, err := reads.since(ctx, "agents", deadline); err != nil || r != got[0] || api.lists.Load() != 1 {
		t.Errorf("an overdue window sent another read (%d) or got another (%v, %v)", api.lists.Load(), r, err)
	}
	// Never once it is older than claimReadMaxAge, for a window due after
	// it was sent, nor in another namespace.
	clk.Step(claimReadMaxAge)
	if r, err := reads.since(ctx, "agents", deadline); err != nil || r == got[0] || api.lists.Load() != 2 {
		t.Errorf("a read %s old closed a window (%v, %d reads)", claimReadMaxAge+time.Second, err, api.lists.Load())
	}
	clk.Step(time.Millisecond)
	if r, err := reads.since(ctx, "agents", clk.Now()); err != nil || !r.at.Equal(clk.Now()) || api.lists.Load() != 3 {
		t.Errorf("a window due after the read was sent got %v (%v), %d reads", r, err, api.lists.Load())
	}
	if _, err := reads.since(ctx, "others", deadline); err != nil || api.lists.Load() != 4 {
		t.Errorf("another namespace shared the read: %v, %d reads", err, api.lists.Load())
	}
}

func TestClaimReadsFailedReadIsNotShared(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(seen)
	api := &countingLeases{}
	api.fail.Store(true)
	reads := newClaimReads(api, clk)
	if _, err := reads.since(ctx, "agents", seen); err == nil {
		t.Fatal("a failed read returned no error")
	}
	api.fail.Store(false)
	if _, err := reads.since(ctx, "agents", seen); err != nil || api.lists.Load() != 2 {
		t.Errorf("after a failed read: %v, %d reads, want a second read that succeeds", err, api.lists.Load())
	}
}

func TestClaimReadsForgetIdleNamespaces(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(seen)
	reads := newClaimReads(&countingLeases{}, clk)
	for _, ns := range []string{"a", "b"} {
		if _, err := reads.since(ctx, ns, seen); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(claimReadMaxAge + time.Second)
	if _, err := reads.since(ctx, "c", clk.Now()); err != nil {
		t.Fatal(err)
	}
	if len(reads.reads) != 1 || reads.reads["c"] == nil {
		t.Errorf("namespaces kept: %v, want only c", len(reads.reads))
	}
}
