//go:build e2ecluster

// Package cluster is the end-to-end suite of `make e2e-cluster`: hitl
// installed on the real single-node Kubernetes of hack/cluster/node.sh, with
// the Helm chart and then with dist/install.yaml, each install checked with
// the same scenarios against the manager's Pods. Agents are Pods with their
// own ServiceAccounts asking through pkg/agent; people answer with kubectl
// hitl as users bound to the shipped hitl-answerer role; only the platform
// team's steps (installing, deleting a Pod, draining the node) run as admin.
// The Helm install also runs the web inbox, called through its Service as
// its authenticating proxy would and as a caller that bypasses the proxy.
//
// It runs inside the cluster's network namespace (hack/cluster/e2e.sh) and
// reads its inputs from the environment:
//
//	HITL_CLUSTER_STATE  the node's state directory (kubeconfig-admin, -alice, -bob)
//	HITL_BIN            the directory holding kubectl-hitl
//	HITL_HELM           the helm binary
//	HITL_HELM_ARGS      extra arguments of helm install (e.g. the image)
//	HITL_CHART          the chart directory (charts/hitl)
//	HITL_INSTALL_YAML   dist/install.yaml
//	HITL_ROLES          directory of the shipped example roles (config/rbac/examples)
//	HITL_RESULTS        where to write the measurements (JSON)
package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/agent"
	"github.com/hitl-dev/hitl/pkg/answerer"
)

const (
	nodeName     = "hitl-node"
	installNS    = "hitl-system"
	leaseName    = "hitl-manager.hitl.dev"
	agentImage   = "hitl.local/e2e-agent:1"
	managerLabel = "app.kubernetes.io/name=hitl,app.kubernetes.io/component=manager"
	// The agents are named as the shipped example roles name them.
	releaseBot = "release-bot"
	officeBot  = "office-bot"
)

// results are the figures docs/real-node.md reports, per install.
var results = map[string]map[string]any{}

func env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run this suite with make e2e-cluster", name)
	}
	return v
}

// install is one way a platform team installs hitl.
type install struct {
	name      string
	install   func(t *testing.T) error
	uninstall func(t *testing.T) error
	// inboxSecret is the secret shared with the proxy of the web inbox that
	// the install runs, if it runs one.
	inboxSecret string
}

func TestCluster(t *testing.T) {
	// The SDKs' clients log through controller-runtime; the suite reports
	// what it checks itself.
	ctrllog.SetLogger(logr.Discard())
	state := env(t, "HITL_CLUSTER_STATE")
	helm, chart, manifest := env(t, "HITL_HELM"), env(t, "HITL_CHART"), env(t, "HITL_INSTALL_YAML")
	admin := newUser(t, state, "admin")
	// The Helm install runs the web inbox too, listing the questions of the
	// team's namespace (runInstall's), behind the proxy secret the platform
	// team creates first.
	inboxSecret := rand.Text()
	installs := []install{
		{
			name: "helm",
			install: func(t *testing.T) error {
				for _, o := range []client.Object{
					&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: installNS}},
					&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: inboxProxySecret},
						StringData: map[string]string{"secret": inboxSecret}},
				} {
					if err := admin.c.Create(t.Context(), o); err != nil && !apierrors.IsAlreadyExists(err) {
						return err
					}
				}
				args := []string{"install", "hitl", chart, "--namespace", installNS, "--create-namespace",
					"--set", "inbox.enabled=true", "--set", "inbox.namespaces={" + teamNS("helm") + "}"}
				return admin.run(t, helm, append(args, strings.Fields(os.Getenv("HITL_HELM_ARGS"))...)...).err()
			},
			uninstall: func(t *testing.T) error {
				if err := admin.run(t, helm, "uninstall", "hitl", "--namespace", installNS, "--wait").err(); err != nil {
					return err
				}
				return client.IgnoreNotFound(admin.c.Delete(context.Background(),
					&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: inboxProxySecret}}))
			},
			inboxSecret: inboxSecret,
		},
		{
			name: "install.yaml",
			install: func(t *testing.T) error {
				return admin.run(t, "kubectl", "apply", "--server-side", "--force-conflicts", "-f", manifest).err()
			},
			uninstall: func(t *testing.T) error {
				return admin.run(t, "kubectl", "delete", "--ignore-not-found", "--wait", "--timeout", "120s", "-f", manifest).err()
			},
		},
	}
	for _, in := range installs {
		if !t.Run(in.name, func(t *testing.T) { runInstall(t, state, admin, in) }) {
			break
		}
	}
	if out := os.Getenv("HITL_RESULTS"); out != "" {
		data, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(out, data, 0o644); err != nil {
			t.Error(err)
		}
	}
}

