// Command bench measures hitl against the limit of the API server it runs
// on: it starts the local control plane and the manager binary as shipped
// (its flags, its ServiceAccount and RBAC), runs the workloads of the
// benchmark issue side by side in one run — settling in the default install
// (admission policies, no webhook) and in webhook mode, beside the baseline
// of a bare client — and prints a table (and writes a JSON file) with every
// figure and each target's pass or fail. `make bench` runs it; `make bench
// QUICK=1` runs a smaller version in a few minutes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/hitl-dev/hitl/test/testenv"
)

// scale is the size of each workload.
type scale struct {
	Asks           int // settle throughput: asks per concurrency level
	Pairs          int // settle throughput: rounds of the baseline and the default install, in turn
	LatencySamples int
	ManyOpen       int // "10,000 other questions open"
	SpreadDeadline int // timed questions with deadlines spread over SpreadWindow
	SpreadWindow   time.Duration
	SharedDeadline int
	Claims         int
	ClaimDuration  time.Duration
	ClaimFor       time.Duration
	Overdue        int
	OverdueWindow  time.Duration // the overdue questions' timeout: long enough to ask them all
	MemQuestions   int
	MemClaims      int
	MCPAsks        int // asks answered at once, through MCP and through the Go SDK each
	MCPHeld        int // concurrent blocking MCP calls held open
	FloodClients   int // the flood workload's clients, each its own ServiceAccount
	FloodWorkers   int // goroutines writing per flooding client
	Questions      int // the scale mode's questions (--scale); 0: the workloads above

	// The notifier's workloads (notify.go).
	NotifyAsks      int           // questions asked at once to hitl-notify's webhook channel
	NotifyReminders int           // open questions whose reminders hitl-notify sends
	NotifyWindow    time.Duration // the reminders' due times spread over it
	NotifyChannels  int           // the reminders' channels (and policies, and agents)
}

var full = scale{Asks: 2000, Pairs: 3, LatencySamples: 200, ManyOpen: 10000, SpreadDeadline: 10000, SpreadWindow: 60 * time.Second,
	SharedDeadline: 1000, Claims: 1000, ClaimDuration: 30 * time.Second, ClaimFor: 70 * time.Second, Overdue: 1000, OverdueWindow: 45 * time.Second,
	MemQuestions: 10000, MemClaims: 1000, MCPAsks: 100, MCPHeld: 500, FloodClients: 8, FloodWorkers: 64,
	NotifyAsks: 1000, NotifyReminders: 10000, NotifyWindow: 60 * time.Second, NotifyChannels: 10}

var quick = scale{Asks: 300, Pairs: 3, LatencySamples: 200, ManyOpen: 1000, SpreadDeadline: 1000, SpreadWindow: 15 * time.Second,
	SharedDeadline: 300, Claims: 100, ClaimDuration: 10 * time.Second, ClaimFor: 25 * time.Second, Overdue: 300, OverdueWindow: 15 * time.Second,
	MemQuestions: 1000, MemClaims: 100, MCPAsks: 50, MCPHeld: 500, FloodClients: 8, FloodWorkers: 64,
	NotifyAsks: 1000, NotifyReminders: 1000, NotifyWindow: 15 * time.Second, NotifyChannels: 10}

