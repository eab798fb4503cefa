// Command localcp runs the local control plane for `make run`: envtest's
// kube-apiserver and etcd with hitl's CRDs installed, an admin kubeconfig at
// a fixed path, and the manager binary against it. Ctrl-C (or SIGTERM)
// stops the manager, then the control plane, and leaves nothing behind.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hitl-dev/hitl/test/testenv"
)

func main() {
	kubeconfig := flag.String("write-kubeconfig", filepath.Join(testenv.Root(), "bin", "kubeconfig"), "where to write the admin kubeconfig")
	manager := flag.String("manager", filepath.Join(testenv.Root(), "bin", "manager"), "manager binary to run against the control plane; empty runs none")
	flag.Parse()

	if err := run(*kubeconfig, *manager, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "localcp:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, manager string, managerArgs []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	env := testenv.WithWebhooks(testenv.New())
	if _, _, err := testenv.Start(env); err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "localcp: stopping the control plane")
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "localcp: stopping the control plane:", err)
		}
	}()

	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("creating the admin user: %w", err)
	}
	data, err := admin.KubeConfig()
	if err != nil {
		return fmt.Errorf("writing the admin kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		return err
	}

	fmt.Printf("\nThe local control plane is up, with hitl's CRDs installed. In another shell:\n\n")
	fmt.Printf("    export KUBECONFIG=%s\n    kubectl get uq,qr -A\n\n", kubeconfig)

	if manager == "" {
		fmt.Println("Press Ctrl-C to stop.")
		<-ctx.Done()
		return nil
	}
	wh := testenv.WebhookOptions(env)
	args := []string{"--kubeconfig", kubeconfig, "--webhook-host", wh.Host, "--webhook-port", strconv.Itoa(wh.Port), "--webhook-cert-dir", wh.CertDir}
	cmd := exec.Command(manager, append(args, managerArgs...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the manager: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := testenv.WaitForWebhooks(env, 30*time.Second); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	fmt.Printf("\nThe manager runs, with its webhooks (metrics on http://127.0.0.1:8080/metrics). Press Ctrl-C to stop.\n\n")

	select {
	case err := <-exited:
		return fmt.Errorf("the manager exited: %w", err)
	case <-ctx.Done():
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			return err
		}
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	return nil
}
