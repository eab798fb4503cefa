package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/controlplane"
)

const (
	agents    = 6
	answerers = 4
	// governedAgent's questions are governed by the ApprovalPolicy
	// chaos-two-approvers, which the platform identity writes at start:
	// each needs two distinct answerers, one of them among the first
	// three (the set "core"), so that any two distinct answerers meet it.
	governedAgent = "agent-0"
	policyName    = "chaos-two-approvers"
	platform      = "platform"
)

// cluster is the local control plane: etcd and a kube-apiserver that the
// faults may kill and start again with the same command line (so with the
// same certificates, port and etcd), an audit log of every write to hitl's
// objects (claims included) and to Leases (the managers' leader election),
// and the identities of the workload.
type cluster struct {
	env       *envtest.Environment
	cfg       *rest.Config
	admin     client.WithWatch
	install   controlplane.Install
	namespace string
	auditPath string
	out       string
	tl        *timeline

	mu sync.Mutex
	// api is the kube-apiserver started again by restartAPIServer; nil
	// while envtest's own process runs.
	api     *exec.Cmd
	apiArgs []string
	apiEnv  []string
}

// auditPolicy records who wrote what and when (Metadata: no bodies), for
// hitl's objects (questions, replies, QuestionClaims) and Leases (leader
// election): enough to attribute every write to a replica and to date
// every claim's renewals and release.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
    resources:
      - group: hitl.dev
      - group: coordination.k8s.io
        resources: [leases]
  - level: None
