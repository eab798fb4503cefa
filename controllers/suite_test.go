package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hitl-dev/hitl/controllers"
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
	stopMgr context.CancelFunc
	mgrDone chan struct{}
)

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(15 * time.Second)
	SetDefaultEventuallyPollingInterval(20 * time.Millisecond)
	env = testenv.New()
	var err error
	cfg, k8s, err = testenv.Start(env)
	Expect(err).NotTo(HaveOccurred())
	startManager()
})

var _ = AfterSuite(func() {
	stopManager()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// startManager starts a manager with the controller as cmd/manager wires it.
func startManager() {
	GinkgoHelper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controllers.CacheOptions(),
		// The restart tests set the controller up again in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect((&controllers.UserQuestionReconciler{
		Client:   mgr.GetClient(),
		Clock:    clock.RealClock{},
		Recorder: mgr.GetEventRecorder("hitl-controller"),
	}).SetupWithManager(mgr, 8)).To(Succeed())

	var mctx context.Context
	mctx, stopMgr = context.WithCancel(ctx)
	mgrDone = make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(mgrDone)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
}

func stopManager() {
	if stopMgr != nil {
		stopMgr()
		<-mgrDone
		stopMgr = nil
	}
}

func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "uq-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}
