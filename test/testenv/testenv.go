// Package testenv is the test suites' door to the local control plane
// (envtest's kube-apiserver and etcd, from KUBEBUILDER_ASSETS, with hitl's
// CRDs installed). The start-up itself lives in internal/controlplane, which
// hack/localcp (`make run`) shares without linking a test framework; this
// package adds what only tests want: Ginkgo's log writer and Gomega's
// defaults (SuiteDefaults) and a cluster shared by a package's Go tests
// (Shared).
package testenv

import (
	"context"
	"os"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/controlplane"
	"github.com/hitl-dev/hitl/internal/manager"
	"github.com/hitl-dev/hitl/internal/manager/local"
)

// Admission is how a test cluster admits questions and replies.
type Admission = controlplane.Admission

// The admission modes.
const (
	Policies    = controlplane.Policies
	Feedback    = controlplane.Feedback
	WebhookMode = controlplane.WebhookMode
)

// Install is where config/default installs hitl.
type Install = controlplane.Install

// Cluster is a started local control plane with admission and a manager.
type Cluster = local.Cluster

// Options say how StartCluster sets admission up.
type Options = local.Options

// Root is the repository's top directory.
func Root() string { return controlplane.Root() }

// Scheme knows the built-in kinds and hitl's.
func Scheme() *k8sruntime.Scheme { return hitlv1.NewScheme() }

// New returns an environment that installs hitl's CRDs.
func New() *envtest.Environment { return controlplane.New() }

// Start starts env and returns its admin config and a client for it.
func Start(env *envtest.Environment) (*rest.Config, client.Client, error) {
	return controlplane.Start(env)
}

// WithWebhooks makes env install the webhook configurations that mode uses.
func WithWebhooks(env *envtest.Environment, mode Admission) (*envtest.Environment, error) {
	return controlplane.WithWebhooks(env, mode)
}

// WithoutMutatingPolicies makes env's API server one without
// MutatingAdmissionPolicy.
func WithoutMutatingPolicies(env *envtest.Environment) *envtest.Environment {
	return controlplane.WithoutMutatingPolicies(env)
}

// WebhookOptions are the webhook server settings that match a started env.
func WebhookOptions(env *envtest.Environment) webhook.Options {
	return controlplane.WebhookOptions(env)
}

// WaitForWebhooks waits until the webhook server of a started env accepts
// TLS connections.
func WaitForWebhooks(env *envtest.Environment, timeout time.Duration) error {
	return controlplane.WaitForWebhooks(env, timeout)
}

// RunManager starts a manager against a started env and returns a function
// that stops it.
func RunManager(env *envtest.Environment, cfg *rest.Config, c manager.Config) (stop func(), err error) {
	return local.RunManager(env, cfg, c)
}

// StartCluster starts a Cluster whose manager runs with c.
func StartCluster(c manager.Config, o Options) (*Cluster, error) {
	return local.StartCluster(c, o)
}

// ParseAdmission reads the name String gives a mode.
func ParseAdmission(name string) (Admission, error) { return controlplane.ParseAdmission(name) }

// AdmissionObjects renders config/default's admission objects for mode.
func AdmissionObjects(mode Admission) ([]*unstructured.Unstructured, error) {
	return controlplane.AdmissionObjects(mode)
}

// InstallAdmission installs mode's admission objects and waits until they
// are in force.
func InstallAdmission(ctx context.Context, c client.Client, mode Admission, maxTimeout time.Duration) error {
	return controlplane.InstallAdmission(ctx, c, mode, maxTimeout)
}

// WaitForPolicies waits until the admission policies act in namespace.
func WaitForPolicies(ctx context.Context, c client.Client, namespace string, mutating bool, timeout time.Duration) error {
	return controlplane.WaitForPolicies(ctx, c, namespace, mutating, timeout)
}

// GrantAnswering grants the answering ClusterRole as config/default does.
func GrantAnswering(ctx context.Context, c client.Client) error {
	return controlplane.GrantAnswering(ctx, c)
}

// DefaultInstall reads the namespace and name prefix of config/default.
func DefaultInstall() (Install, error) { return controlplane.DefaultInstall() }

// RequestToken requests a token for a ServiceAccount from the TokenRequest
// API.
func RequestToken(ctx context.Context, c client.Client, namespace, name string, expiration time.Duration) (string, time.Time, error) {
	return controlplane.RequestToken(ctx, c, namespace, name, expiration)
}

// RequestAudienceToken is RequestToken for a token minted for audiences.
func RequestAudienceToken(ctx context.Context, c client.Client, namespace, name string, expiration time.Duration, audiences ...string) (string, time.Time, error) {
	return controlplane.RequestAudienceToken(ctx, c, namespace, name, expiration, audiences...)
}

// TokenKubeconfig is a kubeconfig for cfg's server that authenticates as
// user with token or tokenFile.
func TokenKubeconfig(cfg *rest.Config, user, token, tokenFile string) ([]byte, error) {
	return controlplane.TokenKubeconfig(cfg, user, token, tokenFile)
}

// WriteFileAtomic writes data to path through a temporary file and a rename.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return controlplane.WriteFileAtomic(path, data, perm)
}

// SuiteDefaults sends the controller's logs to Ginkgo's writer and sets the
// Eventually defaults that the envtest suites share.
func SuiteDefaults() {
	logf.SetLogger(zap.New(zap.WriteTo(ginkgo.GinkgoWriter), zap.UseDevMode(true)))
	gomega.SetDefaultEventuallyTimeout(15 * time.Second)
	gomega.SetDefaultEventuallyPollingInterval(20 * time.Millisecond)
}
