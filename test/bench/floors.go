// The floors: what the API server alone allows, measured with a bare
// client writing what the controller writes (bursts of transitions,
// spread deadlines), and the checks of bursts against them.

package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/controllers/closer"
	"github.com/hitl-dev/hitl/controllers/userquestion"
	"github.com/hitl-dev/hitl/internal/manager"
	"github.com/hitl-dev/hitl/test/builders"
)

// transitionFloor times what a burst of deadlines costs the API server
// alone: a bare client writing the Continued status of SharedDeadline Open
// questions, and then, for as many others, the status and an Event each
// (what the controller writes per transition). It does so twice: with as
// many writers as the manager has workers, and with as many as the
// manager closes windows at once (closer.MaxClosesInFlight); the
// faster is the floor. The statuses are the ones the controller writes
// (its Decide, the same pure function, makes them), so each write costs
// the API server what the controller's does: the same fields to decode,
// validate and store. No controller can flip a burst faster than this.
// Each burst is timed twice: until the last write returned, and until the
// agents' watch saw the last status, as the shared deadlines and the
// restart are timed; the targets compare with the latter.
func (b *bench) transitionFloor(ctx context.Context) error {
	seen, err := b.burstFloor(ctx, b.s.SharedDeadline, "floor: ")
	b.floorSeen = seen // what the shared deadlines compare with
	return err
}

// burstFloor measures the floor of a burst of n transitions as
// transitionFloor describes, names its figures with prefix, and returns
// the faster burst with Events, as the agents' watch saw it.
func (b *bench) burstFloor(ctx context.Context, n int, prefix string) (time.Duration, error) {
	writers := []int{manager.DefaultConfig().Workers, closer.MaxClosesInFlight}
	qs := make([]*hitlv1.UserQuestion, 2*n*len(writers))
	if _, err := parallel(ctx, len(qs), 32, func(ctx context.Context, i int) error {
		qs[i] = timed(name("floor"), time.Hour)
		if err := b.c.Create(ctx, qs[i]); err != nil {
			return err
		}
		return writeDecided(ctx, b.c, qs[i], qs[i].CreationTimestamp.Time, hitlv1.StateOpen)
	}); err != nil {
		return 0, err
	}
	var floor time.Duration
	for k, w := range writers {
		for e, withEvents := range []bool{false, true} {
			burst := qs[(2*k+e)*n : (2*k+e+1)*n]
			seen, err := b.floorBurst(ctx, burst, w, withEvents, prefix)
			if err != nil {
				return 0, err
			}
			if withEvents && (floor == 0 || seen < floor) {
				floor = seen
			}
		}
	}
	b.r.set(fmt.Sprintf("%s%d status writes + %d events by a bare client, seen, the faster, ms", prefix, n, n), ms(floor))
	return floor, nil
}

// floorBurst writes, as a bare client with writers at once, the Continued
// status of each question of burst (and its Event with withEvents), and
// returns how long until the agents' watch saw the last.
func (b *bench) floorBurst(ctx context.Context, burst []*hitlv1.UserQuestion, writers int, withEvents bool, prefix string) (time.Duration, error) {
	start := time.Now()
	took, err := parallel(ctx, len(burst), writers, func(ctx context.Context, i int) error {
		q := burst[i]
		deadline, _ := q.Deadline()
		if err := writeDecided(ctx, b.c, q, deadline, hitlv1.StateContinued); err != nil {
			return err
		}
		if !withEvents {
			return nil
		}
		return b.c.Create(ctx, continuedEvent(q, time.Now()))
	})
	if err != nil {
		return 0, err
	}
	var last time.Time
	for _, q := range burst {
		at, err := b.obs.wait(ctx, q.Name, hitlv1.StateContinued)
		if err != nil {
			return 0, err
		}
		if at.After(last) {
			last = at
		}
	}
	n := len(burst)
	label := fmt.Sprintf("%s%d status writes by a bare client", prefix, n)
	if withEvents {
		label = fmt.Sprintf("%s%d status writes + %d events by a bare client", prefix, n, n)
	}
	if writers != manager.DefaultConfig().Workers {
		label += fmt.Sprintf(", %d writers", writers)
	}
	b.r.set(label+", ms", ms(took))
	b.r.set(label+", seen, ms", ms(last.Sub(start)))
	return last.Sub(start), nil
}

// writeDecided writes, as a bare client, the status the controller decides
// for q at now (its Decide, with no replies and no claims), which must put
// it in the state want.
func writeDecided(ctx context.Context, c client.Client, q *hitlv1.UserQuestion, now time.Time, want hitlv1.QuestionState) error {
	d := userquestion.Decide(userquestion.Inputs{Question: q, Now: now})
	if d.Status.State != want {
		return fmt.Errorf("question %s at %s: the controller would write %q, not %q", q.Name, now, d.Status.State, want)
	}
	q.Status = d.Status
	return c.Status().Update(ctx, q)
}

