package notify

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The notifier's metrics, on the metrics endpoint of hitl-notify.
var (
	sentTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hitl_notify_sent_total",
		Help: "Notifications delivered, by channel type and event.",
	}, []string{"type", "event"})
	failedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hitl_notify_failed_total",
		Help: "Notifications given up on (a permanent failure, or every attempt failed), by channel type and event.",
	}, []string{"type", "event"})
	retriedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hitl_notify_retried_total",
		Help: "Attempts of a notification sent again after a transient failure, by channel type.",
	}, []string{"type"})
	deliverySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hitl_notify_delivery_seconds",
		Help:    "Time from an event falling due (a question asked, a reminder's time) to its notification delivered, by channel type.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"type"})
)

func init() {
	metrics.Registry.MustRegister(sentTotal, failedTotal, retriedTotal, deliverySeconds)
}
