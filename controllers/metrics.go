package controllers

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The metrics of SPEC §5, on the manager's metrics endpoint.
var (
	settleSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hitl_question_settle_seconds",
		Help:    "Time from ask (creation) to settlement, by whether the answer came late.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400},
	}, []string{"late"})
	continuedLateness = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hitl_question_continued_lateness_seconds",
		Help:    "How long after its deadline a question's Continued transition was written.",
		Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10},
	})
	repliesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hitl_replies_total",
		Help: "Replies processed, by outcome and, for rejections, reason.",
	}, []string{"outcome", "reason"})
	transitionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hitl_question_transitions_total",
		Help: "Question state transitions written, by the state entered.",
	}, []string{"state"})
	statusConflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hitl_status_conflicts_total",
		Help: "Question status writes refused with a conflict: the controller decided on a copy older than the API server's, and looks again.",
	})
	eventsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hitl_events_total",
		Help: "Events the controller recorded, by result: written, aggregated (a Continued Event over its namespace's budget, folded into a summary Event, which counts as written), dropped (the queue was full) or failed.",
	}, []string{"result"})
	eventsQueued = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hitl_events_queued",
		Help: "Events recorded and not yet written: the event writer's backlog.",
	})
	claimReadsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hitl_claim_reads_total",
		Help: "Closes of a window checked against the claims read from the API server, by whether the check sent a read (sent) or used one another close had sent (shared).",
	}, []string{"read"})
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
	questionsDesc = prometheus.NewDesc("hitl_questions", "Questions by state, as the controller's cache holds them.", []string{"state"}, nil)
	claimsDesc    = prometheus.NewDesc("hitl_claims_live", "Claims the controller judges live.", nil, nil)
)

// stateCollector reports gauges at scrape time from counts the controller
// keeps as it goes (the questions by state, from the question informer's
// events) and from the claim tracker, so that neither a reconcile nor a
// scrape pays for a pass over the cache. It reads from the most recently
// set up controller.
type stateCollector struct {
	source atomic.Pointer[collectorSource]
}

type collectorSource struct {
	questions *questionCounts
	claims    *claimTracker
	clock     clock.PassiveClock
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- questionsDesc
	ch <- claimsDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.source.Load()
	if src == nil {
		return
	}
	// Until the cache has synced, the counts are of part of it: no gauge
	// rather than a wrong one.
	if counts, synced := src.questions.snapshot(); synced {
		for state, n := range counts {
			ch <- prometheus.MustNewConstMetric(questionsDesc, prometheus.GaugeValue, float64(n), string(state))
		}
	}
	ch <- prometheus.MustNewConstMetric(claimsDesc, prometheus.GaugeValue, float64(src.claims.live(src.clock.Now())))
}

var (
	collector    = &stateCollector{}
	registerOnce sync.Once
)

// registerMetrics adds hitl's metrics to controller-runtime's registry once
// per process, and points the state gauges at src.
func registerMetrics(src *collectorSource) {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(settleSeconds, continuedLateness, repliesTotal, transitionsTotal, eventsTotal, eventsQueued, claimReadsTotal, statusConflicts,
			closesInFlight, closeSlotsBound, closeSeconds, closeErrors, collector)
	})
	collector.source.Store(src)
}
