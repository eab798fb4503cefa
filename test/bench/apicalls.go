// What the API server served: its request counts, read from its metrics,
// and their breakdown per ask and per transition.

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hitl-dev/hitl/test/testenv"
)

// callsPerAsk reports the API writes, access reviews and admission webhook
// calls the asks of the last run at concurrency 32 cost since before, per
// ask, once the controller and its Event writer are done with them.
func (b *bench) callsPerAsk(ctx context.Context, before map[string]float64, mode testenv.Admission) error {
	if b.manager != nil {
		if err := b.quiet(ctx); err != nil {
			return err
		}
		time.Sleep(3 * time.Second) // Events may wait up to 2 s behind status writes
	}
	after, err := b.apiCalls(ctx)
	if err != nil {
		return err
	}
	c := breakdown(before, after, b.s.Asks, modeName(mode)+", concurrency 32")
	b.r.setMode("API writes per ask, concurrency 32", mode, c.writes)
	b.r.setMode("SubjectAccessReviews per ask", mode, c.reviews)
	b.r.setMode("admission webhook calls per ask", mode, c.hooks)
	b.r.setMode("API server ms per ask in hitl's admission", mode, c.admissionMS)
	if mode == testenv.Policies {
		b.r.check("admission webhook calls per ask", "0", fmt.Sprintf("%.2f", c.hooks), c.hooks == 0)
	}
	return nil
}

// logCalls prints what the asks cost the API server since before, per ask,
// without recording figures: the requests of asks made one at a time, each
// request's duration not inflated by queueing.
func (b *bench) logCalls(ctx context.Context, before map[string]float64, mode testenv.Admission, conc int) error {
	if err := b.quiet(ctx); err != nil {
		return err
	}
	after, err := b.apiCalls(ctx)
	if err != nil {
		return err
	}
	breakdown(before, after, b.s.Asks, fmt.Sprintf("%s, concurrency %d", modeName(mode), conc))
	return nil
}

// callCounts are the requests of a number of asks, per ask.
type callCounts struct {
	writes, reviews, hooks, admissionMS float64
}

// breakdown prints, per ask of n, what the API server served between two
// apiCalls readings (each kind of request, with its mean duration in the
// API server, and the time in hitl's admission), and returns the totals.
func breakdown(before, after map[string]float64, asks int, label string) callCounts {
	keys := make([]string, 0, len(after))
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var c callCounts
	for _, k := range keys {
		delta := after[k] - before[k]
		per := delta / float64(asks)
		verb, _, _ := strings.Cut(k, " ")
		if strings.HasPrefix(verb, "le=") {
			continue // with its count
		}
		switch verb {
		case "seconds":
			continue // with its count
		case "admission", "policy":
			if verb == "admission" {
				c.admissionMS += per * 1000
			}
			if delta > 0 {
				fmt.Fprintf(os.Stderr, "bench: per ask, %s: %-52s %6.2f ms\n", label, k, per*1000)
			}
			continue
		}
		if per < 0.005 {
			continue
		}
		each := ""
		if verb != "webhook" && verb != "conflicts" {
			each = fmt.Sprintf(" (%.1f ms each in the API server", (after["seconds "+k]-before["seconds "+k])/delta*1000)
			if bound := p99(before, after, k); bound > 0 {
				each += fmt.Sprintf(", p99 <= %.0f ms", bound*1000)
			}
			each += ")"
		}
		fmt.Fprintf(os.Stderr, "bench: per ask, %s: %-52s %6.2f%s\n", label, k, per, each)
		switch {
		case verb == "webhook":
			c.hooks += per
		case verb == "conflicts":
		case strings.HasSuffix(k, "accessreviews") || strings.HasSuffix(k, "tokenreviews"):
			c.reviews += per // not stored: the authorizer's answer
		case verb == "POST" || verb == "PUT" || verb == "PATCH" || verb == "APPLY" || verb == "DELETE" || verb == "DELETECOLLECTION":
			c.writes += per
		}
	}
	return c
}

// admissionPlugins are the API server's admission plugins that run hitl's
// policies and call its webhooks.
var admissionPlugins = []string{"MutatingAdmissionPolicy", "ValidatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"}

