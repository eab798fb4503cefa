package install

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hitl-dev/hitl/internal/manager"
	"github.com/hitl-dev/hitl/test/testenv"
)

// TestWebhookModeManagerOwnsOnlyItsCertificate installs what
// config/webhook-mode renders for the manager's own certificate (its
// ServiceAccount and RBAC, the certificate Secret, the webhook
// configurations) on a real API server and acts as that ServiceAccount,
// with a token of its own, never as admin: two replicas provision the
// certificate, inject its CA, restore a reset bundle and rotate the serving
// certificate with the shipped rights alone; every other Secret of the
// namespace and every other webhook configuration is refused to the same
// identity; and re-applying the shipped Secret server-side keeps the
// certificate and conflicts with nothing.
func TestWebhookModeManagerOwnsOnlyItsCertificate(t *testing.T) {
	env := testenv.New()
	cfg, admin, err := testenv.Start(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	objs := renderOverlay(t, filepath.Join(testenv.Root(), "config", "webhook-mode"))
	for i, o := range objs {
		// As decoded from JSON (int64 numbers), so that DeepCopy works.
		data, err := o.MarshalJSON()
		must(t, err)
		objs[i] = &unstructured.Unstructured{}
		must(t, objs[i].UnmarshalJSON(data))
	}
	deployment := the(t, objs, "Deployment", "")
	ns := deployment.GetNamespace()
	var d appsv1.Deployment
	must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(deployment.Object, &d))
	saName, secret := d.Spec.Template.Spec.ServiceAccountName, certSecretFlag(t, &d)
	shipped := the(t, objs, "Secret", secret)
	mutatingName := the(t, objs, "MutatingWebhookConfiguration", "").GetName()
	validatingName := the(t, objs, "ValidatingWebhookConfiguration", "").GetName()
	must(t, admin.Create(ctx, the(t, objs, "Namespace", ns)))
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
			"Secret", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			must(t, admin.Create(ctx, o.DeepCopy()))
		}
	}
	awaitBindings(ctx, t, admin, objs)

	// Someone else's Secret beside the manager's, and someone else's
	// webhook configurations, which a cluster-wide grant would reach.
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "database-password"},
		StringData: map[string]string{"password": "hunter2"}}
	must(t, admin.Create(ctx, other))
	theirHook := admissionv1.ValidatingWebhook{
		Name: "vsomeone.example.com", AdmissionReviewVersions: []string{"v1"},
		SideEffects: ptr.To(admissionv1.SideEffectClassNone), FailurePolicy: ptr.To(admissionv1.Ignore),
		ClientConfig: admissionv1.WebhookClientConfig{CABundle: []byte("their CA"),
			Service: &admissionv1.ServiceReference{Namespace: "elsewhere", Name: "theirs", Path: ptr.To("/validate")}},
		Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
			Rule: admissionv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}}}},
	}
	// Labelled as the manager's, too: the label grants nothing.
	theirs := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "someone-else", Labels: map[string]string{manager.InjectCALabel: secret}},
		Webhooks:   []admissionv1.ValidatingWebhook{theirHook},
	}
	must(t, admin.Create(ctx, theirs))
	theirsMutating := &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "someone-else-mutating"},
		Webhooks: []admissionv1.MutatingWebhook{{Name: theirHook.Name, AdmissionReviewVersions: theirHook.AdmissionReviewVersions,
			SideEffects: theirHook.SideEffects, FailurePolicy: theirHook.FailurePolicy, ClientConfig: theirHook.ClientConfig, Rules: theirHook.Rules}},
	}
	must(t, admin.Create(ctx, theirsMutating))

	token, _, err := testenv.RequestToken(ctx, admin, ns, saName, time.Hour)
	must(t, err)
	asManager := rest.AnonymousClientConfig(cfg)
	asManager.BearerToken = token
	mgr, err := client.New(asManager, client.Options{Scheme: testenv.Scheme()})
	must(t, err)

	caPatch := client.RawPatch(types.JSONPatchType, []byte(`[{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": "YXR0YWNrZXI="}]`))
	for _, attack := range []struct {
		name string
		do   func() error
	}{
		{"read another Secret of its namespace", func() error {
			return mgr.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Secret{})
		}},
		{"list the Secrets of its namespace", func() error {
			return mgr.List(ctx, &corev1.SecretList{}, client.InNamespace(ns))
		}},
		{"list another Secret by name", func() error {
			return mgr.List(ctx, &corev1.SecretList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": other.Name})
		}},
		{"update another Secret", func() error {
			s := other.DeepCopy()
			s.StringData = map[string]string{"password": "mine"}
			return mgr.Update(ctx, s)
		}},
		{"create a Secret", func() error {
			return mgr.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planted"}})
		}},
		{"delete its own Secret", func() error {
			return mgr.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret}})
		}},
		{"patch another validating webhook configuration", func() error {
			return mgr.Patch(ctx, theirs.DeepCopy(), caPatch)
		}},
		{"patch another mutating webhook configuration", func() error {
			return mgr.Patch(ctx, theirsMutating.DeepCopy(), caPatch)
		}},
		{"read another webhook configuration", func() error {
			return mgr.Get(ctx, client.ObjectKeyFromObject(theirs), &admissionv1.ValidatingWebhookConfiguration{})
		}},
		{"list the webhook configurations", func() error {
			return mgr.List(ctx, &admissionv1.ValidatingWebhookConfigurationList{})
		}},
		{"delete its own webhook configuration", func() error {
			return mgr.Delete(ctx, &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: mutatingName}})
		}},
	} {
		if err := attack.do(); !apierrors.IsForbidden(err) {
			t.Errorf("the manager's ServiceAccount may %s: got %v, want Forbidden", attack.name, err)
		}
	}

	// The shipped rights suffice: both replicas start at once, one loses
	// the race to fill the Secret and takes the winner's certificate on its
	// next check.
	clock := clocktesting.NewFakePassiveClock(time.Now())
	replicas := make([]*manager.WebhookCerts, 2)
	for i := range replicas {
		replicas[i] = &manager.WebhookCerts{Client: mgr, Namespace: ns, Secret: secret,
			Dir: filepath.Join(t.TempDir(), "certs"), Interval: time.Minute, Clock: clock}
	}
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
	host := "hitl-webhook-service." + ns + ".svc"
	first := verifyServing(t, sec.Data["tls.crt"], ca, host, clock.Now())
	checkServed := func() {
		t.Helper()
		for i, r := range replicas {
			crt, err := os.ReadFile(filepath.Join(r.Dir, "tls.crt"))
			must(t, err)
			if !bytes.Equal(crt, sec.Data["tls.crt"]) {
				t.Errorf("replica %d serves another certificate than the Secret's", i)
			}
		}
	}
	checkInjected := func() {
		t.Helper()
		mutating := &admissionv1.MutatingWebhookConfiguration{}
		must(t, admin.Get(ctx, client.ObjectKey{Name: mutatingName}, mutating))
		validating := &admissionv1.ValidatingWebhookConfiguration{}
		must(t, admin.Get(ctx, client.ObjectKey{Name: validatingName}, validating))
		var bundles []admissionv1.WebhookClientConfig
		for _, h := range mutating.Webhooks {
			bundles = append(bundles, h.ClientConfig)
		}
		for _, h := range validating.Webhooks {
			bundles = append(bundles, h.ClientConfig)
		}
		for i, cc := range bundles {
			if !bytes.Equal(cc.CABundle, ca) {
				t.Errorf("webhook %d of %s and %s has no CA bundle of the Secret", i, mutatingName, validatingName)
			}
		}
		got := &admissionv1.ValidatingWebhookConfiguration{}
		must(t, admin.Get(ctx, client.ObjectKeyFromObject(theirs), got))
		gotMutating := &admissionv1.MutatingWebhookConfiguration{}
		must(t, admin.Get(ctx, client.ObjectKeyFromObject(theirsMutating), gotMutating))
		if string(got.Webhooks[0].ClientConfig.CABundle) != "their CA" || string(gotMutating.Webhooks[0].ClientConfig.CABundle) != "their CA" {
			t.Error("a webhook configuration the Secret does not name was changed")
		}
	}
	checkServed()
	checkInjected()

	// `kubectl apply` of a configuration resets its bundle; the next check
	// restores it.
	reset := &admissionv1.MutatingWebhookConfiguration{}
	must(t, admin.Get(ctx, client.ObjectKey{Name: mutatingName}, reset))
	reset.Webhooks[0].ClientConfig.CABundle = nil
	must(t, admin.Update(ctx, reset))
	must(t, replicas[1].Ensure(ctx))
	checkInjected()

	// Re-applying the install (`kubectl apply --server-side`) owns no key
	// of the Secret: it conflicts with nothing and keeps the certificate.
	if err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(shipped.DeepCopy()), client.FieldOwner("kubectl")); err != nil {
		t.Fatalf("re-applying the shipped Secret: %v", err)
	}
	reapplied := &corev1.Secret{}
	must(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, reapplied))
	if !bytes.Equal(reapplied.Data["tls.crt"], sec.Data["tls.crt"]) || !bytes.Equal(reapplied.Data["ca.key"], sec.Data["ca.key"]) {
		t.Error("re-applying the shipped Secret changed the certificate")
	}

	// 250 days on: a new serving certificate from the same CA, written by
	// the manager's update right alone.
	clock.SetTime(clock.Now().Add(250 * 24 * time.Hour))
	for _, r := range replicas {
		must(t, r.Ensure(ctx))
	}
	must(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, sec))
	if !bytes.Equal(sec.Data["ca.crt"], ca) {
		t.Fatal("the CA changed with the serving certificate")
	}
	if second := verifyServing(t, sec.Data["tls.crt"], ca, host, clock.Now()); second.Equal(first) {
		t.Error("the serving certificate was not rotated")
	}
	checkServed()
	checkInjected()
}

// the returns the one object of kind in objs named name (any name if
// empty).
func the(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			if found != nil {
				t.Fatalf("more than one %s %s", kind, name)
			}
			found = o
		}
	}
	if found == nil {
		t.Fatalf("no %s %s", kind, name)
	}
	return found
}

// certSecretFlag is the value of the manager's --webhook-cert-secret.
func certSecretFlag(t *testing.T, d *appsv1.Deployment) string {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--webhook-cert-secret="); ok {
				return v
			}
		}
	}
	t.Fatalf("%s has no --webhook-cert-secret", d.Name)
	return ""
}
