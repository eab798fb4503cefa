// Metrics: reading the manager's Prometheus metrics and parsing a text
// exposition's series.

package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
)

// errNoMetric is scrape's error for a metric with no series (yet).
var errNoMetric = errors.New("metric not found")

// scrape reads a metric of the manager: the sum of its series whose labels
// contain every one of labels.
func (b *bench) scrape(metric string, labels ...string) (float64, error) {
	body, err := b.managerMetrics()
	if err != nil {
		return 0, err
	}
	series, err := seriesOf(body, metric, labels...)
	if err != nil {
		return 0, err
	}
	if len(series) == 0 {
		return 0, fmt.Errorf("%w: %s", errNoMetric, metric)
	}
	sum := 0.0
	for _, v := range series {
		sum += v
	}
	return sum, nil
}

// managerMetrics reads the manager's metrics endpoint.
func (b *bench) managerMetrics() ([]byte, error) {
	resp, err := http.Get("http://" + b.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// managerCounters are the manager's figures that say where a burst of
// transitions goes: its work queue (time waiting in it, time in
// Reconcile), its closes (off the workers), its writes' conflicts, its reads of the claims, its Events.
var managerCounters = []string{
	"workqueue_queue_duration_seconds_sum", "workqueue_queue_duration_seconds_count",
	"workqueue_work_duration_seconds_sum", "workqueue_work_duration_seconds_count",
	"hitl_status_conflicts_total", "hitl_claim_reads_total", "hitl_events_total",
	"hitl_close_duration_seconds_sum", "hitl_close_duration_seconds_count",
	"hitl_claim_fence_seconds_sum", "hitl_claim_fence_seconds_count",
}

// managerSeries reads the manager's managerCounters, by series: none
// while it is stopped (it starts them from zero).
func (b *bench) managerSeries() (map[string]float64, error) {
	if b.manager == nil {
		return map[string]float64{}, nil
	}
	body, err := b.managerMetrics()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, metric := range managerCounters {
		var labels []string
		if strings.HasPrefix(metric, "workqueue_") {
			labels = []string{`name="userquestion"`}
		}
		series, err := seriesOf(body, metric, labels...)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, series)
	}
	return out, nil
}

// seriesOf parses the series of a metric in a Prometheus text exposition
// whose labels contain every one of labels, by their full series names.
func seriesOf(body []byte, metric string, labels ...string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || (series != metric && !strings.HasPrefix(series, metric+"{")) {
			continue
		}
		if !containsAll(series, labels) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", series, err)
		}
		out[series] += v
	}
	return out, nil
}

// labelOf is the value of one label of a series, or "".
func labelOf(series, label string) string {
	_, rest, ok := strings.Cut(series, `{`+label+`="`)
	if !ok {
		_, rest, ok = strings.Cut(series, `,`+label+`="`)
	}
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
