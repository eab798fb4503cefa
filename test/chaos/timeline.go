package main

import (
	"sort"
	"sync"
	"time"
)

// event is one thing the harness did or saw a replica do.
type event struct {
	At      time.Time `json:"at"`
	Replica string    `json:"replica,omitempty"`
	// Kind is start, exit, kill, stop, cont, acquired (the replica's log
	// says it acquired the lease), workers (its controllers started: its
	// cache is synced), lost (its log says it lost the lease),
	// apiserver-down, apiserver-up, lag-on or lag-off.
	Kind   string `json:"kind"`
	Detail string `json:"detail,omitempty"`
}

type timeline struct {
	mu     sync.Mutex
	events []event
}

func (t *timeline) add(replica, kind, detail string) {
	t.addAt(time.Now(), replica, kind, detail)
}

func (t *timeline) addAt(at time.Time, replica, kind, detail string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, event{At: at, Replica: replica, Kind: kind, Detail: detail})
}

func (t *timeline) all() []event {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]event(nil), t.events...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// span is a half-open interval of time.
type span struct{ from, to time.Time }

func (s span) contains(t time.Time) bool { return !t.Before(s.from) && t.Before(s.to) }

// leadership derives from the events, for each replica, the spans in
// which it led with its workers running and the API server up (serving),
// and the spans in which it was deposed: another replica had acquired the
// lease after it did, and it had not exited yet (a woken hung leader that
// may still believe it leads).
type leadership struct {
	serving []span
	// deposed spans by replica.
	deposed map[string][]span
}

func leadershipOf(events []event, end time.Time) leadership {
	l := leadership{deposed: map[string][]span{}}
	type state struct {
		alive, stopped, leading, workers, lagging bool
		acquiredAt                                time.Time
		deposedFrom                               time.Time
	}
	st := map[string]*state{}
	get := func(r string) *state {
		if st[r] == nil {
			st[r] = &state{}
		}
		return st[r]
	}
	apiUp := true
	var servingFrom time.Time
	serving := func() bool {
		if !apiUp {
			return false
		}
		for _, s := range st {
			if s.alive && !s.stopped && s.leading && s.workers && !s.lagging && s.deposedFrom.IsZero() {
				return true
			}
		}
		return false
	}
	for _, e := range events {
		before := serving()
		switch e.Kind {
		case "start":
			s := get(e.Replica)
			*s = state{alive: true, lagging: s.lagging}
		case "exit", "kill":
			// SIGKILL ends a replica at once; its exit is only seen later.
			s := get(e.Replica)
			if !s.deposedFrom.IsZero() {
				l.deposed[e.Replica] = append(l.deposed[e.Replica], span{s.deposedFrom, e.At})
			}
			*s = state{lagging: s.lagging}
		case "lost":
			s := get(e.Replica)
			s.leading = false
		case "stop":
			get(e.Replica).stopped = true
		case "cont":
			get(e.Replica).stopped = false
		case "acquired":
			s := get(e.Replica)
			s.leading, s.acquiredAt = true, e.At
			for r, o := range st {
				if r != e.Replica && o.leading && o.alive && o.deposedFrom.IsZero() {
					o.deposedFrom = e.At
				}
			}
		case "workers":
			get(e.Replica).workers = true
		case "lag-on":
			get(e.Replica).lagging = true
		case "lag-off":
			get(e.Replica).lagging = false
		case "apiserver-down":
			apiUp = false
		case "apiserver-up":
			apiUp = true
		}
		after := serving()
		switch {
		case !before && after:
			servingFrom = e.At
		case before && !after:
			l.serving = append(l.serving, span{servingFrom, e.At})
		}
	}
	if serving() {
		l.serving = append(l.serving, span{servingFrom, end})
	}
	for r, s := range st {
		if !s.deposedFrom.IsZero() {
			l.deposed[r] = append(l.deposed[r], span{s.deposedFrom, end})
		}
	}
	return l
}

// servingAt returns the first moment at or after t when a leader served:
// t itself when one did, the start of the next serving span otherwise,
// and false when none came.
func (l leadership) servingAt(t time.Time) (time.Time, bool) {
	for _, s := range l.serving {
		if s.contains(t) {
			return t, true
		}
		if s.from.After(t) {
			return s.from, true
		}
	}
	return time.Time{}, false
}

// served is how long a leader served between from and to.
func (l leadership) served(from, to time.Time) time.Duration {
	var d time.Duration
	for _, s := range l.serving {
		a, b := s.from, s.to
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			d += b.Sub(a)
		}
	}
	return d
}

func (l leadership) deposedAt(replica string, t time.Time) bool {
	for _, s := range l.deposed[replica] {
		if s.contains(t) {
			return true
		}
	}
	return false
}
