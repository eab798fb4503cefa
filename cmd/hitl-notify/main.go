// Command hitl-notify tells people of hitl's questions where they already
// are: it sends the events that NotificationPolicies select (asked,
// reminders, continued, settled, cancelled, escalated) to their
// NotificationChannels (a signed webhook, Slack, Microsoft Teams, email),
// each linking to the question's card in the web inbox. It runs as its own
// ServiceAccount with the role of config/notify, with leader election
// between replicas; its metrics are served on an authenticated endpoint.
package main

import (
	"flag"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify"
	"github.com/hitl-dev/hitl/internal/notify/channel"
)

func main() {
	var (
		metricsAddr = flag.String("metrics-bind-address", "0", "address of the metrics endpoint (HTTPS, authenticated and authorized by the API server); 0 turns it off")
		probeAddr   = flag.String("health-probe-bind-address", ":8081", "address of /healthz and /readyz")
		leaderElect = flag.Bool("leader-elect", false, "elect a leader among replicas; only the leader sends")
		leaderNS    = flag.String("leader-election-namespace", "", "namespace of the leader-election Lease; empty means the notifier's own namespace (in a Pod), which a process outside a Pod must name")
		leaseFor    = flag.Duration("leader-elect-lease-duration", 8*time.Second, "how long a standby waits after the leader's last renewal before it takes over")
		renewFor    = flag.Duration("leader-elect-renew-deadline", 6*time.Second, "how long the leader keeps trying to renew before it gives up leading and exits")
		retryEvery  = flag.Duration("leader-elect-retry-period", 1500*time.Millisecond, "how often candidates try to acquire or renew the Lease")
		pprofAddr   = flag.String("pprof-bind-address", "", "address of the Go profiling endpoints (/debug/pprof); empty disables them")
		inboxURL    = flag.String("inbox-url", "", "the web inbox's URL; notifications link to <inbox-url>/q/<namespace>/<name>")
		attempts    = flag.Int("attempts", channel.DefaultRetry.Attempts, "how many times a notification is tried at most")
		resync      = flag.Duration("resync", time.Minute, "how often the channels' Secrets are read again")
	)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("hitl-notify")

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme: hitlv1.NewScheme(),
		Metrics: metricsserver.Options{
			BindAddress: *metricsAddr, SecureServing: true, FilterProvider: filters.WithAuthenticationAndAuthorization,
		},
		HealthProbeBindAddress:  *probeAddr,
		PprofBindAddress:        *pprofAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "hitl-notify.hitl.dev",
		LeaderElectionNamespace: *leaderNS,
		LeaseDuration:           leaseFor,
		RenewDeadline:           renewFor,
		RetryPeriod:             retryEvery,
		// A notifier that stops (SIGTERM on rollout or drain) hands over at
		// once instead of making the standby wait out the lease.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		log.Error(err, "Cannot create the manager")
		os.Exit(1)
	}
	retry := channel.DefaultRetry
	retry.Attempts = *attempts
	if _, err := notify.New(mgr, notify.Options{InboxURL: *inboxURL, Retry: retry, Resync: *resync}); err != nil {
		log.Error(err, "Cannot set the notifier up")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "Cannot add the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "Cannot add the readiness check")
		os.Exit(1)
	}
	log.Info("Starting", "inboxURL", *inboxURL, "leaderElection", *leaderElect)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "The notifier stopped")
		os.Exit(1)
	}
}
