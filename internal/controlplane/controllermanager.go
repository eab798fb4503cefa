package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControllerManagerBinary is where StartControllerManager looks for
// kube-controller-manager by default: beside kube-apiserver, in
// KUBEBUILDER_ASSETS (`make controller-manager` builds it there).
func ControllerManagerBinary() string {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(Root(), "bin", "k8s")
	}
	return filepath.Join(dir, "kube-controller-manager")
}

// StartControllerManager runs kube-controller-manager against a started
// env, so that the local control plane does what a cluster's does for hitl:
// the garbage collector deletes the replies and claims a deleted question
// owned, the namespace controller empties a deleted namespace, and
// ClusterRoles aggregate into admin, edit and view. It authenticates as
// system:kube-controller-manager (a client certificate) and runs each
// controller as its own ServiceAccount, as kubeadm clusters do. Its log goes
// to logFile. stop ends it.
func StartControllerManager(ctx context.Context, env *envtest.Environment, c client.Client, binary, logFile string) (stop func(), err error) {
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("kube-controller-manager: %w (run `make controller-manager`)", err)
	}
	user, err := env.AddUser(envtest.User{Name: "system:kube-controller-manager"}, nil)
	if err != nil {
		return nil, fmt.Errorf("creating kube-controller-manager's user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "localcp-kcm-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := WriteFileAtomic(path, kubeconfig, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	logs, err := os.Create(logFile)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(binary,
		"--kubeconfig", path,
		"--authentication-kubeconfig", path,
		"--authorization-kubeconfig", path,
		"--use-service-account-credentials",
		"--leader-elect=false",
		"--bind-address", "127.0.0.1",
		// No HTTPS endpoint: nothing here reads its health or metrics.
		"--secure-port", "0",
		"--profiling=false",
	)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		logs.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logs.Close()
		_ = os.RemoveAll(dir)
	}
	if err := waitForAggregation(ctx, c, exited); err != nil {
		stop()
		return nil, fmt.Errorf("kube-controller-manager (log %s): %w", logFile, err)
	}
	return stop, nil
}

// waitForAggregation waits until the clusterrole-aggregation controller has
// filled the edit ClusterRole: a sign that kube-controller-manager runs its
// controllers with their own credentials.
func waitForAggregation(ctx context.Context, c client.Client, exited <-chan error) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		var edit rbacv1.ClusterRole
		err := c.Get(ctx, client.ObjectKey{Name: "edit"}, &edit)
		if err == nil && len(edit.Rules) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the edit ClusterRole has no aggregated rules after 60s (err %v)", err)
		}
		select {
		case err := <-exited:
			return errors.Join(errors.New("exited"), err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
