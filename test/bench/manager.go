// The manager binary: starting it as shipped, stopping it, and waiting
// until its controller is idle between workloads.

package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hitl-dev/hitl/test/testenv"
)

// startManager runs the manager binary with the flags it ships with, as
// its ServiceAccount, and with webhooks, the webhook server the local
// control plane calls.
func (b *bench) startManager(webhooks bool) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	b.metrics = fmt.Sprintf("127.0.0.1:%d", port)
	if port, err = freePort(); err != nil {
		return err
	}
	b.pprof = fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"--kubeconfig", b.kubeconfig, "--metrics-bind-address", b.metrics,
		"--pprof-bind-address", b.pprof, "--health-probe-bind-address", "0",
		// In a Pod, the manager's own namespace; outside, given.
		"--claim-fence-namespace", b.install.Namespace}
	if webhooks {
		wh := testenv.WebhookOptions(b.env)
		args = append(args, "--enable-webhooks", "--webhook-host", wh.Host, "--webhook-port", strconv.Itoa(wh.Port),
			"--webhook-cert-dir", wh.CertDir)
	}
	b.manager = exec.Command(b.managerBin, args...)
	stderr, err := b.manager.StderrPipe()
	if err != nil {
		return err
	}
	synced := make(chan time.Time, 1)
	b.synced = synced
	if err := os.MkdirAll(b.outDir, 0o755); err != nil {
		return err
	}
	// Its log, of every start in the run, goes next to the results.
	logFile, err := os.OpenFile(filepath.Join(b.outDir, "manager.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if err := b.manager.Start(); err != nil {
		logFile.Close()
		return err
	}
	go func() {
		defer logFile.Close()
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			fmt.Fprintln(logFile, s.Text())
			if strings.Contains(s.Text(), "Starting workers") {
				select {
				case synced <- time.Now():
				default:
				}
			}
		}
	}()
	if !webhooks {
		return nil
	}
	return testenv.WaitForWebhooks(b.env, 30*time.Second)
}

func (b *bench) stopManager() {
	if b.manager == nil || b.manager.Process == nil {
		return
	}
	_ = b.manager.Process.Signal(syscall.SIGTERM)
	_ = b.manager.Wait()
	b.manager = nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// quiet waits until the controller's queue has been empty and its workers
// idle for half a second, so that a workload does not measure the tail of the previous
// one (the clean-up's deletions, say).
func (b *bench) quiet(ctx context.Context) error {
	_, err := b.quietFor(ctx, 2*time.Minute, 100*time.Millisecond, 5)
	return err
}

// quietFor is quiet, waiting at most d, reading the manager's metrics
// every interval until calm readings in a row find it idle; it returns the
// time of the first of them, when the controller was seen idle. A reading
// costs the manager little at any size: every figure it serves is kept as
// it goes.
func (b *bench) quietFor(ctx context.Context, d, every time.Duration, calmReadings int) (idleSince time.Time, err error) {
	if b.manager == nil {
		return time.Now(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	calm := 0
	for calm < calmReadings {
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for the controller to go quiet: %w", ctx.Err())
		case <-time.After(every):
		}
		read := time.Now()
		body, err := b.managerMetrics()
		if err != nil {
			return time.Time{}, err
		}
		// The priority queue exports a depth series per priority once an
		// item of that priority has been queued: none yet is depth 0.
		depth, err := seriesOf(body, "workqueue_depth", `name="userquestion"`)
		if err != nil {
			return time.Time{}, err
		}
		busy, err := seriesOf(body, "controller_runtime_active_workers", `controller="userquestion"`)
		if err != nil {
			return time.Time{}, err
		}
		n := 0.0
		for _, v := range depth {
			n += v
		}
		for _, v := range busy {
			n += v
		}
		if n == 0 {
			if calm == 0 {
				idleSince = read
			}
			calm++
		} else {
			calm = 0
		}
	}
	return idleSince, nil
}
