package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
)

// reviewedServer serves the tools over HTTP, as httpServer does, with o
// (its Config is the admin's), and counts the TokenReviews the server
// sends to the API server.
func (e *env) reviewedServer(o hitlmcp.HTTPOptions) (endpoint string, h *hitlmcp.HTTPServer, reviews func() int64) {
	e.t.Helper()
	var n atomic.Int64
	o.Config = rest.CopyConfig(e.k.Config)
	o.Config.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/tokenreviews") {
				n.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	h, err := hitlmcp.NewHTTPHandler(o)
	e.g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(h)
	e.t.Cleanup(srv.Close)
	return srv.URL, h, n.Load
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// initialize posts an MCP initialize request with the Authorization header
// (none if empty) and returns the response's status.
func initialize(ctx context.Context, endpoint, header string) (int, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"v0"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if header != "" {
		req.Header.Set("Authorization", header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// status is initialize's status; the test fails on a transport error.
func (e *env) status(endpoint, header string) int {
	e.t.Helper()
	code, err := initialize(e.ctx, endpoint, header)
	e.g.Expect(err).NotTo(HaveOccurred())
	return code
}

// One client repeating a bad token, at once and one after another, costs
// one TokenReview; so does a good one.
func TestHTTPBadTokenReviewedOnce(t *testing.T) {
	e := newEnv(t)
	e.serviceAccount("http-bot")
	endpoint, _, reviews := e.reviewedServer(hitlmcp.HTTPOptions{Clock: clocktesting.NewFakeClock(time.Now())})

	codes := make(chan int, 50)
	var wg sync.WaitGroup
	for range 25 {
		wg.Go(func() {
			code, err := initialize(e.ctx, endpoint, "Bearer not-a-token")
			if err != nil {
				t.Error(err)
			}
			codes <- code
		})
	}
	wg.Wait()
	for range 25 {
		codes <- e.status(endpoint, "Bearer not-a-token")
	}
	close(codes)
	for code := range codes {
		e.g.Expect(code).To(Equal(http.StatusUnauthorized))
	}
	e.g.Expect(reviews()).To(BeEquivalentTo(1), "TokenReviews for 50 requests with one bad token")

	good := "Bearer " + e.mcpToken("http-bot")
	for range 5 {
		e.g.Expect(e.status(endpoint, good)).To(Equal(http.StatusOK))
	}
	e.g.Expect(reviews()).To(BeEquivalentTo(2), "TokenReviews after 5 requests with one good token")
}

// A refused token is reviewed again once the negative TTL has passed, an
// accepted one once the positive TTL has.
func TestHTTPReviewsExpire(t *testing.T) {
	e := newEnv(t)
	e.serviceAccount("http-bot")
	clock := clocktesting.NewFakeClock(time.Now())
	endpoint, _, reviews := e.reviewedServer(hitlmcp.HTTPOptions{Clock: clock})

	e.g.Expect(e.status(endpoint, "Bearer not-a-token")).To(Equal(http.StatusUnauthorized))
	e.g.Expect(reviews()).To(BeEquivalentTo(1))
	clock.Step(hitlmcp.DefaultNegativeReviewTTL - time.Second)
	e.g.Expect(e.status(endpoint, "Bearer not-a-token")).To(Equal(http.StatusUnauthorized))
	e.g.Expect(reviews()).To(BeEquivalentTo(1), "within the negative TTL")
	clock.Step(2 * time.Second)
	e.g.Expect(e.status(endpoint, "Bearer not-a-token")).To(Equal(http.StatusUnauthorized))
	e.g.Expect(reviews()).To(BeEquivalentTo(2), "past the negative TTL")

	good := "Bearer " + e.mcpToken("http-bot")
	e.g.Expect(e.status(endpoint, good)).To(Equal(http.StatusOK))
	e.g.Expect(reviews()).To(BeEquivalentTo(3))
	clock.Step(hitlmcp.DefaultReviewTTL - time.Second)
	e.g.Expect(e.status(endpoint, good)).To(Equal(http.StatusOK))
	e.g.Expect(reviews()).To(BeEquivalentTo(3), "within the positive TTL")
	clock.Step(2 * time.Second)
	e.g.Expect(e.status(endpoint, good)).To(Equal(http.StatusOK))
	e.g.Expect(reviews()).To(BeEquivalentTo(4), "past the positive TTL")
}

// A flood of distinct bad tokens keeps no more refusals than the cache's
// size, evicting the least recently used, and never pushes out an accepted
// token.
func TestHTTPReviewCacheBounded(t *testing.T) {
	e := newEnv(t)
	e.serviceAccount("http-bot")
	const size = 8
	endpoint, h, reviews := e.reviewedServer(hitlmcp.HTTPOptions{Clock: clocktesting.NewFakeClock(time.Now()), ReviewCacheSize: size})

	good := "Bearer " + e.mcpToken("http-bot")
	e.g.Expect(e.status(endpoint, good)).To(Equal(http.StatusOK))
	for i := range 3 * size {
		e.g.Expect(e.status(endpoint, fmt.Sprintf("Bearer bad-%d", i))).To(Equal(http.StatusUnauthorized))
	}
	e.g.Expect(reviews()).To(BeEquivalentTo(1 + 3*size))
	accepted, refused := h.CachedReviews()
	e.g.Expect(accepted).To(Equal(1))
	e.g.Expect(refused).To(Equal(size))

	// The newest refusal is remembered, the oldest was evicted, and the
	// accepted token survived the flood.
	e.g.Expect(e.status(endpoint, fmt.Sprintf("Bearer bad-%d", 3*size-1))).To(Equal(http.StatusUnauthorized))
	e.g.Expect(reviews()).To(BeEquivalentTo(1 + 3*size))
	e.g.Expect(e.status(endpoint, "Bearer bad-0")).To(Equal(http.StatusUnauthorized))
	e.g.Expect(reviews()).To(BeEquivalentTo(2 + 3*size))
	e.g.Expect(e.status(endpoint, good)).To(Equal(http.StatusOK))
	e.g.Expect(reviews()).To(BeEquivalentTo(2 + 3*size))
	accepted, refused = h.CachedReviews()
	e.g.Expect(accepted).To(Equal(1))
	e.g.Expect(refused).To(Equal(size))
}
