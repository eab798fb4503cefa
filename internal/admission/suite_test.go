package admission_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hitl-dev/hitl/internal/manager"
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
	env     *envtest.Environment
	cfg     *rest.Config
	admin   client.Client
	ctx     = context.Background()
	cluster *testenv.Cluster
)

var _ = BeforeSuite(func() {
	testenv.SuiteDefaults()
	var err error
	cluster, err = testenv.StartCluster(manager.DefaultConfig(), testenv.Options{Admission: testenv.WebhookMode, MaxTimeout: maxTimeout})
	Expect(err).NotTo(HaveOccurred())
	env, cfg, admin = cluster.Env, cluster.Config, cluster.Client
})

var _ = AfterSuite(func() {
	if cluster != nil {
		Expect(cluster.Stop()).To(Succeed())
	}
})