// apiServerMetrics reads the API server's /metrics.
func (b *bench) apiServerMetrics(ctx context.Context) ([]byte, error) {
	resp, err := b.apiServerGet(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// apiCalls counts what the API server has served since it started: the
// requests other than watches by verb, resource and subresource ("POST
// userquestions", "PUT userquestions/status") and the seconds they took
// ("seconds POST userquestions") and how many of them conflicted
// ("conflicts PUT userquestions/status"), admission webhook calls by webhook name
// ("webhook mquestionreply.hitl.dev"), and the seconds spent in the
// admission plugins that run hitl's policies and webhooks ("admission
// MutatingAdmissionPolicy") and in each policy ("policy
// hitl-reply-identity").
func (b *bench) apiCalls(ctx context.Context) (map[string]float64, error) {
	body, err := b.apiServerMetrics(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	request := func(series string) (string, bool) {
		verb := labelOf(series, "verb")
		if verb == "WATCH" || verb == "CONNECT" || labelOf(series, "dry_run") != "" {
			return "", false
		}
		what := labelOf(series, "resource")
		if sub := labelOf(series, "subresource"); sub != "" {
			what += "/" + sub
		}
		return verb + " " + what, true
	}
	requests, err := seriesOf(body, "apiserver_request_total")
	if err != nil {
		return nil, err
	}
	for series, v := range requests {
		if k, ok := request(series); ok {
			out[k] += v
			if labelOf(series, "code") == "409" {
				out["conflicts "+k] += v
			}
		}
	}
	took, err := seriesOf(body, "apiserver_request_duration_seconds_sum")
	if err != nil {
		return nil, err
	}
	for series, v := range took {
		if k, ok := request(series); ok {
			out["seconds "+k] += v
		}
	}
	buckets, err := seriesOf(body, "apiserver_request_duration_seconds_bucket")
	if err != nil {
		return nil, err
	}
	for series, v := range buckets {
		if k, ok := request(series); ok && labelOf(series, "le") != "+Inf" {
			out["le="+labelOf(series, "le")+" "+k] += v
		}
	}
	hooks, err := seriesOf(body, "apiserver_admission_webhook_admission_duration_seconds_count")
	if err != nil {
		return nil, err
	}
	for series, v := range hooks {
		out["webhook "+labelOf(series, "name")] += v
	}
	for _, kind := range []string{"mutating", "validating"} {
		checks, err := seriesOf(body, "apiserver_"+kind+"_admission_policy_check_duration_seconds_sum")
		if err != nil {
			return nil, err
		}
		for series, v := range checks {
			out["policy "+labelOf(series, "policy")] += v
		}
	}
	plugins, err := seriesOf(body, "apiserver_admission_controller_admission_duration_seconds_sum")
	if err != nil {
		return nil, err
	}
	for series, v := range plugins {
		if name := labelOf(series, "name"); slices.Contains(admissionPlugins, name) {
			out["admission "+name] += v
		}
	}
	return out, nil
}

// p99 is the upper bound of the histogram bucket that holds the 99th
// percentile of the requests what (their count) observed between two
// readings of its cumulative buckets (le=<bound> <what>); 0 when none or
// when it lies above the last bound.
func p99(before, after map[string]float64, what string) (bound float64) {
	type bucket struct{ le, count float64 }
	var bs []bucket
	for k, v := range after {
		le, rest, ok := strings.Cut(strings.TrimPrefix(k, "le="), " ")
		if !ok || !strings.HasPrefix(k, "le=") || rest != what {
			continue
		}
		f, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{f, v - before[k]})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	n := after[what] - before[what]
	for _, b := range bs {
		if n > 0 && b.count >= 0.99*n {
			return b.le
		}
	}
	return 0
}

// explainTransitions reads the API server's request counts and the
// manager's counters now, and returns a func that prints, per transition,
// what happened since: every kind of API request with its mean time in the
// API server, the mean wait in the work queue and time in Reconcile, the
// conflicts, the reads of the claims sent and shared, and the Events
// written, folded and dropped.
func (b *bench) explainTransitions(ctx context.Context) (func(what string, transitions int), error) {
	calls, err := b.apiCalls(ctx)
	if err != nil {
		return nil, err
	}
	counters, err := b.managerSeries()
	if err != nil {
		return nil, err
	}
	return func(what string, n int) {
		after, err := b.apiCalls(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: reading the API server's metrics: %v\n", what, err)
			return
		}
		breakdown(calls, after, n, what+", per transition")
		now, err := b.managerSeries()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: reading the manager's metrics: %v\n", what, err)
			return
		}
		delta := func(series string) float64 { return now[series] - counters[series] }
		mean := func(metric string) float64 {
			var sum, count float64
			for series := range now {
				if strings.HasPrefix(series, metric+"_sum") {
					sum += delta(series)
				} else if strings.HasPrefix(series, metric+"_count") {
					count += delta(series)
				}
			}
			if count == 0 {
				return 0
			}
			return sum / count * 1000
		}
		fmt.Fprintf(os.Stderr, "bench: %s, manager: mean wait in the work queue %.1f ms, mean Reconcile %.1f ms, mean close (off the workers) %.1f ms\n", what,
			mean("workqueue_queue_duration_seconds"), mean("workqueue_work_duration_seconds"), mean("hitl_close_duration_seconds"))
		keys := make([]string, 0, len(now))
		for series := range now {
			if strings.HasPrefix(series, "hitl_") {
				keys = append(keys, series)
			}
		}
		sort.Strings(keys)
		for _, series := range keys {
			if d := delta(series); d != 0 {
				fmt.Fprintf(os.Stderr, "bench: %s, manager: %-60s %8.0f (%.3f per transition)\n", what, series, d, d/float64(n))
			}
		}
	}, nil
}
