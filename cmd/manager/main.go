// Command manager runs hitl's controller (and, when enabled, its optional
// admission webhooks): it owns the life of every UserQuestion and gives
// every QuestionReply its outcome.
package main

import (
	"flag"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/manager"
)

func main() {
	c := manager.DefaultConfig()
	var (
		metricsAddr = flag.String("metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
		metricsTLS  = flag.Bool("metrics-secure", false, "serve metrics over HTTPS, each scrape authenticated with a TokenReview and authorized with a SubjectAccessReview (get on the URL /metrics, as the ClusterRole hitl-metrics-reader grants); the shipped Deployment sets it")
		metricsCert = flag.String("metrics-cert-dir", "", "directory of the metrics server's tls.crt and tls.key with --metrics-secure; empty means a self-signed certificate made at start")
		probeAddr   = flag.String("health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
		leaderElect = flag.Bool("leader-elect", false, "elect a leader so that only one manager reconciles at a time")
		leaderNS    = flag.String("leader-election-namespace", "", "namespace of the leader-election Lease; empty means the manager's own namespace (in a Pod) or the kubeconfig's")
		leaseFor    = flag.Duration("leader-elect-lease-duration", 8*time.Second, "how long a standby waits after the leader's last renewal before it takes over")
		renewFor    = flag.Duration("leader-elect-renew-deadline", 6*time.Second, "how long the leader keeps trying to renew before it gives up leading and exits")
		retryEvery  = flag.Duration("leader-elect-retry-period", 1500*time.Millisecond, "how often candidates try to acquire or renew the Lease")
		webhookHost = flag.String("webhook-host", "", "address the webhook server listens on; empty means all")
		webhookPort = flag.Int("webhook-port", 9443, "port of the webhook server")
		certDir     = flag.String("webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory holding the webhook server's tls.crt and tls.key")
		certSecret  = flag.String("webhook-cert-secret", "", "with --enable-webhooks: provision and rotate the webhook certificate in this Secret (no cert-manager), write it to --webhook-cert-dir and inject its CA into the webhook configurations labelled "+manager.InjectCALabel+"=<this name>; empty means the certificate is mounted there")
		certNS      = flag.String("webhook-cert-namespace", "", "namespace of --webhook-cert-secret; empty means the Pod's")
		qps         = flag.Float64("kube-api-qps", 500, "client-side limit of API requests per second (controller-runtime's default of 20 caps settlement throughput)")
		burst       = flag.Int("kube-api-burst", 1000, "client-side burst of API requests")
		pprofAddr   = flag.String("pprof-bind-address", "", "address of the Go profiling endpoints (/debug/pprof); empty disables them")
	)
	flag.IntVar(&c.Workers, "max-concurrent-reconciles", c.Workers, "questions reconciled in parallel")
	flag.IntVar(&c.ContinuedEventsPerMinute, "continued-events-per-minute", c.ContinuedEventsPerMinute,
		"each namespace's budget of Continued Events (a window closed unanswered), refilled over a minute and usable all at once; over it, the namespace's Continued Events of the next 5 s are summed up in one Event (counted in hitl_events_total{result=\"aggregated\"}); 0 means one Event per transition. Settled, Cancelled and rejection Events are never limited")
	flag.DurationVar(&c.VoteGather, "vote-gather", c.VoteGather,
		"how long a vote on a question governed by an approval policy waits, when it decides nothing, for the votes sent with it, to be written in one status write with them; 0 writes each vote at once")
	flag.DurationVar(&c.OpenGather, "open-gather", c.OpenGather,
		"how long a new question waits for a reply before its Open status is written; a reply in by then settles it in one status write; 0 writes Open at once")
	flag.StringVar(&c.ClaimFenceNamespace, "claim-fence-namespace", "",
		"the manager's own namespace, where it writes the claims fence that makes its cache current before a window closes; empty means --leader-election-namespace, else the Pod's; outside a Pod with neither, the claims are read from the API server")
	flag.BoolVar(&c.Webhooks, "enable-webhooks", c.Webhooks,
		"serve the optional admission webhooks (config/webhook-feedback, config/webhook-mode); the default install checks admission with policies inside the API server")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	mem := manager.TuneMemory()
	log.Info("Tuned the garbage collector (0 means left to the Go runtime and GOGC/GOMEMLIMIT)",
		"gcPercent", mem.GCPercent, "memoryLimitBytes", mem.MemoryLimit)

	if c.ClaimFenceNamespace == "" {
		c.ClaimFenceNamespace = *leaderNS
	}
	if c.ClaimFenceNamespace == "" {
		if ns, err := os.ReadFile(manager.ServiceAccountNamespaceFile); err == nil {
			c.ClaimFenceNamespace = strings.TrimSpace(string(ns))
		}
	}
	scheme := hitlv1.NewScheme()

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	metrics := metricsserver.Options{BindAddress: *metricsAddr}
	if *metricsTLS {
		metrics.SecureServing, metrics.CertDir = true, *metricsCert
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metrics,
		HealthProbeBindAddress:  *probeAddr,
		PprofBindAddress:        *pprofAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "hitl-manager.hitl.dev",
		LeaderElectionNamespace: *leaderNS,
		LeaseDuration:           leaseFor,
		RenewDeadline:           renewFor,
		RetryPeriod:             retryEvery,
		// A manager that stops (SIGTERM on rollout or drain) hands over at
		// once instead of making the standby wait out the lease.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         manager.CacheOptions(),
		WebhookServer:                 webhook.NewServer(webhook.Options{Host: *webhookHost, Port: *webhookPort, CertDir: *certDir}),
	})
	if err != nil {
		log.Error(err, "Unable to create the manager")
		os.Exit(1)
	}
	if err := manager.Setup(mgr, c); err != nil {
		log.Error(err, "Unable to set up the manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	if c.Webhooks && *certSecret != "" {
		direct, err := client.New(cfg, client.Options{Scheme: scheme})
		if err == nil {
			var certs *manager.WebhookCerts
			certs, err = manager.ProvisionWebhookCerts(ctrl.LoggerInto(ctx, log), direct, *certNS, *certSecret, *certDir, 2*time.Minute)
			if err == nil {
				err = mgr.Add(certs)
			}
		}
		if err != nil {
			log.Error(err, "Unable to provision the webhook certificate")
			os.Exit(1)
		}
	}

	log.Info("Starting the manager")
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "The manager stopped")
		os.Exit(1)
	}
}
