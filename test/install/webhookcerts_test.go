package install

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/hitl-dev/hitl/internal/manager"
	"github.com/hitl-dev/hitl/test/testenv"
)

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// TestWebhookCertificatesWithoutCertManager runs the certificate
// provisioning of two manager replicas against a real API server: they
// agree on one Secret, write the same files, inject its CA into the labelled
// webhook configurations only, restore a CA bundle that an apply reset, and
// rotate the serving certificate under the same CA as it ages.
func TestWebhookCertificatesWithoutCertManager(t *testing.T) {
	env := testenv.New()
	_, admin, err := testenv.Start(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, secret = "hitl-system", "hitl-webhook-server-cert"
	must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	hook := func(name string) admissionv1.ValidatingWebhook {
		return admissionv1.ValidatingWebhook{
			Name: name, AdmissionReviewVersions: []string{"v1"},
			SideEffects:   ptr.To(admissionv1.SideEffectClassNone),
			FailurePolicy: ptr.To(admissionv1.Ignore),
			ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{
				Namespace: ns, Name: "hitl-webhook-service", Path: ptr.To("/validate")}},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{"hitl.dev"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"questionreplies"}}}},
		}
	}
	ours := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hitl-validating-webhook-configuration", Labels: map[string]string{manager.InjectCALabel: secret}},
		Webhooks:   []admissionv1.ValidatingWebhook{hook("vquestionreply.hitl.dev"), hook("vother.hitl.dev")},
	}
	theirs := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "someone-else"},
		Webhooks:   []admissionv1.ValidatingWebhook{hook("vsomeone.example.com")},
	}
	theirs.Webhooks[0].ClientConfig.CABundle = []byte("their CA")
	must(t, admin.Create(ctx, ours))
	must(t, admin.Create(ctx, theirs))
	// The install ships the Secret, naming the configurations to inject
	// into (config/webhook-certificate).
	must(t, admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret,
		Annotations: map[string]string{manager.ValidatingConfigurationsAnnotation: ours.Name}}}))

	clock := clocktesting.NewFakePassiveClock(time.Now())
	replicas := make([]*manager.WebhookCerts, 2)
	for i := range replicas {
		replicas[i] = &manager.WebhookCerts{Client: admin, Namespace: ns, Secret: secret,
			Dir: filepath.Join(t.TempDir(), "certs"), Interval: time.Minute, Clock: clock}
	}
	// Both start at once; one loses the race to fill the Secret and
	// takes the winner's certificate on its next check.
	var wg sync.WaitGroup
	for _, r := range replicas {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Ensure(ctx) }()
	}
	wg.Wait()
	for _, r := range replicas {
		must(t, r.Ensure(ctx))
	}

	sec := &corev1.Secret{}
	must(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, sec))
	ca := sec.Data["ca.crt"]
	for i, r := range replicas {
		crt, err := os.ReadFile(filepath.Join(r.Dir, "tls.crt"))
		must(t, err)
		key, err := os.ReadFile(filepath.Join(r.Dir, "tls.key"))
		must(t, err)
		if !bytes.Equal(crt, sec.Data["tls.crt"]) || !bytes.Equal(key, sec.Data["tls.key"]) {
			t.Errorf("replica %d serves another certificate than the Secret's", i)
		}
	}
	first := verifyServing(t, sec.Data["tls.crt"], ca, "hitl-webhook-service.hitl-system.svc", clock.Now())

	checkInjected := func() {
		t.Helper()
		got := &admissionv1.ValidatingWebhookConfiguration{}
		must(t, admin.Get(ctx, client.ObjectKeyFromObject(ours), got))
		for _, h := range got.Webhooks {
			if !bytes.Equal(h.ClientConfig.CABundle, ca) {
				t.Errorf("webhook %s has no CA bundle of the Secret", h.Name)
			}
		}
		other := &admissionv1.ValidatingWebhookConfiguration{}
		must(t, admin.Get(ctx, client.ObjectKeyFromObject(theirs), other))
		if string(other.Webhooks[0].ClientConfig.CABundle) != "their CA" {
			t.Error("the CA went into a configuration that is not labelled for it")
		}
	}
	checkInjected()

	// `kubectl apply` of the configuration resets the bundle; the next
	// check restores it.
	reset := &admissionv1.ValidatingWebhookConfiguration{}
	must(t, admin.Get(ctx, client.ObjectKeyFromObject(ours), reset))
	reset.Webhooks[0].ClientConfig.CABundle = nil
	must(t, admin.Update(ctx, reset))
	must(t, replicas[1].Ensure(ctx))
	checkInjected()

	// 250 days on: a new serving certificate from the same CA, in the
	// Secret and in every replica's files.
	clock.SetTime(clock.Now().Add(250 * 24 * time.Hour))
	for _, r := range replicas {
		must(t, r.Ensure(ctx))
	}
	must(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, sec))
	if !bytes.Equal(sec.Data["ca.crt"], ca) {
		t.Fatal("the CA changed with the serving certificate: webhooks would fail until it is injected again")
	}
	second := verifyServing(t, sec.Data["tls.crt"], ca, "hitl-webhook-service.hitl-system.svc.cluster.local", clock.Now())
	if second.Equal(first) {
		t.Error("the serving certificate was not rotated")
	}
	for i, r := range replicas {
		crt, err := os.ReadFile(filepath.Join(r.Dir, "tls.crt"))
		must(t, err)
		if !bytes.Equal(crt, sec.Data["tls.crt"]) {
			t.Errorf("replica %d still serves the old certificate", i)
		}
	}
	checkInjected()
}