func runInstall(t *testing.T, state string, admin *user, in install) {
	figures := map[string]any{}
	results[in.name] = figures
	start := time.Now()
	if err := in.install(t); err != nil {
		t.Fatalf("installing with %s: %v", in.name, err)
	}
	waitManagersReady(t, admin, 2, 3*time.Minute)
	figures["install_to_ready_seconds"] = time.Since(start).Seconds()
	t.Logf("%s: 2 manager replicas Ready %.1fs after the install started", in.name, time.Since(start).Seconds())
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			_ = in.uninstall(t)
		}
	})

	ns := teamNS(in.name)
	setUpTeam(t, state, admin, ns)
	alice := newUser(t, state, "alice")
	bob := newUser(t, state, "bob")

	if in.inboxSecret != "" {
		t.Run("the web inbox is Ready, refuses a caller without the proxy's secret and lists as the person the proxy names", func(t *testing.T) {
			checkInbox(t, admin, in.inboxSecret)
		})
	}

	t.Run("an agent Pod asks through the SDK and a person answers with kubectl hitl", func(t *testing.T) {
		pod := startAgentPod(t, admin, ns, releaseBot, "deploy-target", "Deploy to production?")
		waitQuestion(t, alice, ns, "deploy-target")
		res := bob.run(t, "kubectl", "hitl", "-n", ns, "answer", "deploy-target", "--select", "q=no")
		if res.code == 0 {
			t.Fatalf("bob, bound to no role, answered: %s", res.out)
		}
		var replies hitlv1.QuestionReplyList
		if err := admin.c.List(t.Context(), &replies, client.InNamespace(ns)); err != nil || len(replies.Items) > 0 {
			t.Fatalf("bob's refused answer left %d replies (%v)", len(replies.Items), err)
		}
		res = alice.run(t, "kubectl", "hitl", "-n", ns, "answer", "deploy-target", "--select", "q=yes")
		if res.code != 0 {
			t.Fatalf("alice, bound to hitl-answerer, could not answer: %s", res.out)
		}
		expectAgentAnswer(t, admin, ns, pod, "yes")
	})

	t.Run("a question asked before the leader Pod is deleted is settled by the next leader", func(t *testing.T) {
		leader := leaderPod(t, admin)
		pod := startAgentPod(t, admin, ns, officeBot, "failover", "Order lunch?")
		waitQuestion(t, alice, ns, "failover")
		deleted := time.Now()
		if res := admin.run(t, "kubectl", "delete", "pod", "-n", installNS, leader, "--wait=false"); res.code != 0 {
			t.Fatalf("deleting the leader %s: %s", leader, res.out)
		}
		// kubectl hitl answer waits for the reply's outcome, which only a
		// leader gives.
		res := alice.run(t, "kubectl", "hitl", "-n", ns, "answer", "failover", "--select", "q=yes")
		if res.code != 0 {
			t.Fatalf("answering after the leader's deletion: %s", res.out)
		}
		figures["settled_after_leader_deleted_seconds"] = time.Since(deleted).Seconds()
		expectAgentAnswer(t, admin, ns, pod, "yes")
		if now := leaderPod(t, admin); now == leader {
			t.Fatalf("the deleted Pod %s still holds the lease", leader)
		}
		waitManagersReady(t, admin, 2, 2*time.Minute)
	})

	t.Run("draining the node evicts one manager and the PodDisruptionBudget refuses the second", func(t *testing.T) {
		before := managerPods(t, admin)
		if len(before) != 2 {
			t.Fatalf("want 2 manager Pods before the drain, have %v", before)
		}
		// Uncordoned below; this is for a failure before that.
		t.Cleanup(func() {
			if t.Failed() {
				admin.run(t, "kubectl", "uncordon", nodeName)
			}
		})
		res := admin.run(t, "kubectl", "drain", nodeName, "--pod-selector", managerLabel, "--timeout", "20s", "--ignore-daemonsets", "--delete-emptydir-data")
		if res.code == 0 {
			t.Fatalf("the drain evicted both managers: %s", res.out)
		}
		if !strings.Contains(res.out, "disruption budget") {
			t.Fatalf("the drain failed, but not on the PodDisruptionBudget: %s", res.out)
		}
		after := managerPods(t, admin)
		kept := 0
		for _, p := range before {
			for _, q := range after {
				if p == q {
					kept++
				}
			}
		}
		if kept != 1 {
			t.Fatalf("want exactly one of %v left running after the drain, have %v", before, after)
		}
		if res := admin.run(t, "kubectl", "uncordon", nodeName); res.code != 0 {
			t.Fatal(res.out)
		}
		waitManagersReady(t, admin, 2, 2*time.Minute)
	})

	t.Run("metrics are served over HTTPS to a token allowed to read them, and only to it", func(t *testing.T) {
		checkMetrics(t, admin, ns)
	})

	t.Run("manager footprint idle and under settle load", func(t *testing.T) {
		measureFootprint(t, admin, alice, ns, figures)
	})

	start = time.Now()
	if err := in.uninstall(t); err != nil {
		t.Fatalf("uninstalling: %v", err)
	}
	uninstalled = true
	t.Logf("%s: uninstalled in %.1fs", in.name, time.Since(start).Seconds())
	if res := admin.run(t, "kubectl", "delete", "namespace", ns, "--wait", "--timeout", "120s"); res.code != 0 {
		t.Fatalf("deleting %s (the namespace controller of kube-controller-manager empties it): %s", ns, res.out)
	}
}