func main() {
	quickMode := flag.Bool("quick", false, "a smaller run that finishes in a few minutes")
	out := flag.String("out", filepath.Join(testenv.Root(), "bin", "bench", "results.json"), "where to write the figures as JSON")
	manager := flag.String("manager", filepath.Join(testenv.Root(), "bin", "manager"), "the manager binary")
	plugin := flag.String("kubectl-hitl", "", "the kubectl-hitl binary (default: kubectl-hitl beside --manager)")
	notifier := flag.String("hitl-notify", "", "the hitl-notify binary (default: hitl-notify beside --manager)")
	run := flag.String("run", "", "run only the workloads whose names match this regular expression (the baseline always runs)")
	atScale := flag.String("scale", "", "run the scale mode alone with this many questions (100k: 100,000 across 1,000 namespaces)")
	flag.IntVar(&maxInflight, "max-requests-inflight", 0, "the API server's --max-requests-inflight (0: its default, 400)")
	flag.IntVar(&maxMutatingInflight, "max-mutating-requests-inflight", 0, "the API server's --max-mutating-requests-inflight (0: its default, 200)")
	floodClients := flag.Int("flood-clients", 0, "the flood workload's clients, each its own ServiceAccount (0: 8)")
	floodWorkers := flag.Int("flood-workers", 0, "goroutines writing per flooding client (0: 64)")
	floodSpecPath := flag.String("flood", "", "internal: flood the API server as the spec in this file says, until SIGTERM (the flood workload's own process)")
	flag.Parse()
	only, err := regexp.Compile(*run)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: --run:", err)
		os.Exit(1)
	}

	log.SetLogger(zap.New(zap.WriteTo(io.Discard))) // the bench's clients have nothing to log
	if *floodSpecPath != "" {
		if err := floodMain(*floodSpecPath); err != nil {
			fmt.Fprintln(os.Stderr, "bench: flood:", err)
			os.Exit(1)
		}
		return
	}
	s := full
	if *quickMode {
		s = quick
	}
	if *floodClients > 0 {
		s.FloodClients = *floodClients
	}
	if *floodWorkers > 0 {
		s.FloodWorkers = *floodWorkers
	}
	if *atScale != "" {
		n, err := parseScale(*atScale)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		s.Questions = n
	}
	timeout := 60 * time.Minute
	if s.Questions > 0 {
		timeout = 150 * time.Minute // creating the scale mode's objects takes most of it; within the tokens' 3 h
	}
	// Interrupted (Ctrl-C, or killed with SIGTERM), the run ends its
	// workload and still prints and writes the figures it has.
	sigCtx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := context.WithTimeout(sigCtx, timeout)
	defer cancel()
	if *plugin == "" {
		*plugin = filepath.Join(filepath.Dir(*manager), "kubectl-hitl")
	}
	if *notifier == "" {
		*notifier = filepath.Join(filepath.Dir(*manager), "hitl-notify")
	}
	r, err := runAll(ctx, s, binaries{manager: *manager, plugin: *plugin, notifier: *notifier}, filepath.Dir(*out), only)
	if r != nil {
		r.Quick = *quickMode
		r.print(os.Stdout)
		if werr := r.write(*out); werr != nil {
			fmt.Fprintln(os.Stderr, "bench:", werr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if !r.passed() {
		os.Exit(2)
	}
}

// The API server's concurrency limits, when set: API Priority and Fairness
// divides their sum among the priority levels.
var maxInflight, maxMutatingInflight int

// results holds every figure of one run.
type results struct {
	Quick   bool               `json:"quick"`
	Scale   int                `json:"scale,omitempty"` // the scale mode's questions`
	Figures map[string]float64 `json:"figures"`
	Targets []target           `json:"targets"`
	order   []string
	rows    []string        // the metrics measured per admission mode, in order
	perMode map[string]bool // the figures that are in rows' columns
}

// columns are the admission modes the bench compares, in the order of the
// table's columns: the bare client, the default install, webhook mode.
var columns = []testenv.Admission{none, testenv.Policies, testenv.WebhookMode}

// tableRows are the table's first rows, in this order; the latency rows,
// named after the scale, follow.
var tableRows = []string{
	"asks/s, concurrency 1",
	"asks/s, concurrency 32",
	"settle / baseline, concurrency 1",
	"settle / baseline, concurrency 32",
	"baseline CPU / settle CPU per ask, concurrency 32",
	"apiserver CPU per ask / baseline's, concurrency 32",
	"API writes per ask, concurrency 32",
	"SubjectAccessReviews per ask",
	"admission webhook calls per ask",
	"API server ms per ask in hitl's admission",
	"CPU ms per ask, concurrency 32, kube-apiserver",
	"CPU ms per ask, concurrency 32, etcd",
	"CPU ms per ask, concurrency 32, manager",
	"CPU ms per ask, concurrency 32, bench",
	"CPU ms per ask, concurrency 32, all",
	"cores used by other processes, concurrency 1",
	"cores used by other processes, concurrency 32",
}

// figureName is the name of a per-mode figure: "<metric>, <mode>".
func figureName(metric string, mode testenv.Admission) string {
	return metric + ", " + modeName(mode)
}

type target struct {
	Name   string `json:"name"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Passed bool   `json:"passed"`
}

func (r *results) set(name string, v float64) {
	if _, ok := r.Figures[name]; !ok {
		r.order = append(r.order, name)
	}
	r.Figures[name] = v
}

// setMode records a metric measured in one admission mode, as one cell of
// the table that puts the modes side by side.
func (r *results) setMode(metric string, mode testenv.Admission, v float64) {
	if r.perMode == nil {
		r.perMode = map[string]bool{}
	}
	name := figureName(metric, mode)
	r.perMode[name] = true
	if !slices.Contains(r.rows, metric) {
		r.rows = append(r.rows, metric)
	}
	r.set(name, v)
}

func (r *results) check(name, want, got string, ok bool) {
	r.Targets = append(r.Targets, target{Name: name, Want: want, Got: got, Passed: ok})
}

func (r *results) passed() bool {
	for _, t := range r.Targets {
		if !t.Passed {
			return false
		}
	}
	return true
}

func (r *results) print(w *os.File) {
	if len(r.rows) > 0 {
		r.printModes(w)
	}
	fmt.Fprintf(w, "\n%-58s %14s\n", "other figures (default install: policies, no webhook)", "value")
	for _, name := range r.order {
		if !r.perMode[name] {
			fmt.Fprintf(w, "%-58s %14.2f\n", name, r.Figures[name])
		}
	}
	fmt.Fprintf(w, "\n%-44s %-18s %-22s %s\n", "target", "want", "got", "")
	for _, t := range r.Targets {
		verdict := "PASS"
		if !t.Passed {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "%-44s %-18s %-22s %s\n", t.Name, t.Want, t.Got, verdict)
	}
}

// printModes prints the table of the figures measured per admission mode,
// one column per mode.
func (r *results) printModes(w *os.File) {
	fmt.Fprintf(w, "\n%-52s", "figure")
	for _, m := range columns {
		fmt.Fprintf(w, " %10s", modeName(m))
	}
	fmt.Fprintln(w)
	rows := slices.Clone(tableRows)
	for _, metric := range r.rows {
		if !slices.Contains(rows, metric) {
			rows = append(rows, metric)
		}
	}
	for _, metric := range rows {
		if !slices.Contains(r.rows, metric) {
			continue
		}
		fmt.Fprintf(w, "%-52s", metric)
		for _, m := range columns {
			if v, ok := r.Figures[figureName(metric, m)]; ok {
				fmt.Fprintf(w, " %10.2f", v)
			} else {
				fmt.Fprintf(w, " %10s", "-")
			}
		}
		fmt.Fprintln(w)
	}
}

func (r *results) write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
