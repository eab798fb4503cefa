package webhooks_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/hitl-dev/hitl/controllers"
	"github.com/hitl-dev/hitl/pkg/webhooks"
	"github.com/hitl-dev/hitl/test/testenv"
)

// This suite installs hitl's webhooks into a real kube-apiserver, serves
// them (with the controller) as the manager does, and acts as different
// users through impersonation.
func TestWebhooks(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Admission webhook suite")
}

// maxTimeout is the manager's --max-timeout in this suite.
const maxTimeout = time.Hour

var (
	env    *envtest.Environment
	cfg    *rest.Config
	admin  client.Client
	ctx    context.Context
	cancel context.CancelFunc
)

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(15 * time.Second)
	SetDefaultEventuallyPollingInterval(20 * time.Millisecond)
	ctx, cancel = context.WithCancel(context.Background())

	env = testenv.WithWebhooks(testenv.New())
	var err error
	cfg, admin, err = testenv.Start(env)
	Expect(err).NotTo(HaveOccurred())

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controllers.CacheOptions(),
		WebhookServer:          webhook.NewServer(testenv.WebhookOptions(env)),
	})
	Expect(err).NotTo(HaveOccurred())
	Expect((&controllers.UserQuestionReconciler{Client: mgr.GetClient(), Clock: clock.RealClock{},
		Recorder: mgr.GetEventRecorder("hitl-controller")}).SetupWithManager(mgr, 4)).To(Succeed())
	Expect((&webhooks.QuestionWebhook{Client: mgr.GetClient(), MaxTimeout: maxTimeout}).SetupWithManager(mgr)).To(Succeed())
	Expect((&webhooks.ReplyWebhook{Client: mgr.GetClient()}).SetupWithManager(mgr)).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Expect(testenv.WaitForWebhooks(env, 20*time.Second)).To(Succeed())
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
