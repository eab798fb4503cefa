// Command manager runs hitl's controllers: it owns the life of every
// UserQuestion and gives every QuestionReply its outcome.
package main

import (
	"flag"
	"os"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/controllers"
	"github.com/hitl-dev/hitl/pkg/validation"
	hitlwebhooks "github.com/hitl-dev/hitl/pkg/webhooks"
)

func main() {
	var (
		metricsAddr = flag.String("metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
		probeAddr   = flag.String("health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
		leaderElect = flag.Bool("leader-elect", false, "elect a leader so that only one manager reconciles at a time")
		workers     = flag.Int("max-concurrent-reconciles", 8, "questions reconciled in parallel")
		maxTimeout  = flag.Duration("max-timeout", validation.DefaultMaxTimeout, "largest spec.timeout accepted (BAD_TIMEOUT above it)")
		webhooks    = flag.Bool("enable-webhooks", true, "serve the admission webhooks")
		webhookHost = flag.String("webhook-host", "", "address the webhook server listens on; empty means all")
		webhookPort = flag.Int("webhook-port", 9443, "port of the webhook server")
		certDir     = flag.String("webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory holding the webhook server's tls.crt and tls.key")
	)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := k8sruntime.NewScheme()
	must(clientgoscheme.AddToScheme(scheme))
	must(hitlv1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *probeAddr,
		LeaderElection:         *leaderElect,
		LeaderElectionID:       "hitl-manager.hitl.dev",
		Cache:                  controllers.CacheOptions(),
		WebhookServer:          webhook.NewServer(webhook.Options{Host: *webhookHost, Port: *webhookPort, CertDir: *certDir}),
	})
	if err != nil {
		log.Error(err, "Unable to create the manager")
		os.Exit(1)
	}

	if err := (&controllers.UserQuestionReconciler{
		Client:   mgr.GetClient(),
		Clock:    clock.RealClock{},
		Recorder: mgr.GetEventRecorder("hitl-controller"),
	}).SetupWithManager(mgr, *workers); err != nil {
		log.Error(err, "Unable to set up the question controller")
		os.Exit(1)
	}

	if *webhooks {
		must((&hitlwebhooks.QuestionWebhook{Client: mgr.GetClient(), MaxTimeout: *maxTimeout}).SetupWithManager(mgr))
		must((&hitlwebhooks.ReplyWebhook{Client: mgr.GetClient()}).SetupWithManager(mgr))
		must(mgr.AddReadyzCheck("webhooks", mgr.GetWebhookServer().StartedChecker()))
	}
	must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	must(mgr.AddReadyzCheck("readyz", healthz.Ping))

	log.Info("Starting the manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "The manager stopped")
		os.Exit(1)
	}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