// teamNS is the namespace of the team that runInstall sets up for an install.
func teamNS(install string) string { return "team-" + strings.ReplaceAll(install, ".", "-") }

// --- the web inbox -----------------------------------------------------------

// inboxProxySecret is the Secret the chart's inbox reads the proxy's shared
// secret from by default.
const inboxProxySecret = "hitl-inbox-proxy"

// checkInbox calls the chart's inbox through its Service as the
// authenticating proxy would, and as a caller that bypasses the proxy.
// alice, bound to hitl-answerer in the team's namespace, gets the list of
// its questions; bob, bound to nothing, gets told why not: the inbox acts as
// each of them, by impersonation.
func checkInbox(t *testing.T, admin *user, secret string) {
	eventually(t, 2*time.Minute, "the inbox Deployment Available", func() error {
		d, err := admin.kube.AppsV1().Deployments(installNS).Get(t.Context(), "hitl-inbox", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 1 || !available(d) {
			return fmt.Errorf("%d Ready, Available %v", d.Status.ReadyReplicas, available(d))
		}
		return nil
	})
	svc, err := admin.kube.CoreV1().Services(installNS).Get(t.Context(), "hitl-inbox", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://%s:8080", svc.Spec.ClusterIP)
	httpc := &http.Client{Timeout: 10 * time.Second}
	get := func(path string, header map[string]string) (int, string, error) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(body), nil
	}
	// The Service may lag the Pod's readiness by a moment.
	eventually(t, 30*time.Second, "the inbox's Service answering", func() error {
		_, _, err := get("/healthz", nil)
		return err
	})
	for name, header := range map[string]map[string]string{
		"no header":           nil,
		"a user, no secret":   {"X-Forwarded-User": "alice"},
		"a user, bad secret":  {"X-Forwarded-User": "alice", "X-Hitl-Proxy-Secret": strings.Repeat("x", len(secret))},
		"the secret, no user": {"X-Hitl-Proxy-Secret": secret},
	} {
		if code, body, err := get("/", header); err != nil || code != http.StatusUnauthorized {
			t.Errorf("%s: status %d, %v, %.200s; want 401", name, code, err, body)
		}
	}
	code, body, err := get("/", map[string]string{"X-Forwarded-User": "alice", "X-Hitl-Proxy-Secret": secret})
	if err != nil || code != http.StatusOK || !strings.Contains(body, "alice") {
		t.Fatalf("through the proxy as alice: status %d, %v, %.300s; want her page", code, err, body)
	}
	// The first message of the event stream: the list (made as alice), or
	// the problem (bob may not list questions).
	for user, want := range map[string]string{"alice": `"type":"reset"`, "bob": `"type":"problem"`} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events", nil)
		req.Header.Set("X-Forwarded-User", user)
		req.Header.Set("X-Hitl-Proxy-Secret", secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("%s's event stream: %v", user, err)
		}
		got, err := firstEvent(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil || !strings.Contains(got, want) {
			t.Errorf("%s's first event %.300q (%v), want one with %s", user, got, err, want)
		}
	}
}

// firstEvent reads a server-sent event stream up to its first data line.
func firstEvent(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data:") {
			return line, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", io.ErrUnexpectedEOF
}

// --- identities ------------------------------------------------------------

// user runs commands and API calls with one identity's kubeconfig.
type user struct {
	name       string
	kubeconfig string
	cfg        *rest.Config
	kube       kubernetes.Interface
	c          client.WithWatch
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = hitlv1.AddToScheme(s)
	return s
}()

func newUser(t *testing.T, state, name string) *user {
	t.Helper()
	path := filepath.Join(state, "kubeconfig-"+name)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return fromConfig(t, name, path, cfg)
}

func fromConfig(t *testing.T, name, path string, cfg *rest.Config) *user {
	t.Helper()
	cfg.QPS, cfg.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &user{name: name, kubeconfig: path, cfg: cfg, kube: kube, c: c}
}

type result struct {
	code int
	out  string
}

func (r result) err() error {
	if r.code != 0 {
		return fmt.Errorf("exit %d: %s", r.code, r.out)
	}
	return nil
}

// run runs a command with the user's kubeconfig and kubectl-hitl on PATH.
func (u *user) run(t *testing.T, name string, args ...string) result {
	t.Helper()
	// Not t.Context(): cleanups run commands after it is cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+u.kubeconfig, "PATH="+os.Getenv("HITL_BIN")+":"+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	t.Logf("%s$ %s %s -> %d\n%s", u.name, filepath.Base(name), strings.Join(args, " "), code, strings.TrimSpace(out.String()))
	return result{code: code, out: out.String()}
}

// setUpTeam creates ns with the agents' ServiceAccounts bound to the
// shipped hitl-agent role and alice bound to hitl-answerer. The roles come
// from the install when it ships them, else from config/rbac/examples, as
// the README tells a platform team.
func setUpTeam(t *testing.T, state string, admin *user, ns string) {
	ctx := t.Context()
	for _, role := range []string{"hitl-agent", "hitl-answerer"} {
		err := admin.c.Get(ctx, client.ObjectKey{Name: role}, &rbacv1.ClusterRole{})
		if apierrors.IsNotFound(err) {
			if res := admin.run(t, "kubectl", "apply", "-f", env(t, "HITL_ROLES")); res.code != 0 {
				t.Fatal(res.out)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: releaseBot}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: officeBot}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agents"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "hitl-agent"},
			Subjects: []rbacv1.Subject{
				{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: releaseBot},
				{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: officeBot},
			},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "answerers"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "hitl-answerer"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
		},
	}
	for _, o := range objs {
		if err := admin.c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	_ = state
}

// --- agents ------------------------------------------------------------------

// startAgentPod runs test/e2e/agent in a Pod as ServiceAccount sa, asking a
// blocking question with the options yes and no.
func startAgentPod(t *testing.T, admin *user, ns, sa, question, text string) string {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-" + question},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa,
			RestartPolicy:      corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "agent",
				Image:           agentImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"--namespace", ns, "--agent", sa, "--name", question, "--question", text, "--options", "yes,no"},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if err := admin.c.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	return pod.Name
}

