package gitops

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// fluxNamespace is where the controllers run (RUNTIME_NAMESPACE), as
// `flux install` puts them.
const fluxNamespace = "flux-system"

// fluxAssets is the directory of hack/flux-assets.sh: the controllers'
// binaries and crds/.
func fluxAssets(root string) string {
	if dir := os.Getenv("FLUX_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join(root, "bin", "flux")
}

// startController runs a Flux controller binary of dir as a process that
// authenticates with kubeconfig, serves its metrics and health probes on
// loopback ports, and logs to a file that the test prints when it fails.
// It returns once the controller reports ready; the end of t stops it.
func startController(t *testing.T, dir, name, kubeconfig string, args ...string) {
	t.Helper()
	work := t.TempDir()
	logPath := filepath.Join(work, name+".log")
	logs, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	health := freePort(t)
	cmd := exec.Command(filepath.Join(dir, name), append([]string{
		"--enable-leader-election=false",
		"--metrics-addr=" + freePort(t),
		"--health-addr=" + health,
		// The default, JSON, is for log collectors; this log is read by
		// people when a test fails.
		"--log-encoding=console",
		// Flux's own events go to the API server only; no
		// notification-controller runs.
		"--events-addr=",
	}, args...)...)
	// The controllers have no --kubeconfig flag: controller-runtime reads
	// KUBECONFIG. TMPDIR keeps their scratch files (clones, builds) inside
	// the test's directory.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "RUNTIME_NAMESPACE="+fluxNamespace, "TMPDIR="+work)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stopProcess(t, name, cmd, exited)
		_ = logs.Close()
		if t.Failed() {
			printLog(t, name, logPath)
		}
	})
	if err := waitReady(health, exited, time.Minute); err != nil {
		t.Fatalf("%s (log %s): %v", name, logPath, err)
	}
}

// stopProcess ends a controller as the kubelet would: SIGTERM, then SIGKILL
// after a grace period, so that no process outlives the test.
func stopProcess(t *testing.T, name string, cmd *exec.Cmd, exited <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Errorf("%s did not stop within 15s of SIGTERM; killing it", name)
		_ = cmd.Process.Kill()
		<-exited
	}
}

// waitReady polls a controller's readiness probe (controller-runtime's
// /readyz) until it answers 200, the process exits, or timeout passes.
func waitReady(addr string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz: %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %w", timeout, err)
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before it was ready")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePort returns a loopback address with a port that is free now. The
// controllers bind their own listeners, so the port is closed again here;
// another process could take it in between, which on a test machine is
// rare enough.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// printLog prints the last lines of a controller's log to the test's log.
func printLog(t *testing.T, name, path string) {
	f, err := os.Open(path)
	if err != nil {
		t.Logf("%s's log: %v", name, err)
		return
	}
	defer f.Close()
	const keep = 80
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > keep {
			lines = lines[1:]
		}
	}
	t.Logf("the last %d lines of %s's log:", len(lines), name)
	for _, l := range lines {
		t.Log("  " + l)
	}
}
