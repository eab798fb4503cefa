package userquestion

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
	votesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hitl_votes_total",
		Help: "Votes counted on questions governed by an approval rule, by choice (Approve, Reject).",
	}, []string{"choice"})
	quorumsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hitl_quorums_total",
		Help: "Governed questions settled because their approval rule was met.",
	})
	vetoesTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hitl_vetoes_total",
		Help: "Governed questions settled as rejected: by a veto, or by as many rejections as approvals required.",
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
		metrics.Registry.MustRegister(settleSeconds, continuedLateness, repliesTotal, transitionsTotal, statusConflicts,
			votesTotal, quorumsTotal, vetoesTotal, collector)
	})
	collector.source.Store(src)
}
