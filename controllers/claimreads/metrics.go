package claimreads

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The claims reads' metric, on the manager's metrics endpoint.
var (
	claimReadsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hitl_claim_reads_total",
		Help: "Closes of a window checked against the claims read from the API server, by whether the check sent a read (sent) or used one another close had sent (shared).",
	}, []string{"read"})
	claimListsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hitl_claim_lists_total",
		Help: "Reads of the claims sent, by how they were made current: fence (a write the manager's cache then saw) or list (a consistent list from the API server).",
	}, []string{"how"})
)

var registerOnce sync.Once

// registerMetrics adds these metrics to controller-runtime's registry once
// per process.
func registerMetrics() {
	registerOnce.Do(func() { metrics.Registry.MustRegister(claimReadsTotal, claimListsTotal) })
}
