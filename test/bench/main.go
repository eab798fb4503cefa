// Command bench measures hitl against the limit of the API server it runs
// on: it starts the local control plane and the manager binary as shipped,
// runs the workloads of the benchmark issue side by side in one run, and
// prints a table (and writes a JSON file) with every figure and each
// target's pass or fail. `make bench` runs it; `make bench QUICK=1` runs a
// smaller version in a few minutes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/hitl-dev/hitl/test/testenv"
)

// scale is the size of each workload.
type scale struct {
	Asks           int // settle throughput: asks per concurrency level
	LatencySamples int
	ManyOpen       int // "10,000 other questions open"
	SpreadDeadline int // timed questions with deadlines spread over SpreadWindow
	SpreadWindow   time.Duration
	SharedDeadline int
	Claims         int
	ClaimLease     time.Duration
	ClaimFor       time.Duration
	Overdue        int
	OverdueWindow  time.Duration // the overdue questions' timeout: long enough to ask them all
	MemQuestions   int
	MemClaims      int
}

var full = scale{Asks: 2000, LatencySamples: 200, ManyOpen: 10000, SpreadDeadline: 10000, SpreadWindow: 60 * time.Second,
	SharedDeadline: 1000, Claims: 1000, ClaimLease: 30 * time.Second, ClaimFor: 70 * time.Second, Overdue: 1000, OverdueWindow: 45 * time.Second,
	MemQuestions: 10000, MemClaims: 1000}

var quick = scale{Asks: 300, LatencySamples: 200, ManyOpen: 1000, SpreadDeadline: 1000, SpreadWindow: 15 * time.Second,
	SharedDeadline: 300, Claims: 100, ClaimLease: 10 * time.Second, ClaimFor: 25 * time.Second, Overdue: 300, OverdueWindow: 15 * time.Second,
	MemQuestions: 1000, MemClaims: 100}

func main() {
	quickMode := flag.Bool("quick", false, "a smaller run that finishes in a few minutes")
	out := flag.String("out", filepath.Join(testenv.Root(), "bin", "bench", "results.json"), "where to write the figures as JSON")
	manager := flag.String("manager", filepath.Join(testenv.Root(), "bin", "manager"), "the manager binary")
	run := flag.String("run", "", "run only the workloads whose names match this regular expression (the baseline always runs)")
	flag.Parse()
	only, err := regexp.Compile(*run)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: --run:", err)
		os.Exit(1)
	}

	s := full
	if *quickMode {
		s = quick
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	r, err := runAll(ctx, s, *manager, filepath.Dir(*out), only)
	if r != nil {
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

// results holds every figure of one run.
type results struct {
	Quick   bool               `json:"quick"`
	Figures map[string]float64 `json:"figures"`
	Targets []target           `json:"targets"`
	order   []string
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
	fmt.Fprintf(w, "\n%-58s %14s\n", "figure", "value")
	for _, name := range r.order {
		fmt.Fprintf(w, "%-58s %14.2f\n", name, r.Figures[name])
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
