package closer

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// waitFor acquires a slot in a goroutine and returns a channel that
// gets acquire's result.
func waitFor(ctx context.Context, s *closeSlots) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.acquire(ctx) }()
	return done
}

// queued waits until n closes wait for a slot.
func queued(t *testing.T, s *closeSlots, n int) {
	t.Helper()
	for range 1000 {
		s.mu.Lock()
		got := len(s.waiting)
		s.mu.Unlock()
		if got == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d closes never waited for a slot", n)
}

func granted(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting close never got a slot")
	}
}

func TestCloseSlotsGrowWhileClosesWaitAndShrinkWhenIdle(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(seen)
	s := newCloseSlots(clk, 2, 4)
	for range 2 {
		if err := s.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A third waits; freed quickly, it takes the slot without growing.
	quick := waitFor(ctx, s)
	queued(t, s, 1)
	s.release()
	granted(t, quick)
	if limit, inFlight := s.bound(); limit != 2 || inFlight != 2 {
		t.Fatalf("bound %d, %d in flight; want 2, 2 after a short wait", limit, inFlight)
	}

	// Three wait long (the API server is slow): each that waited over
	// slotWaitToGrow adds a slot, up to the maximum.
	slow := []<-chan error{waitFor(ctx, s)}
	queued(t, s, 1)
	slow = append(slow, waitFor(ctx, s))
	queued(t, s, 2)
	slow = append(slow, waitFor(ctx, s))
	queued(t, s, 3)
	clk.Step(slotWaitToGrow + time.Millisecond)
	s.release() // the first gets it, and grows the bound for the second
	for _, w := range slow {
		granted(t, w)
	}
	if limit, inFlight := s.bound(); limit != 4 || inFlight != 4 {
		t.Fatalf("bound %d, %d in flight; want the maximum 4, all of it in flight", limit, inFlight)
	}

	// Idle again: the bound comes back to the start, never below it.
	for range 4 {
		s.release()
	}
	if limit, inFlight := s.bound(); limit != 2 || inFlight != 0 {
		t.Fatalf("bound %d, %d in flight once idle; want 2, 0", limit, inFlight)
	}
}

func TestCloseSlotsServeWaitersFirstComeFirst(t *testing.T) {
	ctx := context.Background()
	s := newCloseSlots(clocktesting.NewFakeClock(seen), 1, 1)
	if err := s.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	first := waitFor(ctx, s)
	queued(t, s, 1)
	second := waitFor(ctx, s)
	queued(t, s, 2)
	s.release()
	granted(t, first)
	select {
	case <-second:
		t.Fatal("the second waiter got the slot before the first freed it")
	case <-time.After(20 * time.Millisecond):
	}
	s.release()
	granted(t, second)
}

func TestCloseSlotsAWaiterWhoseContextEndsLeavesNoSlotTaken(t *testing.T) {
	s := newCloseSlots(clocktesting.NewFakeClock(seen), 1, 1)
	if err := s.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := waitFor(ctx, s)
	queued(t, s, 1)
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire = %v, want the context's end", err)
	}
	s.release()
	if limit, inFlight := s.bound(); limit != 1 || inFlight != 0 {
		t.Fatalf("bound %d, %d in flight; want 1, 0", limit, inFlight)
	}
	if err := s.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
}
