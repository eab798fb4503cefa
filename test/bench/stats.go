// Statistics of the timings: percentiles and milliseconds.

package main

import (
	"sort"
	"time"
)

func percentiles(d []time.Duration) (p50, p99, worst time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return at(0.5), at(0.99), d[len(d)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
