// Command localcp runs the local control plane for `make run` and the
// end-to-end suite: envtest's kube-apiserver and etcd, and
// kube-controller-manager (garbage collection, namespace deletion, aggregated
// ClusterRoles), with hitl's CRDs and
// the manager's shipped RBAC installed, an admin kubeconfig at a fixed path
// for the person at the keyboard, and the manager binary against it as its
// own ServiceAccount, with a token from the TokenRequest API that localcp
// renews. Ctrl-C (or SIGTERM) stops the manager, then the control plane, and
// leaves nothing running.
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
	"strings"
	"syscall"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/controlplane"
)

// minTokenExpiration is the shortest token the TokenRequest API issues.
const minTokenExpiration = 10 * time.Minute

func main() {
	kubeconfig := flag.String("write-kubeconfig", filepath.Join(controlplane.Root(), "bin", "kubeconfig"),
		"where to write the admin kubeconfig; the manager's and the users' kubeconfigs are written beside it")
	manager := flag.String("manager", filepath.Join(controlplane.Root(), "bin", "manager"), "manager binary to run against the control plane; empty runs none")
	users := flag.String("users", "alice", "comma-separated users to write kubeconfigs for (kubeconfig-<user> beside the admin's); they have no permissions until RBAC grants them some")
	expiration := flag.Duration("manager-token-expiration", 24*time.Hour,
		"lifetime to request for the manager's ServiceAccount token (at least 10m); localcp renews it when 80% of its real lifetime has passed")
	kcm := flag.String("kube-controller-manager", controlplane.ControllerManagerBinary(),
		"kube-controller-manager binary to run against the control plane (garbage collection of owned replies and claims, namespace deletion, aggregated ClusterRoles); empty runs none")
	admissionMode := flag.String("admission", controlplane.Policies.String(),
		"how questions and replies are admitted: policies (the default install: admission policies, no webhook), feedback (policies and the optional validating webhook) or webhooks (webhook mode, for clusters without MutatingAdmissionPolicy)")
	flag.Parse()
	mode, err := controlplane.ParseAdmission(*admissionMode)
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcp: --admission:", err)
		os.Exit(2)
	}
	if mode == controlplane.WebhookMode && *manager == "" {
		fmt.Fprintln(os.Stderr, "localcp: --admission webhooks needs the manager, which serves the webhooks that admit every ask and reply")
		os.Exit(2)
	}
	if *expiration < minTokenExpiration {
		fmt.Fprintln(os.Stderr, "localcp: --manager-token-expiration must be at least", minTokenExpiration)
		os.Exit(2)
	}
	var names []string
	for _, u := range strings.Split(*users, ",") {
		if u = strings.TrimSpace(u); u != "" {
			if u == "manager" || strings.ContainsAny(u, "/:") {
				fmt.Fprintf(os.Stderr, "localcp: --users: %q cannot be a user's name here\n", u)
				os.Exit(2)
			}
			names = append(names, u)
		}
	}

	if err := run(*kubeconfig, *manager, *kcm, names, *expiration, mode, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "localcp:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, manager, kcm string, users []string, expiration time.Duration, mode controlplane.Admission, managerArgs []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	env, err := controlplane.WithWebhooks(controlplane.New(), mode)
	if err != nil {
		return err
	}
	if mode == controlplane.WebhookMode {
		controlplane.WithoutMutatingPolicies(env)
	}
	cfg, c, err := controlplane.Start(env)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "localcp: stopping the control plane")
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "localcp: stopping the control plane:", err)
		}
	}()

	dir := filepath.Dir(kubeconfig)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeUserKubeconfig(env, envtest.User{Name: "admin", Groups: []string{"system:masters"}}, kubeconfig); err != nil {
		return err
	}
	if kcm != "" {
		stopKCM, err := controlplane.StartControllerManager(ctx, env, c, kcm, filepath.Join(dir, "kube-controller-manager.log"))
		if err != nil {
			return err
		}
		defer stopKCM()
	}
	var userFiles []string
	for _, u := range users {
		path := filepath.Join(dir, "kubeconfig-"+u)
		if err := writeUserKubeconfig(env, envtest.User{Name: u}, path); err != nil {
			return err
		}
		userFiles = append(userFiles, fmt.Sprintf("    %-8s %s", u, path))
	}

	install, err := controlplane.DefaultInstall()
	if err != nil {
		return err
	}
	if err := install.InstallManagerRBAC(ctx, c); err != nil {
		return fmt.Errorf("installing the manager's RBAC: %w", err)
	}
	// In webhook mode nothing is admitted until the manager serves the
	// mutating webhooks, the probes that wait for the policies included.
	if mode != controlplane.WebhookMode {
		if err := controlplane.InstallAdmission(ctx, c, mode, 0); err != nil {
			return fmt.Errorf("installing admission (%s): %w", mode, err)
		}
	}
	managerKubeconfig := filepath.Join(dir, "kubeconfig-manager")
	tokenFile := filepath.Join(dir, "manager.token")
	renewAt, err := writeManagerToken(ctx, c, install, expiration, tokenFile)
	if err != nil {
		return err
	}
	data, err := controlplane.TokenKubeconfig(cfg, install.ManagerUsername(), "", tokenFile)
	if err != nil {
		return err
	}
	if err := controlplane.WriteFileAtomic(managerKubeconfig, data, 0o600); err != nil {
		return err
	}
	go renewManagerToken(ctx, c, install, expiration, tokenFile, renewAt)

	fmt.Printf("\nThe local control plane is up, with hitl's CRDs, admission (%s) and the manager's RBAC, as config/default installs them. In another shell:\n\n", mode)
	fmt.Printf("    export KUBECONFIG=%s\n    kubectl get uq,qr -A\n\n", kubeconfig)
	// Tests read the store itself to prove what never reaches it (a
	// sensitive answer in the clear).
	fmt.Printf("etcd stores its data in %s\n\n", env.ControlPlane.Etcd.DataDir)
	if len(userFiles) > 0 {
		fmt.Printf("Kubeconfigs of users with no permissions until you bind roles to them (e.g. config/rbac/examples):\n\n%s\n\n", strings.Join(userFiles, "\n"))
	}

	if manager == "" {
		fmt.Println("Press Ctrl-C to stop.")
		<-ctx.Done()
		return nil
	}
	if err := waitForRBAC(ctx, managerKubeconfig); err != nil {
		return err
	}
	args := []string{"--kubeconfig", managerKubeconfig, "--claim-fence-namespace", install.Namespace}
	if mode.Webhooks() {
		wh := controlplane.WebhookOptions(env)
		args = append(args, "--enable-webhooks", "--webhook-host", wh.Host, "--webhook-port", strconv.Itoa(wh.Port), "--webhook-cert-dir", wh.CertDir)
	}
	cmd := exec.Command(manager, append(args, managerArgs...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "KUBECONFIG="+managerKubeconfig)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the manager: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if mode.Webhooks() {
		if err := controlplane.WaitForWebhooks(env, 30*time.Second); err != nil {
			_ = cmd.Process.Kill()
			return err
		}
	}
	if mode == controlplane.WebhookMode {
		if err := controlplane.InstallAdmission(ctx, c, mode, 0); err != nil {
			_ = cmd.Process.Kill()
			return fmt.Errorf("installing admission (%s): %w", mode, err)
		}
	}
	fmt.Printf("\nThe manager runs as %s (kubeconfig %s; metrics on http://127.0.0.1:8080/metrics). Press Ctrl-C to stop.\n\n",
		install.ManagerUsername(), managerKubeconfig)

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

// writeUserKubeconfig writes a kubeconfig that authenticates as user with a
// client certificate.
func writeUserKubeconfig(env *envtest.Environment, user envtest.User, path string) error {
	u, err := env.AddUser(user, nil)
	if err != nil {
		return fmt.Errorf("creating user %s: %w", user.Name, err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		return fmt.Errorf("writing the kubeconfig of %s: %w", user.Name, err)
	}
	return controlplane.WriteFileAtomic(path, data, 0o600)
}

// writeManagerToken writes a new token of the manager's ServiceAccount to
// tokenFile and returns when to renew it.
func writeManagerToken(ctx context.Context, c client.Client, install controlplane.Install, expiration time.Duration, tokenFile string) (time.Time, error) {
	ns, name := install.ManagerServiceAccount()
	now := time.Now()
	token, expires, err := controlplane.RequestToken(ctx, c, ns, name, expiration)
	if err != nil {
		return time.Time{}, err
	}
	if err := controlplane.WriteFileAtomic(tokenFile, []byte(token), 0o600); err != nil {
		return time.Time{}, err
	}
	return now.Add(expires.Sub(now) * 4 / 5), nil
}

// renewManagerToken writes a new token when 80% of the current one's
// lifetime has passed; the manager's client rereads the file within a
// minute. It retries a failed renewal every 10 seconds.
func renewManagerToken(ctx context.Context, c client.Client, install controlplane.Install, expiration time.Duration, tokenFile string, at time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(at)):
		}
		next, err := writeManagerToken(ctx, c, install, expiration, tokenFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "localcp: renewing the manager's token:", err)
			at = time.Now().Add(10 * time.Second)
			continue
		}
		at = next
	}
}

// waitForRBAC waits until the manager's kubeconfig may list questions: the
// API server's RBAC authorizer learns of new bindings from a watch.
func waitForRBAC(ctx context.Context, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(rest.CopyConfig(cfg), client.Options{Scheme: hitlv1.NewScheme()})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "hitl.dev", Resource: "userquestions", Verb: "list"},
		}}
		err := c.Create(ctx, review)
		if err == nil && review.Status.Allowed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager's ServiceAccount may not list userquestions after 30s (err %v, reason %q)", err, review.Status.Reason)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
