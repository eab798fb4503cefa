// Command chaos runs hitl's manager as two leader-elected replicas against
// the local control plane, drives a mixed workload of agents and answerers
// through the SDKs with the roles the project ships, injects faults on a
// schedule (kill -9 of the leader or of both replicas, SIGSTOP of the
// leader past its lease, a restart of kube-apiserver with etcd kept, and a
// replica whose watches lag behind, so that it takes over with stale
// reads), records every version of every question, reply and claim, and
// checks the history against SPEC's promises. It prints a report and exits
// non-zero on any violation. `make chaos` runs it (QUICK=1: about 2
// minutes).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

type options struct {
	managerBin  string
	out         string
	duration    time.Duration
	faultEvery  time.Duration
	concurrency int
	seed        uint64
}

func main() {
	var o options
	quick := flag.Bool("quick", false, "a short run (2 minutes, a fault every 12 s on average)")
	flag.StringVar(&o.managerBin, "manager", "bin/manager", "the manager binary to run as two replicas")
	flag.StringVar(&o.out, "out", "bin/chaos", "directory for the report, the replicas' logs and the API server's audit log")
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "how long the workload and the faults run")
	flag.DurationVar(&o.faultEvery, "fault-every", 20*time.Second, "mean time between faults")
	flag.IntVar(&o.concurrency, "concurrency", 24, "scenarios in flight at once")
	flag.Uint64Var(&o.seed, "seed", 0, "seed of the workload and fault schedule (0: from the clock); the report prints it")
	flag.Parse()
	if *quick {
		o.duration, o.faultEvery, o.concurrency = 2*time.Minute, 12*time.Second, 16
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	// The harness's own clients log nothing (their errors are counted).
	ctrllog.SetLogger(logr.Discard())
	log.SetOutput(io.Discard)
	klog.SetLogger(logr.Discard())
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	rep, err := run(ctx, o)
	if rep != nil {
		rep.print(os.Stdout)
		if werr := rep.write(filepath.Join(o.out, "report.json")); werr != nil {
			fmt.Fprintln(os.Stderr, "chaos: writing the report:", werr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	if len(rep.Violations) > 0 {
		fmt.Fprintf(os.Stderr, "chaos: %d violations (seed %d)\n", len(rep.Violations), o.seed)
		os.Exit(1)
	}
}

// run brings everything up, runs the workload and the faults for
// o.duration, lets the system quiesce, and checks what was recorded.
func run(ctx context.Context, o options) (*report, error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15))
	tl := &timeline{}
	k, err := startCluster(ctx, o.out, tl)
	if err != nil {
		return nil, err
	}
	defer k.stop()

	rec := newRecorder()
	recCtx, stopRec := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRec()
	rec.start(recCtx, k.admin, k.namespace)

	reps, err := startReplicas(ctx, k, o, tl)
	if err != nil {
		return nil, err
	}
	defer reps.stop()
	fmt.Fprintln(os.Stderr, "chaos: waiting for a leader")
	if err := reps.waitForLeader(ctx, 90*time.Second); err != nil {
		return nil, err
	}

	w, err := newWorkload(ctx, k, rng.Uint64(), o.concurrency)
	if err != nil {
		return nil, err
	}
	end := time.Now().Add(o.duration)
	fmt.Fprintf(os.Stderr, "chaos: running the workload and faults for %s (seed %d)\n", o.duration, o.seed)
	faultsDone := make(chan struct{})
	f := &faults{k: k, reps: reps, tl: tl, rng: rand.New(rand.NewPCG(rng.Uint64(), 1)), every: o.faultEvery}
	go func() {
		defer close(faultsDone)
		f.run(ctx, end)
	}()
	w.run(ctx, end)
	<-faultsDone
	fmt.Fprintln(os.Stderr, "chaos: faults over; waiting for every scenario and reply to finish")
	reps.healAll()
	if err := reps.waitForLeader(ctx, 90*time.Second); err != nil {
		return nil, err
	}
	w.wait(ctx, 3*time.Minute)
	rec.quiesce(ctx, k.admin, k.namespace, 90*time.Second)
	stopRec()
	rec.wait()

	rep := &report{Seed: o.seed, Duration: o.duration.String(), FaultEvery: o.faultEvery.String()}
	audit, err := readAudit(k.auditPath)
	if err != nil {
		return nil, err
	}
	checkAll(rep, rec, w.views(), tl, audit)
	rep.Faults = f.Count
	return rep, nil
}
