package closer

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The closes' metrics, on the manager's metrics endpoint.
var (
	closesInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hitl_closes_in_flight",
		Help: "Windows being closed off the workers: their claims read or status write under way.",
	})
	closeSlotsBound = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hitl_close_slots",
		Help: "How many windows may be closed at once: the workers' count, grown (up to 256) while closes waited for a slot, because the API server was slow.",
	})
	closeSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hitl_close_duration_seconds",
		Help:    "How long closing a window took once a worker decided it: a free slot, the claims read, the status write.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30},
	})
	closeErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hitl_close_errors_total",
		Help: "Closes of a window that failed (a claims read or status write refused or cut off) and were tried again after a backoff.",
	})
)

var registerOnce sync.Once

// registerMetrics adds these metrics to controller-runtime's registry once
// per process.
func registerMetrics() {
	registerOnce.Do(func() { metrics.Registry.MustRegister(closesInFlight, closeSlotsBound, closeSeconds, closeErrors) })
}
