package answerer_test

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

// This suite runs the answerer SDK against a real kube-apiserver with
// hitl's webhooks and controller served as the manager serves them. The
// admin client plays the agent: it asks, and admits queued replies.
func TestAnswerer(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Answerer SDK suite")
}

var (
	env     *envtest.Environment
	cfg     *rest.Config
	admin   client.Client
	watcher client.WithWatch
	ctx     = context.Background()
	cluster *testenv.Cluster
)

var _ = BeforeSuite(func() {
	testenv.SuiteDefaults()
	SetDefaultConsistentlyPollingInterval(50 * time.Millisecond)

	var err error
	cluster, err = testenv.StartCluster(manager.DefaultConfig(), testenv.Options{})
	Expect(err).NotTo(HaveOccurred())
	env, cfg, admin, watcher = cluster.Env, cluster.Config, cluster.Client, cluster.Client
})

var _ = AfterSuite(func() {
	if cluster != nil {
		Expect(cluster.Stop()).To(Succeed())
	}
})
