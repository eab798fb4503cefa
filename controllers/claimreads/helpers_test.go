package claimreads

import "time"

// seen is the fake clock's start in this package's tests.
var seen = time.Date(2030, time.March, 4, 12, 0, 0, 0, time.UTC)

// seenPlus is n seconds after seen.
func seenPlus(n float64) time.Time { return seen.Add(time.Duration(n * float64(time.Second))) }