// floorTarget is the most a burst of transitions may take: 1.2 times the
// floor measured in the same run (its status writes and Events, as the
// agents' watch saw them). The baseline, which measures the floor, always
// runs.
const floorTarget = 1.2

// checkBurst records how a burst of n transitions that took took compares
// with the floor of as many (the floor's burst, scaled to n when their
// counts differ), and checks it against floorTarget.
func (b *bench) checkBurst(name string, n int, took time.Duration) {
	b.checkBurstAgainst(name, took, b.floorSeen*time.Duration(n)/time.Duration(b.s.SharedDeadline))
}

// checkBurstAgainst records how a burst that took took compares with floor,
// a bare client's burst of as many transitions, and checks it against
// floorTarget.
func (b *bench) checkBurstAgainst(name string, took, floor time.Duration) {
	ratio := took.Seconds() / floor.Seconds()
	b.r.set(name+" / floor", ratio)
	b.r.check(name, fmt.Sprintf("<= %.1f x floor", floorTarget),
		fmt.Sprintf("%.2f x (%s/%s)", ratio, took.Round(time.Millisecond), floor.Round(time.Millisecond)), ratio <= floorTarget)
}

// continuedEvent is the Event a bare client writes for q's window closing
// at now, as the controller writes one.
func continuedEvent(q *hitlv1.UserQuestion, now time.Time) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", q.Name, now.UnixNano()), Namespace: q.Namespace},
		EventTime:  metav1.NewMicroTime(now), ReportingController: "bench", ReportingInstance: "bench",
		Action: "Continue", Reason: "Continued", Type: corev1.EventTypeNormal, Note: "floor",
		Regarding: corev1.ObjectReference{Kind: "UserQuestion", APIVersion: hitlv1.GroupVersion.String(), Namespace: q.Namespace, Name: q.Name, UID: q.UID},
	}
}

// spreadFloor is the floor of timed windows spread over SpreadWindow, in
// the same run: with the manager stopped, n questions (the i-th in the
// namespace nsName(i)), their deadlines spread as the manager's were, each
// closed at its deadline by a bare client that writes the Continued status
// the controller writes, and an Event when events is set, and reads
// nothing first. Its lateness, as the agents' watch sees it, is what the
// API server alone allows; a controller cannot do better. The figures are
// named with prefix.
func (b *bench) spreadFloor(ctx context.Context, n int, lead time.Duration, nsName func(int) string, prefix string, events bool) (p99 time.Duration, err error) {
	b.stopManager()
	obs := newObserver()
	if err := obs.run(ctx, b.c, "", scaleLabel, "floor"); err != nil {
		return 0, err
	}
	qs := make([]*hitlv1.UserQuestion, n)
	names, first, err := b.askSpread(ctx, n, b.s.SpreadWindow, lead, func(i int, timeout time.Duration) *hitlv1.UserQuestion {
		qs[i] = builders.Question(fmt.Sprintf("floor-%d", i), nsName(i)).Agent("bench").Label(hitlv1.AgentLabel, "bench").
			Label(scaleLabel, "floor").Ask("q", "Proceed?", "yes", "no").Timeout(timeout).Obj()
		return qs[i]
	})
	if err != nil {
		return 0, err
	}
	if behind := time.Since(first); behind > 0 {
		return 0, fmt.Errorf("the floor's questions were created %s after their first deadline: the lead of %s was too short", behind, lead)
	}
	wait, cancel := context.WithTimeout(ctx, time.Until(first.Add(b.s.SpreadWindow))+60*time.Second)
	defer cancel()
	errs := make(chan error, n)
	for _, q := range qs {
		deadline, _ := q.Deadline()
		time.AfterFunc(time.Until(deadline), func() { errs <- b.closeWindow(wait, q, events) })
	}
	late, early, _, err := lateness(wait, obs, names)
	if err != nil {
		return 0, err
	}
	for range n {
		if err := <-errs; err != nil {
			return 0, fmt.Errorf("the floor's bare client: %w", err)
		}
	}
	b.logSlices(prefix+"a bare client's", late)
	p50, p99, worst := percentiles(late)
	label := fmt.Sprintf("%sa bare client's deadline lateness ms, %d spread", prefix, len(late))
	b.r.set(label+" p50", ms(p50))
	b.r.set(label+" p99", ms(p99))
	b.r.set(label+" max", ms(worst))
	b.r.set(prefix+"early transitions", float64(early))
	return p99, nil
}

// closeWindow writes, as a bare client, what the controller writes when
// the window of q closes now: its Continued status, and an Event when
// event is set.
func (b *bench) closeWindow(ctx context.Context, q *hitlv1.UserQuestion, event bool) error {
	now := time.Now()
	if err := writeDecided(ctx, b.c, q, now, hitlv1.StateContinued); err != nil {
		return err
	}
	if !event {
		return nil
	}
	return b.c.Create(ctx, continuedEvent(q, now))
}