// waitQuestion waits until u sees the question in state Open.
func waitQuestion(t *testing.T, u *user, ns, name string) {
	t.Helper()
	eventually(t, 90*time.Second, "question "+name+" Open", func() error {
		var q hitlv1.UserQuestion
		if err := u.c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &q); err != nil {
			return err
		}
		if q.Status.State != hitlv1.StateOpen {
			return fmt.Errorf("state %q", q.Status.State)
		}
		return nil
	})
}

// expectAgentAnswer waits for the agent Pod to succeed and checks that it
// printed the answer it was given.
func expectAgentAnswer(t *testing.T, admin *user, ns, pod, label string) {
	t.Helper()
	eventually(t, 90*time.Second, "agent Pod "+pod+" Succeeded", func() error {
		var p corev1.Pod
		if err := admin.c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: pod}, &p); err != nil {
			return err
		}
		if p.Status.Phase == corev1.PodFailed {
			t.Fatalf("agent Pod %s failed: %s", pod, podLogs(t, admin, ns, pod))
		}
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	logs := podLogs(t, admin, ns, pod)
	var out agent.Result
	line := strings.TrimSpace(logs[strings.LastIndex(strings.TrimSpace(logs), "\n")+1:])
	if err := json.Unmarshal([]byte(line), &out); err != nil {
		t.Fatalf("the agent printed %q: %v", logs, err)
	}
	if out.Pending || len(out.Answers) != 1 || len(out.Answers[0].Selected) != 1 || out.Answers[0].Selected[0] != label {
		t.Fatalf("want the agent to get %q settled, it printed %s", label, logs)
	}
}

