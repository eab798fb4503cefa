package closer

import "time"

// seen is the fake clock's start in this package's tests.
var seen = time.Date(2030, time.March, 4, 12, 0, 0, 0, time.UTC)