`

func startCluster(ctx context.Context, out string, tl *timeline) (*cluster, error) {
	k := &cluster{namespace: "chaos", out: out, tl: tl, auditPath: filepath.Join(out, "audit.log")}
	_ = os.Remove(k.auditPath)
	policy := filepath.Join(out, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, err
	}
	k.env = controlplane.New()
	k.env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", k.auditPath).
		Set("audit-log-format", "json").
		Set("audit-log-mode", "blocking")
	fmt.Fprintln(os.Stderr, "chaos: starting the local control plane")
	cfg, _, err := controlplane.Start(k.env)
	if err != nil {
		return nil, err
	}
	k.cfg = rest.CopyConfig(cfg)
	k.cfg.QPS, k.cfg.Burst = 2000, 4000
	if k.admin, err = client.NewWithWatch(k.cfg, client.Options{Scheme: hitlv1.NewScheme()}); err != nil {
		k.stop()
		return nil, err
	}
	if err := k.setUp(ctx); err != nil {
		k.stop()
		return nil, err
	}
	return k, nil
}

// setUp installs what config/default installs (the manager's RBAC and the
// admission policies), and the workload's identities: agents as
// ServiceAccounts named after themselves with the hitl-agent role, and
// answerers as ServiceAccounts with the hitl-answerer role for those agents.
func (k *cluster) setUp(ctx context.Context) error {
	var err error
	if k.install, err = controlplane.DefaultInstall(); err != nil {
		return err
	}
	if err := k.install.InstallManagerRBAC(ctx, k.admin); err != nil {
		return err
	}
	if err := controlplane.InstallAdmission(ctx, k.admin, controlplane.Policies, 0); err != nil {
		return err
	}
	if err := k.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.namespace}}); err != nil {
		return err
	}
	var names []string
	for i := range agents {
		names = append(names, agentName(i))
	}
	for _, role := range []struct{ file, binding string }{{"hitl_agent.yaml", "agent"}, {"hitl_answerer.yaml", "answerer"}} {
		cr, err := exampleRole(role.file, names)
		if err != nil {
			return err
		}
		if err := k.admin.Create(ctx, cr); err != nil {
			return err
		}
		b := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: cr.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		}
		n := agents
		if role.binding == "answerer" {
			n = answerers
		}
		for i := range n {
			sa := agentName(i)
			if role.binding == "answerer" {
				sa = answererName(i)
			}
			b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: k.namespace, Name: sa})
			if err := k.admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: sa}}); err != nil {
				return err
			}
		}
		if err := k.admin.Create(ctx, b); err != nil {
			return err
		}
	}
	return k.governOneAgent(ctx)
}

// governOneAgent binds the shipped hitl-policy-admin role to the platform
// ServiceAccount and, as that identity, writes the ApprovalPolicy that
// governs governedAgent's questions. It is written before the replicas
// start, so that their caches hold it when the first question is asked.
func (k *cluster) governOneAgent(ctx context.Context) error {
	cr, err := exampleRole("hitl_policy_admin.yaml", nil)
	if err != nil {
		return err
	}
	if err := k.admin.Create(ctx, cr); err != nil {
		return err
	}
	if err := k.admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: platform}}); err != nil {
		return err
	}
	if err := k.admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: cr.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: k.namespace, Name: platform}},
	}); err != nil {
		return err
	}
	c, err := k.client(ctx, k.namespace, platform)
	if err != nil {
		return err
	}
	var core []string
	for i := range min(3, answerers) {
		core = append(core, serviceAccountUser(k.namespace, answererName(i)))
	}
	return c.Create(ctx, &hitlv1.ApprovalPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: policyName},
		Spec: hitlv1.ApprovalPolicySpec{
			Selector: hitlv1.ApprovalSelector{Agents: []string{governedAgent}},
			Rule: hitlv1.ApprovalRule{Approvals: 2,
				From: []hitlv1.ApproverSet{{Name: "core", Users: core, Minimum: 1}}},
		},
	})
}

func serviceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

func agentName(i int) string    { return fmt.Sprintf("agent-%d", i) }
func answererName(i int) string { return fmt.Sprintf("answerer-%d", i) }

// exampleRole reads a shipped example role of config/rbac/examples with
// its agent names replaced by ours.
func exampleRole(file string, agentNames []string) (*rbacv1.ClusterRole, error) {
	data, err := os.ReadFile(filepath.Join(controlplane.Root(), "config", "rbac", "examples", file))
	if err != nil {
		return nil, err
	}
	cr := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, cr); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for i := range cr.Rules {
		if len(cr.Rules[i].ResourceNames) > 0 {
			cr.Rules[i].ResourceNames = agentNames
		}
	}
	cr.Name = "chaos-" + cr.Name
	return cr, nil
}

// tokenConfig is a client configuration that authenticates as the
// ServiceAccount namespace/name with a token from the TokenRequest API.
func (k *cluster) tokenConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	token, _, err := controlplane.RequestToken(ctx, k.admin, namespace, name, 3*time.Hour)
	if err != nil {
		return nil, err
	}
	cfg := rest.AnonymousClientConfig(k.cfg)
	cfg.BearerToken = token
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

func (k *cluster) client(ctx context.Context, namespace, name string) (client.WithWatch, error) {
	cfg, err := k.tokenConfig(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: hitlv1.NewScheme()})
}

// apiServerPID finds the running kube-apiserver of this control plane by
// its secure port.
func (k *cluster) apiServerPID() (int, error) {
	u, err := url.Parse(k.cfg.Host)
	if err != nil {
		return 0, err
	}
	want := "--secure-port=" + u.Port()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "kube-apiserver" {
			continue
		}
		for _, a := range args[1:] {
			if a == want {
				var pid int
				_, err := fmt.Sscanf(filepath.Base(d), "%d", &pid)
				return pid, err
			}
		}
	}
	return 0, fmt.Errorf("no kube-apiserver with %s is running", want)
}

// restartAPIServer kills kube-apiserver with SIGKILL, keeps etcd, and
// starts it again with the same command line and environment after down:
// every watch breaks and every client reconnects.
func (k *cluster) restartAPIServer(ctx context.Context, down time.Duration) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	pid, err := k.apiServerPID()
	if err != nil {
		return err
	}
	if k.apiArgs == nil {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			return err
		}
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			return err
		}
		k.apiArgs = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		k.apiEnv = strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
	}
	k.tl.add("", "apiserver-down", "")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	if k.api != nil {
		_ = k.api.Wait()
	}
	for range 100 {
		if syscall.Kill(pid, 0) != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(down)
	logf, err := os.OpenFile(filepath.Join(k.out, "apiserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(k.apiArgs[0], k.apiArgs[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = k.apiEnv, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	go func() { _ = cmd.Wait(); logf.Close() }()
	k.api = cmd
	if err := k.waitReady(ctx, 90*time.Second); err != nil {
		return err
	}
	k.tl.add("", "apiserver-up", "")
	return nil
}

// waitReady waits until the API server answers /readyz.
func (k *cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	hc, err := rest.HTTPClientFor(k.cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := k.readyz(ctx, hc)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready %s after its restart: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (k *cluster) readyz(ctx context.Context, hc *http.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(k.cfg.Host, "/")+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(bytes.TrimSpace(body), []byte("ok")) {
		return fmt.Errorf("/readyz: %d %s", resp.StatusCode, body)
	}
	return nil
}

func (k *cluster) stop() {
	k.mu.Lock()
	if k.api != nil && k.api.Process != nil {
		_ = k.api.Process.Signal(syscall.SIGTERM)
		for range 200 {
			if k.api.Process.Signal(syscall.Signal(0)) != nil {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		_ = k.api.Process.Kill()
	}
	k.mu.Unlock()
	if err := k.env.Stop(); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintln(os.Stderr, "chaos: stopping the control plane:", err)
	}
}
