package testenv

import (
	"bytes"
	"sync"
)

// Output is an io.Writer that collects a process's (or a server's) output
// while the test reads it: its writes and reads may come from different
// goroutines.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
