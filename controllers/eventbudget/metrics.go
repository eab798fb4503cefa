package eventbudget

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The Event writer's metrics (SPEC §5), on the manager's metrics endpoint.
var (
	eventsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hitl_events_total",
		Help: "Events the controller recorded, by result: written, aggregated (a Continued Event over its namespace's budget, folded into a summary Event, which counts as written), dropped (the queue was full) or failed.",
	}, []string{"result"})
	eventsQueued = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hitl_events_queued",
		Help: "Events recorded and not yet written: the event writer's backlog.",
	})
)

var registerOnce sync.Once

// registerMetrics adds these metrics to controller-runtime's registry once
// per process.
func registerMetrics() {
	registerOnce.Do(func() { metrics.Registry.MustRegister(eventsTotal, eventsQueued) })
}
