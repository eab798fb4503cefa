package userquestion_test

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hitl-dev/hitl/internal/manager"
	"github.com/hitl-dev/hitl/test/testenv"
)

// This suite runs the real controller, configured as the manager ships it,
// against a real kube-apiserver and etcd.
func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Question lifecycle controller suite")
}

var (
	env     *envtest.Environment
	cfg     *rest.Config
	k8s     client.Client
	ctx     = context.Background()
	stopMgr func()
)

var _ = BeforeSuite(func() {
	testenv.SuiteDefaults()
	env = testenv.New()
	var err error
	cfg, k8s, err = testenv.Start(env)
	Expect(err).NotTo(HaveOccurred())
	// No admission is installed: the suite's replies carry made-up authors,
	// whom the controller checks with the API server's authorizer.
	Expect(testenv.GrantAnswering(ctx, k8s)).To(Succeed())
	startManager()
})

var _ = AfterSuite(func() {
	stopManager()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// startManager starts a manager wired as cmd/manager wires it.
func startManager() {
	GinkgoHelper()
	startManagerWith(manager.DefaultConfig())
}

// startManagerWith starts a manager wired as cmd/manager wires it, with
// its flags set to c.
func startManagerWith(c manager.Config) {
	GinkgoHelper()
	stop, err := testenv.RunManager(env, cfg, c)
	Expect(err).NotTo(HaveOccurred())
	stopMgr = stop
}

// startManagerThrough stops the manager and starts one with its flags set
// to c, whose requests to the API server go through wrap.
func startManagerThrough(c manager.Config, wrap func(http.RoundTripper) http.RoundTripper) {
	GinkgoHelper()
	stopManager()
	through := rest.CopyConfig(cfg)
	through.Wrap(wrap)
	stop, err := testenv.RunManager(env, through, c)
	Expect(err).NotTo(HaveOccurred())
	stopMgr = stop
}

func stopManager() {
	if stopMgr != nil {
		stopMgr()
		stopMgr = nil
	}
}

func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "uq-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}
