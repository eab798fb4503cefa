package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// TestAskInterrupted runs the built kubectl-hitl binary's `ask` against the
// local control plane, interrupts it while it waits for the answer, and
// checks what the help and the README promise: the question is cancelled,
// and ask exits with ExitAborted and an ASK_ABORTED message, not a panic.
func TestAskInterrupted(t *testing.T) {
	k := startCluster(t)
	bin := plugin(t)
	config := adminKubeconfig(t, k)
	file := filepath.Join(t.TempDir(), "q.yaml")
	if err := os.WriteFile(file, []byte(`agent: bot
questions:
  - id: env
    question: Where should I deploy?
    options: [{label: staging}, {label: prod}]
`), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			ns := newNamespace(t, k)
			cmd := exec.Command(bin, "--kubeconfig", config, "-n", ns, "ask", "-f", file, "--name", "stop-me")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill() }()
			eventually(t, 30*time.Second, func() bool {
				q, err := getQuestion(t, k, ns, "stop-me")
				return err == nil && q.Status.State == hitlv1.StateOpen
			}, func() string { return "the question was not asked and Open" })

			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("ask did not end after %s\nstderr:\n%s", sig, stderr.String())
			}
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(stderr.String(), "panic") || strings.Contains(stderr.String(), "goroutine ") {
				t.Fatalf("ask panicked on %s:\n%s", sig, stderr.String())
			}
			if code != ExitAborted {
				t.Errorf("exit status %d after %s, want %d\nstderr:\n%s", code, sig, ExitAborted, stderr.String())
			}
			if !strings.Contains(stderr.String(), "ASK_ABORTED: ") {
				t.Errorf("stderr does not say ASK_ABORTED:\n%s", stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("an interrupted ask prints no result, got:\n%s", stdout.String())
			}
			q, err := getQuestion(t, k, ns, "stop-me")
			if err != nil || !q.Spec.Cancelled {
				t.Fatalf("the question is not cancelled (spec.cancelled false): %v", err)
			}
			eventually(t, 15*time.Second, func() bool {
				q, err := getQuestion(t, k, ns, "stop-me")
				return err == nil && q.Status.State == hitlv1.StateCancelled
			}, func() string { return "the question did not become Cancelled" })
		})
	}
}