// podLogs reads a Pod's logs through the API server and the kubelet.
func podLogs(t *testing.T, u *user, ns, pod string) string {
	t.Helper()
	data, err := u.kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("logs of %s: %v", pod, err)
	}
	return string(data)
}

// --- the managers ------------------------------------------------------------

func managerPods(t *testing.T, admin *user) []string {
	t.Helper()
	pods, err := admin.kube.CoreV1().Pods(installNS).List(t.Context(), metav1.ListOptions{LabelSelector: managerLabel})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			names = append(names, p.Name)
		}
	}
	return names
}

// waitManagersReady waits until the manager Deployment has n Ready replicas
// and a leader.
func waitManagersReady(t *testing.T, admin *user, n int32, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d Ready manager replicas", n), func() error {
		deps, err := admin.kube.AppsV1().Deployments(installNS).List(t.Context(), metav1.ListOptions{LabelSelector: managerLabel})
		if err != nil {
			return err
		}
		if len(deps.Items) != 1 {
			return fmt.Errorf("%d manager Deployments", len(deps.Items))
		}
		d := deps.Items[0]
		if d.Status.ReadyReplicas != n || d.Status.UpdatedReplicas != n || d.Status.Replicas != n {
			return fmt.Errorf("%d/%d Ready", d.Status.ReadyReplicas, n)
		}
		if !available(&d) {
			return fmt.Errorf("not Available")
		}
		return nil
	})
	leaderPod(t, admin)
}

