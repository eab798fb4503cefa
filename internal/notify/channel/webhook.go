package channel

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// The headers of a webhook request.
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// '<unix seconds>.<body>'>".
	SignatureHeader = "X-Hitl-Signature"
	// EventHeader carries Message.Event.
	EventHeader = "X-Hitl-Event"
	// DeliveryHeader carries Message.ID, the deduplication key.
	DeliveryHeader = "X-Hitl-Delivery"
)

// DefaultTolerance is how far from the receiver's clock Verify accepts a
// signature's time: older requests are replays.
const DefaultTolerance = 5 * time.Minute

// NewHTTPClient is the HTTP client of the senders: each attempt ends after
// timeout, and redirects are not followed (a redirect is an error), so a
// notification goes only where its channel says. The channels of many
// namespaces post to one host (hooks.slack.com, a company's receiver), each
// from its own queue: it keeps an idle connection for each, not net/http's
// default of two per host, which would make the others connect anew for
// every notification.
func NewHTTPClient(timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 100
	return &http.Client{
		Transport:     t,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Webhook POSTs each Message as JSON to URL, signed with Key.
type Webhook struct {
	URL string
	// Key is the HMAC key, from the channel's Secret.
	Key []byte
	// Client sends the requests; nil is NewHTTPClient(10s).
	Client *http.Client
	// Clock stamps the signature; nil is the real clock.
	Clock clock.PassiveClock
}

// Send posts m once, signed.
func (w *Webhook) Send(ctx context.Context, m *Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c := w.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	return post(ctx, w.Client, w.URL, body, map[string]string{
		SignatureHeader: Sign(w.Key, c.Now(), body),
		EventHeader:     string(m.Event),
		DeliveryHeader:  m.ID,
	})
}

// Sign is the signature header of body sent at t: "t=<unix
// seconds>,v1=<hex HMAC-SHA256 with key of '<unix seconds>.<body>'>".
// Signing the time with the body lets a receiver refuse a replayed request.
func Sign(key []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(key, ts, body))
}

func mac(key []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a request's signature header against its body as a
// receiver does: one of its v1 signatures is body's with key, and its time
// is within tolerance of now. Receivers in other languages do the same
// (docs/notifications.md).
func Verify(key []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if s, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, s)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("the signature has no time")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("the signature's time is %s away from now", d.Round(time.Second))
	}
	want := mac(key, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return errors.New("no signature matches the body")
}

// post sends body as JSON to target with headers, and classes the outcome: a
// 2xx is success; a failure to connect, a timeout, 408, 429 and 5xx are
// Transient; anything else is permanent.
func post(ctx context.Context, client *http.Client, target string, body []byte, headers map[string]string) error {
	if client == nil {
		client = NewHTTPClient(10 * time.Second)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hitl-notify")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The URL may carry a secret (a Slack or Teams webhook): the
		// error names the host only.
		return &TransientError{Err: fmt.Errorf("posting to %s: %w", req.URL.Host, unwrapURLError(err))}
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	err = fmt.Errorf("%s answered %s: %s", req.URL.Host, resp.Status, strings.TrimSpace(string(snippet)))
	switch {
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		return &TransientError{Err: err, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	}
	return err
}

// unwrapURLError drops the *url.Error around a client error, whose text
// repeats the whole URL.
func unwrapURLError(err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// retryAfter reads a Retry-After header of seconds; zero otherwise.
func retryAfter(v string) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s > 0 {
		return time.Duration(min(s, 3600)) * time.Second
	}
	return 0
}
