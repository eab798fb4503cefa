// The deadline workloads: spread and shared deadlines' precision, and the
// floor of the spread ones.

package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func (b *bench) deadlines(ctx context.Context) error {
	lead, err := b.calibrate(ctx, b.s.SpreadDeadline+b.s.SharedDeadline)
	if err != nil {
		return err
	}
	b.r.set("deadline questions asked ahead of the first deadline, s", lead.Seconds())
	b.spreadLead = lead
	spread, start, err := b.askSpread(ctx, b.s.SpreadDeadline, b.s.SpreadWindow, lead, func(i int, timeout time.Duration) *hitlv1.UserQuestion {
		return timed(fmt.Sprintf("spread-%d", i), timeout)
	})
	if err != nil {
		return err
	}
	// Shared: the same deadline, aimed at one whole second.
	target := start.Add(b.s.SpreadWindow + 5*time.Second).Truncate(time.Second)
	shared := make([]string, b.s.SharedDeadline)
	_, err = parallel(ctx, b.s.SharedDeadline, 16, func(ctx context.Context, i int) error {
		var err error
		shared[i], err = b.askAt(ctx, fmt.Sprintf("shared-%d", i), target)
		return err
	})
	if err != nil {
		return err
	}
	defer b.profileCPU(ctx, target, 5, "shared-deadline")()
	caughtUp, err := waitOpen(ctx, b.obs, append(spread, shared...))
	if err != nil {
		return err
	}
	b.r.set("deadline: every Open status written, s before the first deadline", start.Sub(caughtUp).Seconds())
	explain, err := b.explainTransitions(ctx)
	if err != nil {
		return err
	}
	defer explain("deadlines", len(spread)+len(shared))
	wait, cancel := context.WithTimeout(ctx, time.Until(target)+30*time.Second)
	defer cancel()
	for _, set := range []struct {
		label string
		names []string
	}{{"spread", spread}, {"shared", shared}} {
		late, early, lastFlip, err := lateness(wait, b.obs, set.names)
		if err != nil {
			return err
		}
		if set.label == "spread" {
			b.logSlices("spread", late)
			b.logSlices("spread status.continuedAt after the deadline,", b.decidedLateness("spread: ", set.names))
		}
		p50, p99, worst := percentiles(late)
		label := fmt.Sprintf("deadline lateness ms, %d %s", len(set.names), set.label)
		b.r.set(label+" p50", ms(p50))
		b.r.set(label+" p99", ms(p99))
		b.r.set(label+" max", ms(worst))
		b.r.set(fmt.Sprintf("early transitions, %s", set.label), float64(early))
		b.r.check("no early transition, "+set.label, "0", strconv.Itoa(early), early == 0)
		if set.label == "spread" {
			b.spreadP99 = p99 // judged against its floor by deadlineFloor
			b.checkWorst("", worst)
		} else {
			all := lastFlip.Sub(target)
			b.r.set("shared deadline: last flip after the deadline, ms", ms(all))
			b.checkBurst(fmt.Sprintf("%d shared deadlines flipped", len(set.names)), len(set.names), all)
		}
	}
	return nil
}

// spreadFloorTarget is the most the spread deadlines' p99 lateness may be,
// as a multiple of a bare client's closing the same windows in the same run.
const spreadFloorTarget = 2.0

// deadlineFloor is the floor of the deadline workload's spread deadlines,
// measured in the same run right after it: as many windows, spread over
// the same time from the same lead, in the same namespace, each closed at
// its deadline by a bare client with the manager stopped. The bare client
// writes the status alone: in one namespace the manager folds all but 60
// of a minute's Continued Events into summaries.
func (b *bench) deadlineFloor(ctx context.Context) error {
	lead := b.spreadLead
	if lead == 0 { // run without the deadline workload
		var err error
		if lead, err = b.calibrate(ctx, b.s.SpreadDeadline); err != nil {
			return err
		}
	}
	p99, err := b.spreadFloor(ctx, b.s.SpreadDeadline, lead, func(int) string { return ns }, "deadline floor: ", false)
	if err != nil {
		return err
	}
	if b.spreadP99 > 0 && p99 > 0 {
		b.r.set("deadline lateness p99, spread / floor", b.spreadP99.Seconds()/p99.Seconds())
		b.checkAgainstFloor("deadline lateness p99, spread", b.spreadP99, p99, spreadFloorTarget)
	}
	return nil
}

// askAt asks a timed question whose window closes at deadline, a whole
// second. The window starts at the question's creationTimestamp, which
// the API server sets to the second by its clock: a create sent just
// before a second ends may be stamped with the next one, and its deadline
// would be a second late. Such a question is deleted and asked again under
// another name; askAt returns the name of the one that stands.
func (b *bench) askAt(ctx context.Context, name string, deadline time.Time) (string, error) {
	for attempt := 0; ; attempt++ {
		n := name
		if attempt > 0 {
			n = fmt.Sprintf("%s-%d", name, attempt)
		}
		timeout := deadline.Sub(time.Now().Truncate(time.Second))
		q := timed(n, timeout)
		if err := b.c.Create(ctx, q); err != nil {
			return "", err
		}
		if q.CreationTimestamp.Add(timeout).Equal(deadline) {
			return n, nil
		}
		if attempt == 3 {
			return "", fmt.Errorf("question %s: created at %s, its window would not close at %s", n, q.CreationTimestamp.Time, deadline)
		}
		if err := b.c.Delete(ctx, q); err != nil {
			return "", err
		}
	}
}