func available(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// leaderPod returns the Pod that holds the leader-election Lease, once a
// running Pod does.
func leaderPod(t *testing.T, admin *user) string {
	t.Helper()
	var holder string
	eventually(t, 60*time.Second, "a running manager holding the lease", func() error {
		l, err := admin.kube.CoordinationV1().Leases(installNS).Get(t.Context(), leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil {
			return fmt.Errorf("no holder")
		}
		pod, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_")
		for _, p := range managerPods(t, admin) {
			if p == pod {
				holder = pod
				return nil
			}
		}
		return fmt.Errorf("holder %s is not a running manager Pod", pod)
	})
	return holder
}

// --- metrics -----------------------------------------------------------------

// checkMetrics scrapes the manager's metrics Service over HTTPS: with the
// token of a ServiceAccount bound to the install's metrics-reader role it
// gets hitl's metrics; without a token it gets 401; with a token that may
// not read them, 403.
func checkMetrics(t *testing.T, admin *user, ns string) {
	ctx := t.Context()
	svcs, err := admin.kube.CoreV1().Services(installNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var url string
	for _, s := range svcs.Items {
		for _, p := range s.Spec.Ports {
			if p.Name == "https" || p.Name == "metrics" || p.Port == 8443 {
				url = fmt.Sprintf("https://%s:%d/metrics", s.Spec.ClusterIP, p.Port)
			}
		}
	}
	if url == "" {
		t.Fatalf("no metrics Service (a port named https or metrics) in %s", installNS)
	}
	roles, err := admin.kube.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reader := ""
	for _, r := range roles.Items {
		for _, rule := range r.Rules {
			for _, u := range rule.NonResourceURLs {
				if u == "/metrics" && strings.HasPrefix(r.Name, "hitl") {
					reader = r.Name
				}
			}
		}
	}
	if reader == "" {
		t.Fatal("the install ships no ClusterRole that grants get on /metrics")
	}
	for _, sa := range []string{"scraper", "nosy"} {
		if err := admin.c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.c.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"}})
	})
	scraper, nosy := saToken(t, admin, ns, "scraper"), saToken(t, admin, ns, "nosy")
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The manager's serving certificate is its own; what is checked
		// here is who may read, not the certificate.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	scrape := func(token string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	var body string
	eventually(t, 60*time.Second, "metrics for the scraper's token", func() error {
		code, b, err := scrape(scraper)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("status %d: %.200s", code, b)
		}
		body = b
		return nil
	})
	if !strings.Contains(body, "hitl_") {
		t.Fatalf("the metrics hold no hitl_ series: %.500s", body)
	}
	if code, b, err := scrape(""); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("without a token: status %d, %v, %.200s; want 401", code, err, b)
	}
	if code, b, err := scrape(nosy); err != nil || code != http.StatusForbidden {
		t.Fatalf("with a token not allowed to read metrics: status %d, %v, %.200s; want 403", code, err, b)
	}
}

