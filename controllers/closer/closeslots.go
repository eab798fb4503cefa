package closer

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// slotWaitToGrow is how long a close may wait for a slot before the
// closer takes it as a sign that its closes are too few for what falls due.
const slotWaitToGrow = 50 * time.Millisecond

// closeSlots bounds the closes in flight, with a bound that follows what
// falls due. It starts at the workers' count, which a quiet API server
// serves fastest: on two cores, 256 closes in flight made each status
// write take 120 ms in the API server where 16 took 33, and the spread
// deadlines later than with 16. When the API server is slow because other
// clients load it, though, a close takes hundreds of milliseconds and 16
// cannot keep up with what falls due; closes then wait for a slot, and each
// that waited longer than slotWaitToGrow adds one, up to MaxClosesInFlight,
// so that the controller's share of the API server grows with its
// backlog. A close that ends with fewer than half the bound in flight takes
// one back, down to the start.
type closeSlots struct {
	clock    clock.PassiveClock
	min, max int

	mu       sync.Mutex
	limit    int
	inFlight int
	// waiting holds the closes waiting for a slot, first come first.
	waiting []chan struct{}
}

func newCloseSlots(clk clock.PassiveClock, minimum, maximum int) *closeSlots {
	minimum = max(1, min(minimum, maximum))
	return &closeSlots{clock: clk, min: minimum, max: maximum, limit: minimum}
}

// acquire waits for a slot, first come first served, or until ctx ends.
func (s *closeSlots) acquire(ctx context.Context) error {
	s.mu.Lock()
	if s.inFlight < s.limit && len(s.waiting) == 0 {
		s.inFlight++
		s.mu.Unlock()
		return nil
	}
	granted := make(chan struct{})
	s.waiting = append(s.waiting, granted)
	s.mu.Unlock()
	since := s.clock.Now()
	select {
	case <-granted:
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, w := range s.waiting {
			if w == granted {
				s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
				return ctx.Err()
			}
		}
		// Granted meanwhile: hand it on.
		s.inFlight--
		s.grant()
		return ctx.Err()
	}
	if s.clock.Since(since) > slotWaitToGrow {
		s.mu.Lock()
		if s.limit < s.max {
			s.limit++
			s.grant()
		}
		s.mu.Unlock()
	}
	return nil
}

// release frees a slot, for the first close waiting if any.
func (s *closeSlots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	if len(s.waiting) == 0 && s.inFlight < s.limit/2 && s.limit > s.min {
		s.limit--
	}
	s.grant()
}

// grant gives free slots to the closes waiting, first come first.
func (s *closeSlots) grant() {
	for s.inFlight < s.limit && len(s.waiting) > 0 {
		s.inFlight++
		close(s.waiting[0])
		s.waiting[0] = nil
		s.waiting = s.waiting[1:]
	}
}

// bound returns the bound and the closes in flight.
func (s *closeSlots) bound() (limit, inFlight int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit, s.inFlight
}
