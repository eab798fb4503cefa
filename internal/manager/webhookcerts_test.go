package manager

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestRenew(t *testing.T) {
	hosts := []string{"hitl-webhook-service.hitl-system.svc", "hitl-webhook-service.hitl-system.svc.cluster.local"}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	first, changed, err := renew(nil, hosts, now)
	if err != nil || !changed {
		t.Fatalf("an empty Secret: changed %t, %v", changed, err)
	}
	ca, cert := verify(t, first, hosts[0], now)

	if _, changed, _ := renew(first, hosts, now.Add(24*time.Hour)); changed {
		t.Error("a valid certificate was replaced")
	}

	// Less than a third of its life left: a new serving certificate from
	// the same CA, so the injected bundle stays valid throughout.
	later := now.Add(250 * 24 * time.Hour)
	renewed, changed, err := renew(first, hosts, later)
	if err != nil || !changed {
		t.Fatalf("an ageing certificate: changed %t, %v", changed, err)
	}
	ca2, cert2 := verify(t, renewed, hosts[0], later)
	if !ca2.Equal(ca) || cert2.Equal(cert) {
		t.Error("want a new serving certificate from the same CA")
	}

	// Another Service (a new namePrefix): a certificate that names it.
	other := []string{"qa-hitl-webhook-service.team-a.svc"}
	moved, changed, err := renew(first, other, now)
	if err != nil || !changed {
		t.Fatalf("other hosts: changed %t, %v", changed, err)
	}
	verify(t, moved, other[0], now)

	// The CA nearing its end (less than a serving certificate's life left):
	// both are new.
	late := now.Add(caLifetime - 300*24*time.Hour)
	both, changed, err := renew(first, hosts, late)
	if err != nil || !changed {
		t.Fatalf("an ageing CA: changed %t, %v", changed, err)
	}
	if ca3, _ := verify(t, both, hosts[0], late); ca3.Equal(ca) {
		t.Error("the CA was kept past its renewal time")
	}

	// Garbage in the Secret (hand-edited, truncated): replaced.
	broken := map[string][]byte{keyCACert: []byte("x"), keyCAKey: first[keyCAKey], keyCert: first[keyCert], keyKey: []byte("y")}
	fixed, changed, err := renew(broken, hosts, now)
	if err != nil || !changed {
		t.Fatalf("a broken Secret: changed %t, %v", changed, err)
	}
	verify(t, fixed, hosts[0], now)
}

// verify checks that the serving certificate of data is valid for host at
// now under the CA of data, and returns both.
func verify(t *testing.T, data map[string][]byte, host string, now time.Time) (ca, cert *x509.Certificate) {
	t.Helper()
	ca, _, err := parsePair(data[keyCACert], data[keyCAKey])
	if err != nil {
		t.Fatalf("CA: %v", err)
	}
	cert, _, err = parsePair(data[keyCert], data[keyKey])
	if err != nil {
		t.Fatalf("serving certificate: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: now}); err != nil {
		t.Errorf("the serving certificate does not verify for %s: %v", host, err)
	}
	if !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Error("not a server certificate")
	}
	return ca, cert
}

