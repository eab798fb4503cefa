package channel

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"k8s.io/utils/clock"
)

// Sender sends one notification.
type Sender interface {
	// Send delivers m once. An error that a later attempt may not have
	// (a timeout, a refused connection, HTTP 5xx, 408 or 429, an SMTP 4xx
	// reply) is Transient.
	Send(ctx context.Context, m *Message) error
}

// TransientError is a failure that a later attempt may not have.
type TransientError struct {
	Err error
	// RetryAfter is the wait the receiver asked for (HTTP Retry-After),
	// or zero.
	RetryAfter time.Duration
}

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// Transient reports whether err, or an error it wraps, is a TransientError.
func Transient(err error) bool {
	var t *TransientError
	return errors.As(err, &t)
}

// Retry says how often, and how far apart, a notification is attempted.
type Retry struct {
	// Attempts is how many times it is tried at most, the first included.
	Attempts int
	// Base is the wait after the first failure; each next wait doubles,
	// up to Max, with a fifth of it random so that receivers coming back
	// are not hit by every sender at once.
	Base, Max time.Duration
	// Clock is where the waits are measured; nil is the real clock.
	Clock clock.Clock
}

// DefaultRetry tries 6 times over about a minute.
var DefaultRetry = Retry{Attempts: 6, Base: time.Second, Max: 30 * time.Second}

// Do calls send until it succeeds, fails with an error that is not
// Transient, has been tried r.Attempts times, or ctx ends. Before each
// retry it calls retried, when not nil, with the failure. It returns the
// last error.
func (r Retry) Do(ctx context.Context, send func(context.Context) error, retried func(attempt int, err error)) error {
	c := r.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	wait := r.Base
	for attempt := 1; ; attempt++ {
		err := send(ctx)
		if err == nil || !Transient(err) || attempt >= r.Attempts {
			if err != nil && Transient(err) {
				return fmt.Errorf("giving up after %d attempts: %w", attempt, err)
			}
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		if retried != nil {
			retried(attempt, err)
		}
		d := wait - time.Duration(rand.Int64N(int64(wait)/5+1)) //nolint:gosec // jitter, not a secret
		var t *TransientError
		if errors.As(err, &t) && t.RetryAfter > d {
			d = min(t.RetryAfter, max(r.Max, wait))
		}
		select {
		case <-ctx.Done():
			return err
		case <-c.After(d):
		}
		wait = min(2*wait, r.Max)
	}
}
