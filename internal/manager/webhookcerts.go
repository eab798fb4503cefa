package manager

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// InjectCALabel marks the webhook configurations that accept the CA of the
// manager's own webhook certificate; the value names the Secret that holds
// it. The CA goes into a configuration only when the Secret names it (the
// annotations below) and it carries this label naming the Secret.
const InjectCALabel = "hitl.dev/inject-ca-from-secret"

// Annotations of the certificate Secret naming, comma-separated, the webhook
// configurations to inject its CA into. The manager reads each by name and
// never lists them, so that its RBAC can name them (resourceNames) instead
// of granting every webhook configuration of the cluster. A name that is not
// installed is skipped (config/webhook-feedback has no mutating
// configuration).
const (
	MutatingConfigurationsAnnotation   = "hitl.dev/mutating-webhook-configurations"
	ValidatingConfigurationsAnnotation = "hitl.dev/validating-webhook-configurations"
)

// Lifetimes of the generated certificates, and how early they are renewed:
// the serving certificate when less than a third of its life is left, the
// CA when less than the serving certificate's full life is.
const (
	caLifetime      = 10 * 365 * 24 * time.Hour
	servingLifetime = 365 * 24 * time.Hour
)

// WebhookCerts provisions and rotates the webhook server's certificate
// without cert-manager: a self-signed CA and a serving certificate for the
// Services the webhook configurations call, kept in one Secret that every
// replica shares, written to the webhook server's certificate directory
// (which reloads it), with the CA injected into the configurations. Every
// replica runs it; racing writes are guarded by the Secret's
// resourceVersion.
//
// The install ships the Secret, empty, with the annotations that name the
// configurations: the manager only reads and updates that one Secret and
// reads and patches those configurations, each by name, which RBAC can
// grant by resourceNames (config/webhook-certificate).
type WebhookCerts struct {
	// Client reads and writes directly (not from a cache): the Secret and
	// the webhook configurations are read before the manager starts.
	Client client.Client
	// Namespace and Secret name the Secret.
	Namespace, Secret string
	// Dir is where tls.crt and tls.key are written for the webhook server.
	Dir string
	// Interval is how often the certificate and the injected CA are
	// checked; a CA bundle someone reset (kubectl apply) is restored within
	// it.
	Interval time.Duration
	Clock    clock.PassiveClock
}

// Secret keys: the webhook server's pair, and the CA that signs it.
const (
	keyCACert = "ca.crt"
	keyCAKey  = "ca.key"
	keyCert   = corev1.TLSCertKey
	keyKey    = corev1.TLSPrivateKeyKey
)

// Start checks every Interval until ctx ends; errors are logged and retried.
func (w *WebhookCerts) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("webhook-certs")
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := w.Ensure(ctx); err != nil {
				log.Error(err, "Checking the webhook certificate")
			}
		}
	}
}

// NeedLeaderElection is false: every replica serves webhooks and needs the
// certificate.
func (w *WebhookCerts) NeedLeaderElection() bool { return false }

// Ensure makes the Secret hold a valid certificate for the webhook Services,
// writes it to Dir, and injects the CA into the configurations it names.
func (w *WebhookCerts) Ensure(ctx context.Context) error {
	sec := &corev1.Secret{}
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.Secret}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			// Creating it would take the right to create any Secret.
			return fmt.Errorf("reading Secret %s/%s: %w (the install ships it; the manager only fills it)", w.Namespace, w.Secret, err)
		}
		return fmt.Errorf("reading Secret %s/%s: %w", w.Namespace, w.Secret, err)
	}
	configs, err := w.configurations(ctx, sec)
	if err != nil {
		return err
	}
	hosts := serviceHosts(configs)
	if len(hosts) == 0 {
		return fmt.Errorf("no webhook configuration that Secret %s/%s names (annotations %s, %s) is installed, labelled %s=%s and calls a Service",
			w.Namespace, w.Secret, MutatingConfigurationsAnnotation, ValidatingConfigurationsAnnotation, InjectCALabel, w.Secret)
	}
	data, changed, err := renew(sec.Data, hosts, w.Clock.Now())
	if err != nil {
		return err
	}
	if changed {
		sec.Data = data
		// Guarded by the resourceVersion read: another replica that wrote
		// first wins, and its certificate is used next time.
		if err := w.Client.Update(ctx, sec); err != nil {
			return fmt.Errorf("writing Secret %s/%s: %w", w.Namespace, w.Secret, err)
		}
		logf.FromContext(ctx).Info("Wrote a new webhook certificate", "secret", w.Namespace+"/"+w.Secret, "hosts", hosts)
	}
	if err := w.writeFiles(sec.Data); err != nil {
		return err
	}
	for _, c := range configs {
		if err := w.setBundles(ctx, c, sec.Data[keyCACert]); err != nil {
			return err
		}
	}
	return nil
}

