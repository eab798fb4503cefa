// Package controlplane starts the local control plane (envtest's
// kube-apiserver and etcd, from KUBEBUILDER_ASSETS) with hitl's CRDs, RBAC
// and admission installed. It is the start-up that hack/localcp (`make run`)
// and the test suites (through test/testenv) share, and it links no test
// framework: a binary built from it carries neither Ginkgo nor Gomega.
package controlplane

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Root is the repository's top directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// New returns an environment that installs hitl's CRDs. It finds the
// control-plane binaries through KUBEBUILDER_ASSETS, falling back to bin/k8s.
func New() *envtest.Environment {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		_ = os.Setenv("KUBEBUILDER_ASSETS", filepath.Join(Root(), "bin", "k8s"))
	}
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(Root(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                hitlv1.NewScheme(),
	}
}

// Start starts env and returns its admin config and a client for it.
func Start(env *envtest.Environment) (*rest.Config, client.Client, error) {
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("starting the local control plane (KUBEBUILDER_ASSETS=%s; run `make envtest-assets`): %w",
			os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, nil, fmt.Errorf("creating a client: %w", err)
	}
	return cfg, c, nil
}

// WithWebhooks makes env install the webhook configurations that mode uses
// (none for Policies; the validating reply webhook for Feedback; every
// webhook for WebhookMode), pointed at a local webhook server with generated
// certificates; see WebhookOptions.
func WithWebhooks(env *envtest.Environment, mode Admission) (*envtest.Environment, error) {
	if !mode.Webhooks() {
		return env, nil
	}
	objs, err := readObjects(filepath.Join(Root(), "config", "webhook", "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	o := envtest.WebhookInstallOptions{}
	for _, u := range objs {
		switch u.GetKind() {
		case "MutatingWebhookConfiguration":
			if mode != WebhookMode {
				continue
			}
			var m admissionv1.MutatingWebhookConfiguration
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &m); err != nil {
				return nil, err
			}
			o.MutatingWebhooks = append(o.MutatingWebhooks, &m)
		case "ValidatingWebhookConfiguration":
			var v admissionv1.ValidatingWebhookConfiguration
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v); err != nil {
				return nil, err
			}
			o.ValidatingWebhooks = append(o.ValidatingWebhooks, &v)
		}
	}
	env.WebhookInstallOptions = o
	return env, nil
}

// WithoutMutatingPolicies makes env's API server one from before 1.36, the
// clusters webhook mode is for: it neither serves MutatingAdmissionPolicy
// nor runs its admission plugin.
func WithoutMutatingPolicies(env *envtest.Environment) *envtest.Environment {
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Append("runtime-config",
		"admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false,admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings=false")
	args.Append("disable-admission-plugins", "MutatingAdmissionPolicy")
	return env
}

// ServesWebhooks reports whether a started env has webhook configurations.
func ServesWebhooks(env *envtest.Environment) bool {
	o := env.WebhookInstallOptions
	return len(o.MutatingWebhooks)+len(o.ValidatingWebhooks)+len(o.Paths) > 0
}

// WebhookOptions are the webhook server settings that match a started env.
func WebhookOptions(env *envtest.Environment) webhook.Options {
	o := env.WebhookInstallOptions
	return webhook.Options{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir}
}

// WaitForWebhooks waits until the webhook server of a started env accepts
// TLS connections.
func WaitForWebhooks(env *envtest.Environment, timeout time.Duration) error {
	o := env.WebhookInstallOptions
	addr := net.JoinHostPort(o.LocalServingHost, strconv.Itoa(o.LocalServingPort))
	deadline := time.Now().Add(timeout)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a readiness probe only
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the webhook server at %s is not serving: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
