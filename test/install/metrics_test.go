// Package install runs the manager binary as the shipped Deployment does
// (--metrics-secure, as its ServiceAccount with config/rbac) against a real
// API server and scrapes its metrics endpoint as an attacker and as
// Prometheus would.
package install

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hitl-dev/hitl/test/testenv"
)

// TestMetricsNeedAnAuthorizedToken: no token or a bad one is 401, a valid
// token of an identity without the metrics-reader role is 403, and a token
// of one bound to the shipped ClusterRole hitl-metrics-reader reads hitl's
// metrics.
func TestMetricsNeedAnAuthorizedToken(t *testing.T) {
	env := testenv.New()
	cfg, admin, err := testenv.Start(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	install, err := testenv.DefaultInstall()
	if err != nil {
		t.Fatal(err)
	}
	ns := install.Namespace
	must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	rbac, err := install.ManagerRBAC()
	if err != nil {
		t.Fatal(err)
	}
	reader := ""
	for _, o := range rbac {
		must(t, admin.Create(ctx, o))
		if o.GetKind() == "ClusterRole" && strings.HasSuffix(o.GetName(), "metrics-reader") {
			reader = o.GetName()
		}
	}
	if reader != "hitl-metrics-reader" {
		t.Fatalf("config/rbac has no ClusterRole metrics-reader (found %q)", reader)
	}
	awaitBindings(ctx, t, admin, rbac)

	// The manager, as its ServiceAccount.
	saNS, saName := install.ManagerServiceAccount()
	token, _, err := testenv.RequestToken(ctx, admin, saNS, saName, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := testenv.TokenKubeconfig(cfg, "manager", token, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600))
	bin := managerBinary(t)
	addr := freeAddr(t)
	mgr := exec.Command(bin, "--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"--metrics-bind-address="+addr, "--metrics-secure", "--health-probe-bind-address=0")
	logs := &strings.Builder{}
	mgr.Stdout, mgr.Stderr = logs, logs
	must(t, mgr.Start())
	t.Cleanup(func() {
		_ = mgr.Process.Signal(syscall.SIGTERM)
		_ = mgr.Wait()
		if t.Failed() {
			t.Logf("manager logs:\n%s", logs.String())
		}
	})

	// Scrapers: one bound to the reader role, one bound to nothing.
	for _, sa := range []string{"prometheus", "nobody"} {
		must(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: "default"}}))
	}
	must(t, admin.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-hitl-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: "default"}},
	}))
	tokenOf := func(sa string) string {
		tok, _, err := testenv.RequestToken(ctx, admin, "default", sa, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	prometheus, nobody := tokenOf("prometheus"), tokenOf("nobody")

	// Plain HTTP is not served at all.
	waitServing(ctx, t, addr)
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the metrics endpoint answers plain HTTP")
		}
	}

	cases := []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		// A token the TokenReview does not accept: controller-runtime's
		// filter answers 500 "Authentication failed" (its authenticator
		// returns an error rather than "not authenticated").
		{"a forged token", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2ln", http.StatusInternalServerError},
		{"a token without the role", nobody, http.StatusForbidden},
		// The manager's own token: it may review tokens, not read metrics.
		{"the manager's own token", token, http.StatusForbidden},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if code, body := scrape(t, addr, c.token); code != c.want {
				t.Errorf("status %d, want %d: %s", code, c.want, body)
			} else if strings.Contains(body, "hitl_") {
				t.Error("the refusal carries metrics")
			}
		})
	}
	t.Run("a token with the role", func(t *testing.T) {
		// RBAC and the manager's caches settle within a few seconds.
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, body := scrape(t, addr, prometheus)
			if code == http.StatusOK && strings.Contains(body, "hitl_questions{") {
				for _, m := range []string{"hitl_claims_live", "hitl_question_continued_lateness_seconds_bucket"} {
					if !strings.Contains(body, m) {
						t.Errorf("the scrape lacks %s", m)
					}
				}
				checkDashboard(t, body)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("status %d: %.300s", code, body)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// checkDashboard checks that every hitl_* metric the Grafana dashboard
// queries is one the manager exposes: a renamed metric leaves no empty
// panel behind.
func checkDashboard(t *testing.T, scraped string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "prometheus", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	// A metric with labels appears in a scrape only once it has a series,
	// so the metrics declared under controllers/ count as exposed too.
	exposed := map[string]bool{}
	for _, line := range strings.Split(scraped, "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			exposed[strings.Fields(name)[0]] = true
		}
	}
	sources, err := filepath.Glob(filepath.Join(testenv.Root(), "controllers", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sources {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range declaredMetric.FindAllStringSubmatch(string(src), -1) {
			exposed[m[1]] = true
		}
	}
	seen := 0
	for _, p := range dashboard.Panels {
		for _, target := range p.Targets {
			for _, m := range metricName.FindAllString(target.Expr, -1) {
				seen++
				base := m
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if b, ok := strings.CutSuffix(m, suffix); ok && exposed[b] {
						base = b
					}
				}
				if !exposed[base] {
					t.Errorf("dashboard panel %q queries %s, which the manager does not expose", p.Title, m)
				}
			}
		}
	}
	if seen < 5 {
		t.Errorf("the dashboard queries only %d hitl metrics", seen)
	}
}

var (
	metricName     = regexp.MustCompile(`\bhitl_[a-z_]+`)
	declaredMetric = regexp.MustCompile(`"(hitl_[a-z_]+)"`)
)

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// managerBinary builds cmd/manager once for the package's tests.
func managerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hitl-install-")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "manager")
		cmd := exec.Command("go", "build", "-o", built, "./cmd/manager")
		cmd.Dir = testenv.Root()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func scrape(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The certificate is self-signed, as in the Deployment.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitServing waits until addr accepts TLS connections.
func waitServing(ctx context.Context, t *testing.T, addr string) {
	t.Helper()
	for {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the metrics endpoint %s does not serve TLS: %v", addr, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// awaitBindings waits until the API server's authorizer, which learns of
// RBAC objects from watches, applies the RoleBindings and
// ClusterRoleBindings among objs: a manager started before it did would
// begin with refused calls.
func awaitBindings(ctx context.Context, t *testing.T, admin client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		var ns string
		var b rbacv1.ClusterRoleBinding
		switch o.GetKind() {
		case "RoleBinding":
			ns = o.GetNamespace()
		case "ClusterRoleBinding":
		default:
			continue
		}
		// A RoleBinding has the fields of a ClusterRoleBinding.
		must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b))
		must(t, testenv.AwaitBinding(ctx, admin, ns, b.RoleRef, b.Subjects, testenv.GrantWait))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