func saToken(t *testing.T, admin *user, ns, sa string) string {
	t.Helper()
	tr, err := admin.kube.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// saUser is a client that authenticates as a ServiceAccount with a token.
func saUser(t *testing.T, admin *user, ns, sa string) *user {
	t.Helper()
	cfg := rest.AnonymousClientConfig(admin.cfg)
	cfg.BearerToken = saToken(t, admin, ns, sa)
	return fromConfig(t, sa, "", cfg)
}

// --- footprint -----------------------------------------------------------------

// usage is a container's CPU time and memory working set, read from its
// cgroup (cgroup v1, the kubelet's cgroupfs driver under the node's
// cgroupRoot /hitl-e2e): the kubelet's summary API cannot report here, as
// cAdvisor finds no statistics for the sandbox's root disk.
type usage struct {
	at         time.Time
	cpuNanos   uint64
	workingSet uint64
	// rss is the anonymous memory (heap and stacks), without the binary's
	// pages in the page cache.
	rss uint64
}

func managerUsage(t *testing.T, admin *user, pod string) usage {
	t.Helper()
	p, err := admin.kube.CoreV1().Pods(installNS).Get(t.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := ""
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "manager" {
			_, id, _ = strings.Cut(c.ContainerID, "://")
		}
	}
	if id == "" {
		t.Fatalf("%s has no manager container yet", pod)
	}
	dir := func(controller string) string {
		for _, pattern := range []string{"/sys/fs/cgroup/%s/hitl-e2e/kubepods/*/pod%s/%s", "/sys/fs/cgroup/%s/hitl-e2e/kubepods/pod%s/%s"} {
			if m, _ := filepath.Glob(fmt.Sprintf(pattern, controller, p.UID, id)); len(m) == 1 {
				return m[0]
			}
		}
		t.Fatalf("no %s cgroup of container %s of %s", controller, id, pod)
		return ""
	}
	read := func(path string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	number := func(s string) uint64 {
		var n uint64
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil {
			t.Fatalf("reading %q: %v", s, err)
		}
		return n
	}
	u := usage{at: time.Now(), cpuNanos: number(read(filepath.Join(dir("cpuacct"), "cpuacct.usage")))}
	mem := dir("memory")
	// The working set as the kubelet counts it: usage less inactive file
	// pages.
	u.workingSet = number(read(filepath.Join(mem, "memory.usage_in_bytes")))
	for _, line := range strings.Split(read(filepath.Join(mem, "memory.stat")), "\n") {
		if v, ok := strings.CutPrefix(line, "total_rss "); ok {
			u.rss = number(v)
		}
		if v, ok := strings.CutPrefix(line, "total_inactive_file "); ok {
			if inactive := number(v); inactive < u.workingSet {
				u.workingSet -= inactive
			}
		}
	}
	return u
}

func cpuCores(a, b usage) float64 {
	return float64(b.cpuNanos-a.cpuNanos) / float64(b.at.Sub(a.at).Nanoseconds())
}

// measureFootprint reads the leader's CPU and memory idle for 30 s, then
// while agents (release-bot's ServiceAccount, pkg/agent) ask and alice
// answers each question (pkg/answerer) as fast as they settle.
func measureFootprint(t *testing.T, admin, alice *user, ns string, figures map[string]any) {
	leader := leaderPod(t, admin)
	idle0 := managerUsage(t, admin, leader)
	time.Sleep(30 * time.Second)
	idle1 := managerUsage(t, admin, leader)
	figures["idle_cpu_cores"] = cpuCores(idle0, idle1)
	figures["idle_working_set_mib"] = float64(idle1.workingSet) / (1 << 20)
	figures["idle_rss_mib"] = float64(idle1.rss) / (1 << 20)

	bot := saUser(t, admin, ns, releaseBot)
	a := agent.New(bot.c, ns, releaseBot)
	ans := answerer.New(alice.c, ns, "e2e-cluster", releaseBot)
	const questions, workers = 300, 20
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		next = make(chan int, questions)
	)
	for i := 0; i < questions; i++ {
		next <- i
	}
	close(next)
	load0 := managerUsage(t, admin, leader)
	peak, peakRSS := load0.workingSet, load0.rss
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := settleOne(t.Context(), a, ans, fmt.Sprintf("load-%d", i)); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	for sampling := true; sampling; {
		select {
		case <-finished:
			sampling = false
		case <-time.After(time.Second):
			u := managerUsage(t, admin, leader)
			peak, peakRSS = max(peak, u.workingSet), max(peakRSS, u.rss)
		}
	}
	elapsed := time.Since(start)
	load1 := managerUsage(t, admin, leader)
	if len(errs) > 0 {
		t.Fatalf("%d of %d asks failed, the first: %v", len(errs), questions, errs[0])
	}
	figures["load_questions"] = questions
	figures["load_seconds"] = elapsed.Seconds()
	figures["load_settled_per_second"] = float64(questions) / elapsed.Seconds()
	figures["load_cpu_cores"] = float64(load1.cpuNanos-load0.cpuNanos) / float64(elapsed.Nanoseconds())
	figures["load_peak_working_set_mib"] = float64(max(peak, load1.workingSet)) / (1 << 20)
	figures["load_peak_rss_mib"] = float64(max(peakRSS, load1.rss)) / (1 << 20)
	t.Logf("manager %s: idle %.3f cores, %.0f MiB; %d questions settled in %.1fs (%.1f/s): %.3f cores, peak %.0f MiB",
		leader, figures["idle_cpu_cores"], figures["idle_working_set_mib"], questions, elapsed.Seconds(),
		figures["load_settled_per_second"], figures["load_cpu_cores"], figures["load_peak_working_set_mib"])
}

// settleOne asks one blocking question and answers it.
func settleOne(ctx context.Context, a *agent.Agent, ans *answerer.Answerer, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	asked := make(chan error, 1)
	go func() {
		res, err := a.Ask(ctx, agent.Request{Name: name, Questions: []hitlv1.Question{{
			ID: "q", Question: "Proceed?", Options: []hitlv1.QuestionOption{{Label: "yes"}, {Label: "no"}},
		}}})
		if err == nil && (res.Pending || len(res.Answers) != 1) {
			err = fmt.Errorf("%s: not settled with one answer: %+v", name, res)
		}
		asked <- err
	}()
	for {
		out, err := ans.Reply(ctx, name, []hitlv1.AnswerItem{{ID: "q", Selected: []string{"yes"}}})
		if err == nil {
			if err := out.Err(); err != nil {
				return err
			}
			break
		}
		// The question may not exist yet.
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return <-asked
}

func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v", what, timeout, err)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