func verifyServing(t *testing.T, certPEM, caPEM []byte, host string, now time.Time) *x509.Certificate {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("the Secret's ca.crt holds no certificate")
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("the Secret's tls.crt holds no certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	must(t, err)
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: now}); err != nil {
		t.Errorf("the serving certificate does not verify for %s: %v", host, err)
	}
	return cert
}

// TestManagerServesWebhooksWithItsOwnCertificate runs the manager binary as
// config/webhook-feedback does (its ServiceAccount, the RBAC, certificate
// Secret and webhook configuration that overlay renders,
// --webhook-cert-secret) and connects to its webhook port as the API
// server would: trusting only the CA bundle the manager injected, for the
// webhook Service's name.
func TestManagerServesWebhooksWithItsOwnCertificate(t *testing.T) {
	env := testenv.New()
	cfg, admin, err := testenv.Start(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	objs := renderOverlay(t, filepath.Join(testenv.Root(), "config", "webhook-feedback"))
	var webhookConfig string
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			must(t, admin.Create(ctx, o))
		}
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Secret":
			must(t, admin.Create(ctx, o))
		case "ValidatingWebhookConfiguration":
			webhookConfig = o.GetName()
			must(t, admin.Create(ctx, o))
		}
	}
	if webhookConfig == "" {
		t.Fatal("config/webhook-feedback renders no ValidatingWebhookConfiguration")
	}
	awaitBindings(ctx, t, admin, objs)
	install, err := testenv.DefaultInstall()
	must(t, err)
	saNS, saName := install.ManagerServiceAccount()
	token, _, err := testenv.RequestToken(ctx, admin, saNS, saName, time.Hour)
	must(t, err)
	kubeconfig, err := testenv.TokenKubeconfig(cfg, "manager", token, "")
	must(t, err)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600))

	port := freeAddr(t)
	_, portNum, _ := strings.Cut(port, ":")
	mgr := exec.Command(managerBinary(t), "--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--enable-webhooks", "--webhook-host=127.0.0.1", "--webhook-port="+portNum,
		"--webhook-cert-dir="+filepath.Join(dir, "certs"),
		"--webhook-cert-secret=hitl-webhook-server-cert", "--webhook-cert-namespace="+saNS)
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

	// The API server's view: the injected bundle, the Service's DNS name.
	var roots *x509.CertPool
	for roots == nil {
		got := &admissionv1.ValidatingWebhookConfiguration{}
		must(t, admin.Get(ctx, client.ObjectKey{Name: webhookConfig}, got))
		if ca := got.Webhooks[0].ClientConfig.CABundle; len(ca) > 0 {
			roots = x509.NewCertPool()
			if !roots.AppendCertsFromPEM(ca) {
				t.Fatal("the injected CA bundle holds no certificate")
			}
			continue
		}
		select {
		case <-ctx.Done():
			t.Fatal("the manager injected no CA bundle")
		case <-time.After(200 * time.Millisecond):
		}
	}
	host := "hitl-webhook-service." + saNS + ".svc"
	for {
		conn, err := tls.Dial("tcp", port, &tls.Config{RootCAs: roots, ServerName: host})
		if err == nil {
			conn.Close()
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no TLS handshake for %s trusting the injected CA: %v", host, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	// A name the certificate is not for fails, so the check above means
	// something.
	if conn, err := tls.Dial("tcp", port, &tls.Config{RootCAs: roots, ServerName: "evil.example.com"}); err == nil {
		conn.Close()
		t.Error("the webhook certificate is valid for any name")
	}
}

func renderOverlay(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}
