// Deadline lateness, for the deadline, flood and scale workloads: asking
// timed questions ahead of their deadlines and timing their transitions
// as the agents' watch sees them.

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// checkLateness checks the spread deadlines' lateness against the absolute
// targets, where no floor is measured (the scale mode); what names the run.
func (b *bench) checkLateness(what string, p99, worst time.Duration) {
	if what != "" {
		what = ", " + what
	}
	b.r.check("deadline lateness p99"+what, "<= 200ms", p99.Round(time.Millisecond).String(), p99 <= 200*time.Millisecond)
	b.checkWorst(what, worst)
}

// checkWorst checks the latest of the spread deadlines: whatever its floor,
// no window closes over a second late on a quiet machine.
func (b *bench) checkWorst(what string, worst time.Duration) {
	b.r.check("deadline lateness max"+what, "<= 1s", worst.Round(time.Millisecond).String(), worst <= time.Second)
}

// checkAgainstFloor checks the p99 lateness of spread deadlines against the
// p99 of a bare client closing as many windows in the same run, with the
// absolute figures beside the ratio.
func (b *bench) checkAgainstFloor(name string, p99, floor time.Duration, limit float64) {
	ratio := p99.Seconds() / floor.Seconds()
	b.r.check(name, fmt.Sprintf("<= %.1f x floor", limit),
		fmt.Sprintf("%.2f x (%s/%s)", ratio, p99.Round(time.Millisecond), floor.Round(time.Millisecond)), ratio <= limit)
}

// calibrate times a batch of questions from their creation until the
// controller has written every Open status, and returns how far ahead of
// the first deadline n timed questions should be asked: the deadlines must
// all lie after the questions are asked and their Open status written, so
// that what is measured is the controller's timing, not the API server's
// write rate while it takes in a burst of new questions.
func (b *bench) calibrate(ctx context.Context, n int) (time.Duration, error) {
	calibration := 200
	start := time.Now()
	if _, err := parallel(ctx, calibration, 16, func(ctx context.Context, _ int) error {
		q := blocking(name("calibrate"))
		if err := b.c.Create(ctx, q); err != nil {
			return err
		}
		_, err := b.obs.wait(ctx, q.Name, hitlv1.StateOpen)
		return err
	}); err != nil {
		return 0, err
	}
	perQuestion := time.Since(start) / time.Duration(calibration)
	return 3*time.Second + perQuestion*time.Duration(n)*2, nil
}

// askSpread asks n timed questions, made by question from their index and
// timeout, whose deadlines are spread evenly over window from lead on, and
// returns their names and the first deadline.
func (b *bench) askSpread(ctx context.Context, n int, window, lead time.Duration, question func(i int, timeout time.Duration) *hitlv1.UserQuestion) ([]string, time.Time, error) {
	start := time.Now().Add(lead)
	names := make([]string, n)
	_, err := parallel(ctx, n, 16, func(ctx context.Context, i int) error {
		offset := time.Duration(int64(window) * int64(i) / int64(n))
		created := time.Now().Truncate(time.Second) // the API server's creationTimestamp, to the second
		q := question(i, start.Add(offset).Sub(created).Truncate(time.Millisecond))
		names[i] = q.Name
		return b.c.Create(ctx, q)
	})
	return names, start, err
}

// waitOpen waits until obs has seen every question Open, and returns when
// the last one was.
func waitOpen(ctx context.Context, obs *observer, names []string) (time.Time, error) {
	var caughtUp time.Time
	for _, n := range names {
		at, err := obs.wait(ctx, n, hitlv1.StateOpen)
		if err != nil {
			return caughtUp, err
		}
		if at.After(caughtUp) {
			caughtUp = at
		}
	}
	return caughtUp, nil
}

// lateness waits until obs has seen every question Continued and returns,
// in the order of names, how long after its deadline each one was, how
// many were early, and when the last one was seen.
func lateness(ctx context.Context, obs *observer, names []string) (late []time.Duration, early int, lastFlip time.Time, err error) {
	late, early, lastFlip, open := latenessWhile(ctx, obs, names)
	if len(open) > 0 {
		return nil, 0, lastFlip, fmt.Errorf("question %s never became Continued: %w", open[0], ctx.Err())
	}
	return late, early, lastFlip, nil
}

// latenessWhile is lateness, waiting only while ctx lasts: a question not
// seen Continued by then counts as late by the time from its deadline to
// the end of the wait (less than it will be), and open names them.
func latenessWhile(ctx context.Context, obs *observer, names []string) (late []time.Duration, early int, lastFlip time.Time, open []string) {
	for _, n := range names {
		_, _ = obs.wait(ctx, n, hitlv1.StateContinued)
		at, deadline, ok := obs.seenAt(n, hitlv1.StateContinued)
		if !ok {
			open = append(open, n)
			late = append(late, time.Since(deadline))
			continue
		}
		if at.Before(deadline) {
			early++
		}
		late = append(late, at.Sub(deadline))
		if at.After(lastFlip) {
			lastFlip = at
		}
	}
	return late, early, lastFlip, open
}

// logSlices prints the lateness of the spread deadlines by tenths of
// their window, in deadline order, to show when the late ones fell due.
func (b *bench) logSlices(what string, late []time.Duration) {
	n := len(late)
	var parts []string
	for i := range 10 {
		slice := append([]time.Duration(nil), late[i*n/10:(i+1)*n/10]...)
		_, p99, worst := percentiles(slice)
		parts = append(parts, fmt.Sprintf("%.0f/%.0f", ms(p99), ms(worst)))
	}
	fmt.Fprintf(os.Stderr, "bench: %s lateness p99/max ms by tenth of the window: %s\n", what, strings.Join(parts, " "))
}

// decidedLateness sets the figures of how long after its deadline each of
// names was decided to close (its status.continuedAt, the time of the
// claims read that decided it), named with prefix: where a close's
// lateness is, the controller's decision or the writes after it. It
// returns those times, in the order of names.
func (b *bench) decidedLateness(prefix string, names []string) []time.Duration {
	var decided []time.Duration
	for _, name := range names {
		if at, deadline, ok := b.obs.continuedAt(name); ok {
			decided = append(decided, at.Sub(deadline))
		}
	}
	p50, p99, worst := percentiles(decided)
	b.r.set(prefix+"status.continuedAt after the deadline ms, p50", ms(p50))
	b.r.set(prefix+"status.continuedAt after the deadline ms, p99", ms(p99))
	b.r.set(prefix+"status.continuedAt after the deadline ms, max", ms(worst))
	return decided
}
