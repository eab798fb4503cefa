package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

type failover struct {
	Fault     string    `json:"fault"`
	At        time.Time `json:"at"`
	NewLeader string    `json:"newLeader"`
	// Milliseconds from the fault to the new leader's acquisition of the
	// lease, to its workers (cache synced), and to its first write to a
	// question or reply (0: none).
	ToAcquire    float64 `json:"toAcquireMs"`
	ToWorkers    float64 `json:"toWorkersMs"`
	ToFirstWrite float64 `json:"toFirstWriteMs"`
}

type deposedWrites struct {
	// Total writes to questions, replies, claims and Events a replica
	// sent while another replica held the lease; Succeeded of them were
	// accepted, Conflicts refused by resourceVersion guards.
	Total      int            `json:"total"`
	Succeeded  int            `json:"succeeded"`
	Conflicts  int            `json:"conflicts"`
	ByResource map[string]int `json:"byResource"`
}

type stats struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50Ms"`
	P99 float64 `json:"p99Ms"`
	Max float64 `json:"maxMs"`
}

func statsOf(d []time.Duration) stats {
	if len(d) == 0 {
		return stats{}
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(p float64) float64 { return ms(s[min(len(s)-1, int(p*float64(len(s))))]) }
	return stats{N: len(s), P50: at(0.50), P99: at(0.99), Max: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type report struct {
	Seed         uint64            `json:"seed"`
	Duration     string            `json:"duration"`
	FaultEvery   string            `json:"faultEvery"`
	Faults       map[string]int    `json:"faults"`
	Ops          map[string]int    `json:"operations"`
	ClientErrors map[string]int    `json:"clientErrors"`
	ErrorSamples map[string]string `json:"errorSamples"`
	Objects      map[string]int    `json:"objects"`
	Outcomes     map[string]int    `json:"replyOutcomes"`
	States       map[string]int    `json:"questionStates"`
	Relists      int               `json:"recorderLists"`
	// UnseenWithdrawn counts the replies queued and withdrawn while the
	// recorder was not watching.
	UnseenWithdrawn int           `json:"unseenWithdrawn"`
	Failovers       []failover    `json:"failovers"`
	Deposed         deposedWrites `json:"deposedWrites"`
	Approvals       approvalStats `json:"approvals"`

	Settle stats `json:"settleLatency"`
	// Lateness of windows closed (Continued) after their deadline: Raw
	// from the deadline; FromLeader from the deadline or, when no leader
	// served then, from the moment one served again; AfterTakeover only
	// those whose deadline passed while no leader served; Claimed from
	// the end of the last live claim.
	LatenessRaw           stats `json:"latenessRaw"`
	LatenessFromLeader    stats `json:"latenessFromLeader"`
	LatenessAfterTakeover stats `json:"latenessAfterTakeover"`
	LatenessClaimed       stats `json:"latenessClaimed"`

	Violations []violation `json:"violations"`
	// Timeline is what the harness did and saw the replicas do.
	Timeline []event `json:"timeline"`

	settle   []time.Duration
	lateness struct{ raw, fromLeader, afterTakeover, claimed []time.Duration }
}

func (r *report) summarize() {
	r.Settle = statsOf(r.settle)
	r.LatenessRaw = statsOf(r.lateness.raw)
	r.LatenessFromLeader = statsOf(r.lateness.fromLeader)
	r.LatenessAfterTakeover = statsOf(r.lateness.afterTakeover)
	r.LatenessClaimed = statsOf(r.lateness.claimed)
}

func (r *report) write(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func counts(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		name := k
		if name == "" {
			name = "(none)"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, m[k]))
	}
	return strings.Join(parts, ", ")
}

func (r *report) print(w io.Writer) {
	r.summarize()
	fmt.Fprintf(w, "\nhitl chaos report (seed %d, %s, a fault every %s on average)\n\n", r.Seed, r.Duration, r.FaultEvery)
	fmt.Fprintf(w, "faults:           %s\n", counts(r.Faults))
	fmt.Fprintf(w, "operations:       %s\n", counts(r.Ops))
	fmt.Fprintf(w, "client errors:    %s\n", counts(r.ClientErrors))
	for _, k := range sortedKeys(r.ErrorSamples) {
		fmt.Fprintf(w, "  first %s error: %s\n", k, r.ErrorSamples[k])
	}
	fmt.Fprintf(w, "objects:          %s (recorder lists %d)\n", counts(r.Objects), r.Relists)
	if r.UnseenWithdrawn > 0 {
		fmt.Fprintf(w, "                  %d replies queued and withdrawn while the recorder was not watching\n", r.UnseenWithdrawn)
	}
	fmt.Fprintf(w, "reply outcomes:   %s\n", counts(r.Outcomes))
	fmt.Fprintf(w, "question states:  %s\n", counts(r.States))
	a := r.Approvals
	fmt.Fprintf(w, "approvals:        governed questions %d (settled %d), votes %d (%d in settlements), Counted replies %d, DUPLICATE_VOTE %d, SELF_APPROVAL %d; approval invariants checked %d\n",
		a.Governed, a.Settled, a.Votes, a.SettledVotes, a.Counted, a.DuplicateVotes, a.SelfApprovals, a.Checked)
	var acquire, workers, write []time.Duration
	for _, f := range r.Failovers {
		acquire = append(acquire, time.Duration(f.ToAcquire*float64(time.Millisecond)))
		workers = append(workers, time.Duration(f.ToWorkers*float64(time.Millisecond)))
		if f.ToFirstWrite > 0 {
			write = append(write, time.Duration(f.ToFirstWrite*float64(time.Millisecond)))
		}
	}
	row := func(name string, s stats) {
		fmt.Fprintf(w, "  %-34s n=%-5d p50 %8.1f ms  p99 %8.1f ms  max %8.1f ms\n", name, s.N, s.P50, s.P99, s.Max)
	}
	fmt.Fprintln(w, "failover (fault → new leader):")
	row("lease acquired", statsOf(acquire))
	row("workers started (cache synced)", statsOf(workers))
	row("first write to a question/reply", statsOf(write))
	fmt.Fprintln(w, "latency:")
	row("settle (reply sent → Settled seen)", r.Settle)
	row("window close, from the deadline", r.LatenessRaw)
	row("  from a serving leader", r.LatenessFromLeader)
	row("  deadline passed with no leader", r.LatenessAfterTakeover)
	row("  claimed, from the claim's end", r.LatenessClaimed)
	fmt.Fprintf(w, "writes by deposed leaders: %d (%d accepted, %d conflicts) %s\n", r.Deposed.Total, r.Deposed.Succeeded,
		r.Deposed.Conflicts, counts(r.Deposed.ByResource))
	fmt.Fprintf(w, "\nviolations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(w, "\n  [%s] %s: %s\n", v.Rule, v.Object, v.Message)
		for _, h := range v.History {
			fmt.Fprintf(w, "      %s\n", h)
		}
	}
}
