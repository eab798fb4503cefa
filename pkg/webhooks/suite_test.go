package webhooks_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hitl-dev/hitl/pkg/manager"
	"github.com/hitl-dev/hitl/test/testenv"
)

// This suite installs hitl's webhook mode (the validating admission
// policies, the mutating webhooks and the validating reply webhook) into a
// real kube-apiserver, serves the webhooks (with the controller) as the
// manager does, and acts as different users through impersonation.
func TestWebhooks(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Admission webhook suite")
}

// maxTimeout is the largest timeout in this suite (maxTimeout of the
// admission policies' parameter ConfigMap).
const maxTimeout = time.Hour

var (
	env         *envtest.Environment
	cfg         *rest.Config
	admin       client.Client
	ctx         = context.Background()
	stopManager func()
)

// The cluster is set up as testenv.StartCluster sets up webhook mode, but
// with the manager running before the admission policies are installed:
// the mutating webhooks fail closed, so the probes with which
// testenv.InstallAdmission waits for the policies are refused until the
// manager serves them (StartCluster, which installs admission first, waits
// in vain).
var _ = BeforeSuite(func() {
	testenv.SuiteDefaults()

	var err error
	env, err = testenv.WithWebhooks(testenv.New(), testenv.WebhookMode)
	Expect(err).NotTo(HaveOccurred())
	cfg, admin, err = testenv.Start(env)
	Expect(err).NotTo(HaveOccurred())
	stopManager, err = testenv.RunManager(env, cfg, manager.DefaultConfig())
	Expect(err).NotTo(HaveOccurred())
	Expect(testenv.InstallAdmission(ctx, admin, testenv.WebhookMode, maxTimeout)).To(Succeed())
})

var _ = AfterSuite(func() {
	if stopManager != nil {
		stopManager()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