// webhookConfiguration is a mutating or validating webhook configuration
// and the client configurations of its webhooks, which point into it.
type webhookConfiguration struct {
	obj     client.Object
	clients []*admissionv1.WebhookClientConfig
}

// configurations reads, each by name, the webhook configurations that sec's
// annotations name, skipping those not installed.
func (w *WebhookCerts) configurations(ctx context.Context, sec *corev1.Secret) ([]webhookConfiguration, error) {
	var out []webhookConfiguration
	read := func(kind string, name string, c client.Object, clients func() []*admissionv1.WebhookClientConfig) error {
		found, err := w.getConfiguration(ctx, kind, name, c)
		if found {
			out = append(out, webhookConfiguration{obj: c, clients: clients()})
		}
		return err
	}
	for _, name := range names(sec.Annotations[MutatingConfigurationsAnnotation]) {
		c := &admissionv1.MutatingWebhookConfiguration{}
		if err := read("MutatingWebhookConfiguration", name, c, func() (cs []*admissionv1.WebhookClientConfig) {
			for i := range c.Webhooks {
				cs = append(cs, &c.Webhooks[i].ClientConfig)
			}
			return cs
		}); err != nil {
			return nil, err
		}
	}
	for _, name := range names(sec.Annotations[ValidatingConfigurationsAnnotation]) {
		c := &admissionv1.ValidatingWebhookConfiguration{}
		if err := read("ValidatingWebhookConfiguration", name, c, func() (cs []*admissionv1.WebhookClientConfig) {
			for i := range c.Webhooks {
				cs = append(cs, &c.Webhooks[i].ClientConfig)
			}
			return cs
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// getConfiguration reads the webhook configuration kind name into obj, and
// says whether it is installed. One that is installed but not labelled for
// the Secret is an error: the CA goes only where both ends agree.
func (w *WebhookCerts) getConfiguration(ctx context.Context, kind, name string, obj client.Object) (bool, error) {
	switch err := w.Client.Get(ctx, client.ObjectKey{Name: name}, obj); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	if got := obj.GetLabels()[InjectCALabel]; got != w.Secret {
		return false, fmt.Errorf("%s %s, which Secret %s/%s names, is labelled %s=%q: not injecting the CA into it",
			kind, name, w.Namespace, w.Secret, InjectCALabel, got)
	}
	return true, nil
}

// names splits a comma-separated list of names.
func names(list string) []string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// serviceHosts are the DNS names of every Service that configs call,
// sorted.
func serviceHosts(configs []webhookConfiguration) []string {
	var hosts []string
	for _, c := range configs {
		for _, cc := range c.clients {
			r := cc.Service
			if r == nil {
				continue
			}
			for _, h := range []string{r.Name + "." + r.Namespace + ".svc", r.Name + "." + r.Namespace + ".svc.cluster.local"} {
				if !slices.Contains(hosts, h) {
					hosts = append(hosts, h)
				}
			}
		}
	}
	sort.Strings(hosts)
	return hosts
}

// writeFiles writes the serving pair into Dir when it differs, through a
// rename so the webhook server never reads half a file.
func (w *WebhookCerts) writeFiles(data map[string][]byte) error {
	if err := os.MkdirAll(w.Dir, 0o700); err != nil {
		return err
	}
	for _, k := range []string{keyKey, keyCert} {
		path := filepath.Join(w.Dir, k)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data[k]) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data[k], 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	return nil
}

// setBundles sets ca in the client configurations of c's webhooks, and
// patches c (guarded by the resourceVersion read) when one was stale.
func (w *WebhookCerts) setBundles(ctx context.Context, c webhookConfiguration, ca []byte) error {
	patch := client.MergeFromWithOptions(c.obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	stale := false
	for _, cc := range c.clients {
		if !bytes.Equal(cc.CABundle, ca) {
			cc.CABundle, stale = ca, true
		}
	}
	if !stale {
		return nil
	}
	if err := w.Client.Patch(ctx, c.obj, patch); err != nil {
		return fmt.Errorf("injecting the CA into %s: %w", c.obj.GetName(), err)
	}
	return nil
}

// renew returns the Secret's data with a CA and a serving certificate that
// are valid at now for hosts, and whether it changed anything.
func renew(data map[string][]byte, hosts []string, now time.Time) (map[string][]byte, bool, error) {
	out := map[string][]byte{}
	for k, v := range data {
		out[k] = v
	}
	ca, caKey, err := parsePair(data[keyCACert], data[keyCAKey])
	caOK := err == nil && ca.IsCA && now.Before(ca.NotAfter.Add(-servingLifetime)) && !now.Before(ca.NotBefore)
	changed := false
	if !caOK {
		ca, caKey, out[keyCACert], out[keyCAKey], err = newCert(nil, nil, nil, now, caLifetime)
		if err != nil {
			return nil, false, err
		}
		changed = true
	}
	cert, _, err := parsePair(data[keyCert], data[keyKey])
	certOK := !changed && err == nil && cert.CheckSignatureFrom(ca) == nil &&
		now.Before(cert.NotAfter.Add(-servingLifetime/3)) && !now.Before(cert.NotBefore) &&
		slices.Equal(sortedCopy(cert.DNSNames), hosts)
	if !certOK {
		if _, _, out[keyCert], out[keyKey], err = newCert(ca, caKey, hosts, now, servingLifetime); err != nil {
			return nil, false, err
		}
		changed = true
	}
	return out, changed, nil
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}

func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("not an ECDSA key")
	}
	return cert, key, nil
}

// newCert makes a CA (when ca is nil) or a serving certificate for hosts
// signed by ca, valid from a minute before now (clock skew) for lifetime.
func newCert(ca *x509.Certificate, caKey *ecdsa.PrivateKey, hosts []string, now time.Time, lifetime time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, []byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(lifetime),
	}
	parent, signer := tmpl, key
	if ca == nil {
		tmpl.Subject = pkix.Name{CommonName: "hitl webhook CA"}
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	} else {
		tmpl.Subject = pkix.Name{CommonName: hosts[0]}
		tmpl.DNSNames = hosts
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		parent, signer = ca, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return cert, key,
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// ServiceAccountNamespaceFile holds the namespace of the Pod's
// ServiceAccount.
const ServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ProvisionWebhookCerts makes sure, before the webhook server starts, that
// dir holds a certificate from the Secret namespace/secret (filling or
// renewing it) and that the webhook configurations it names trust its CA;
// it retries for up to timeout (the configurations may be applied just
// after the Deployment). The returned WebhookCerts, added to the manager,
// keeps both current. An empty namespace means the Pod's own.
func ProvisionWebhookCerts(ctx context.Context, c client.Client, namespace, secret, dir string, timeout time.Duration) (*WebhookCerts, error) {
	if namespace == "" {
		ns, err := os.ReadFile(ServiceAccountNamespaceFile)
		if err != nil {
			return nil, fmt.Errorf("the webhook certificate's namespace: not in a Pod (%w); set it", err)
		}
		namespace = string(bytes.TrimSpace(ns))
	}
	w := &WebhookCerts{Client: c, Namespace: namespace, Secret: secret, Dir: dir, Interval: time.Minute, Clock: clock.RealClock{}}
	deadline := time.Now().Add(timeout)
	for {
		err := w.Ensure(ctx)
		if err == nil {
			return w, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		logf.FromContext(ctx).Info("Waiting to provision the webhook certificate", "reason", err.Error())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
