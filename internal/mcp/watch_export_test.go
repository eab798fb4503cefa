package mcp

import (
	"bufio"
	"bytes"
	"context"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// SetLinger sets how long a shared watch no call waits on stays open, and
// returns the function that restores it.
func SetLinger(d time.Duration) (restore func()) {
	watches.mu.Lock()
	defer watches.mu.Unlock()
	old := linger
	linger = d
	return func() {
		watches.mu.Lock()
		defer watches.mu.Unlock()
		linger = old
	}
}

// WatchState is what the registry holds of one shared watch.
type WatchState struct {
	// Open is whether the watch of the key is open.
	Open bool
	// Waiting is the calls waiting on it, by question name.
	Waiting map[string]int
	// Waiters is how many calls wait on it.
	Waiters int
	// Ended is closed once its informer stopped (nil when not open).
	Ended <-chan struct{}
}

// Watching is the shared watch of agent's questions in namespace through
// c (whose Caller.Key is key, used when c cannot be a map key).
func Watching(c client.WithWatch, key, namespace, agent string) WatchState {
	watches.mu.Lock()
	defer watches.mu.Unlock()
	w := watches.open[keyOf(&Caller{Key: key, Client: c, Namespace: namespace, Agent: agent})]
	if w == nil {
		return WatchState{}
	}
	st := WatchState{Open: true, Waiting: map[string]int{}, Waiters: w.count, Ended: w.ended}
	for name, set := range w.waiters {
		st.Waiting[name] = len(set)
	}
	return st
}

// WatchesOf is how many shared watches through c are open, and how many
// calls wait on them in all.
func WatchesOf(c client.WithWatch) (watchesOpen, waiters int) {
	watches.mu.Lock()
	defer watches.mu.Unlock()
	for key, w := range watches.open {
		if key.client == any(c) {
			watchesOpen++
			waiters += w.count
		}
	}
	return watchesOpen, waiters
}

// WatchGoroutines is how many goroutines carry a shared watch's label,
// by namespace/agent.
func WatchGoroutines() map[string]int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	out := map[string]int{}
	// debug=1: "N @ 0x..." then, for labelled goroutines,
	// "# labels: {"key":"value", ...}".
	n := 0
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, " @ 0x"); i > 0 {
			n, _ = strconv.Atoi(line[:i])
			continue
		}
		const prefix = "# labels: "
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		marker := strconv.Quote(watchLabel) + ":"
		if i := strings.Index(line, marker); i >= 0 {
			v := line[i+len(marker):]
			if uq, err := strconv.QuotedPrefix(v); err == nil {
				if s, err := strconv.Unquote(uq); err == nil {
					out[s] += n
				}
			}
		}
	}
	return out
}

// Wait waits as a call does until c's question name leaves Open.
func Wait(ctx context.Context, c *Caller, name string) (*hitlv1.UserQuestion, error) {
	return wait(ctx, c, name)
}