// TestEnsureInjectsWhereSecretAndConfigurationAgree runs Ensure against a
// fake API server that fails any list: the manager reads the Secret and
// each configuration it names by name, and injects the CA only into those
// that are installed and labelled for the Secret.
func TestEnsureInjectsWhereSecretAndConfigurationAgree(t *testing.T) {
	const ns, secret = "hitl-system", "hitl-webhook-server-cert"
	labelled := map[string]string{InjectCALabel: secret}
	mutating := func(name string, labels map[string]string) *admissionv1.MutatingWebhookConfiguration {
		return &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Webhooks: []admissionv1.MutatingWebhook{{Name: "m.hitl.dev", ClientConfig: serviceClient(ns, "hitl-webhook-service")}}}
	}
	validating := func(name string, labels map[string]string) *admissionv1.ValidatingWebhookConfiguration {
		return &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Webhooks: []admissionv1.ValidatingWebhook{
				{Name: "v.hitl.dev", ClientConfig: serviceClient(ns, "hitl-webhook-service")},
				{Name: "v2.hitl.dev", ClientConfig: serviceClient(ns, "hitl-webhook-service")},
			}}
	}
	shipped := func(mutatingNames, validatingNames string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret, Annotations: map[string]string{
			MutatingConfigurationsAnnotation: mutatingNames, ValidatingConfigurationsAnnotation: validatingNames}}}
	}
	for _, tc := range []struct {
		name     string
		objs     []client.Object
		injected []string // configurations that must hold the CA afterwards
		wantErr  string   // "" for success
	}{
		{name: "both named and labelled",
			objs:     []client.Object{shipped("m", "v"), mutating("m", labelled), validating("v", labelled)},
			injected: []string{"m", "v"}},
		{name: "a name that is not installed is skipped (config/webhook-feedback)",
			objs:     []client.Object{shipped("m", "v"), validating("v", labelled)},
			injected: []string{"v"}},
		{name: "comma-separated names",
			objs:     []client.Object{shipped("", "v, w"), validating("v", labelled), validating("w", labelled)},
			injected: []string{"v", "w"}},
		{name: "a labelled configuration the Secret does not name is left alone",
			objs:     []client.Object{shipped("", "v"), validating("v", labelled), validating("theirs", labelled)},
			injected: []string{"v"}},
		{name: "a named configuration labelled for another Secret",
			objs:    []client.Object{shipped("", "v"), validating("v", map[string]string{InjectCALabel: "other"})},
			wantErr: `labelled hitl.dev/inject-ca-from-secret="other"`},
		{name: "a named configuration without the label",
			objs:    []client.Object{shipped("m", "v"), mutating("m", nil), validating("v", labelled)},
			wantErr: `MutatingWebhookConfiguration m, which Secret hitl-system/hitl-webhook-server-cert names, is labelled hitl.dev/inject-ca-from-secret=""`},
		{name: "nothing named is installed",
			objs:    []client.Object{shipped("m", "v"), validating("theirs", labelled)},
			wantErr: "no webhook configuration that Secret hitl-system/hitl-webhook-server-cert names"},
		{name: "the Secret is not shipped",
			objs:    []client.Object{validating("v", labelled)},
			wantErr: "the install ships it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientBuilder().WithObjects(tc.objs...).WithInterceptorFuncs(interceptor.Funcs{
				List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
					t.Error("Ensure listed: RBAC by resourceNames cannot grant a list")
					return errors.New("no list")
				},
			}).Build()
			w := &WebhookCerts{Client: c, Namespace: ns, Secret: secret, Dir: t.TempDir(),
				Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))}
			err := w.Ensure(ctx)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}

			sec := &corev1.Secret{}
			var ca []byte
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, sec); err == nil {
				ca = sec.Data[keyCACert]
			}
			if tc.wantErr == "" {
				if len(ca) == 0 {
					t.Fatal("the Secret holds no CA")
				}
				crt, err := os.ReadFile(filepath.Join(w.Dir, keyCert))
				if err != nil || !bytes.Equal(crt, sec.Data[keyCert]) {
					t.Errorf("the webhook server's tls.crt is not the Secret's (%v)", err)
				}
			}
			for _, o := range tc.objs {
				var bundles [][]byte
				switch o := o.(type) {
				case *admissionv1.MutatingWebhookConfiguration:
					got := &admissionv1.MutatingWebhookConfiguration{}
					must(t, c.Get(ctx, client.ObjectKeyFromObject(o), got))
					for _, h := range got.Webhooks {
						bundles = append(bundles, h.ClientConfig.CABundle)
					}
				case *admissionv1.ValidatingWebhookConfiguration:
					got := &admissionv1.ValidatingWebhookConfiguration{}
					must(t, c.Get(ctx, client.ObjectKeyFromObject(o), got))
					for _, h := range got.Webhooks {
						bundles = append(bundles, h.ClientConfig.CABundle)
					}
				default:
					continue
				}
				want := slices.Contains(tc.injected, o.GetName())
				for _, b := range bundles {
					if got := len(b) > 0 && bytes.Equal(b, ca); got != want {
						t.Errorf("%T %s: CA injected %t, want %t", o, o.GetName(), got, want)
					}
				}
			}
		})
	}
}

func serviceClient(ns, name string) admissionv1.WebhookClientConfig {
	return admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: ns, Name: name, Path: ptr.To("/hook")}}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
