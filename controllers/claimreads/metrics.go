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
	fenceSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hitl_claim_fence_seconds",
		Help:    "A read of the claims through the fence, by phase: write (the fence's write returned) and seen (from then until the manager's cache delivered it).",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2},
	}, []string{"phase"})
)

var registerOnce sync.Once

// registerMetrics adds these metrics to controller-runtime's registry once
// per process.
func registerMetrics() {
	registerOnce.Do(func() { metrics.Registry.MustRegister(claimReadsTotal, claimListsTotal, fenceSeconds) })
}
