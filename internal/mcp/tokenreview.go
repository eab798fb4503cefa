package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/utils/clock"

	"github.com/hitl-dev/hitl/internal/access"
)

// Defaults of the token review cache (HTTPOptions).
const (
	// DefaultReviewTTL is how long an accepted token is trusted without
	// another TokenReview, never past its expiry: a deleted ServiceAccount
	// keeps calling for at most this long.
	DefaultReviewTTL = 30 * time.Second
	// DefaultNegativeReviewTTL is how long a refused token stays refused
	// without another TokenReview: a client repeating a bad token costs one
	// review per this long.
	DefaultNegativeReviewTTL = 10 * time.Second
	// DefaultReviewCacheSize bounds the accepted tokens remembered, and
	// separately the refused ones.
	DefaultReviewCacheSize = 10000
)

// reviewTimeout bounds one TokenReview, which runs apart from the requests
// waiting for it.
const reviewTimeout = 10 * time.Second

// tokenReviewer verifies bearer tokens with TokenReviews and remembers each
// outcome, keyed by the token's SHA-256, never the token: an accepted token
// for ttl (never past its expiry), a refused one for negativeTTL. Accepted
// and refused tokens have a bounded LRU cache each, so a flood of distinct
// bad tokens evicts only other bad tokens; requests with a token under
// review share its review. A review that fails (the API server unreachable,
// the server not allowed to review) is not remembered.
type tokenReviewer struct {
	reviews          authenticationv1client.TokenReviewInterface
	audience         string
	clock            clock.PassiveClock
	ttl, negativeTTL time.Duration

	// mu makes a lookup of the caches and of the reviews in flight one
	// step, so that a review ending between the two is not started again.
	mu       sync.Mutex
	accepted *cache.LRUExpireCache // of *auth.TokenInfo
	refused  *cache.LRUExpireCache // of error
	flights  map[[sha256.Size]byte]*flight
}

// flight is a TokenReview in progress; done closes when info or err is set.
type flight struct {
	done chan struct{}
	info *auth.TokenInfo
	err  error
}

func newTokenReviewer(reviews authenticationv1client.TokenReviewInterface, o HTTPOptions) *tokenReviewer {
	return &tokenReviewer{
		reviews: reviews, audience: o.Audience, clock: o.Clock, ttl: o.ReviewTTL, negativeTTL: o.NegativeReviewTTL,
		accepted: cache.NewLRUExpireCacheWithClock(o.ReviewCacheSize, o.Clock),
		refused:  cache.NewLRUExpireCacheWithClock(o.ReviewCacheSize, o.Clock),
		flights:  map[[sha256.Size]byte]*flight{},
	}
}

// verify is an auth.TokenVerifier: a token that is not authenticated, not
// for the audience, or not a ServiceAccount's is an invalid token (401).
func (r *tokenReviewer) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	key := sha256.Sum256([]byte(token))
	r.mu.Lock()
	if info, ok := r.accepted.Get(key); ok {
		r.mu.Unlock()
		return info.(*auth.TokenInfo), nil
	}
	if err, ok := r.refused.Get(key); ok {
		r.mu.Unlock()
		return nil, err.(error)
	}
	f, ok := r.flights[key]
	if !ok {
		f = &flight{done: make(chan struct{})}
		r.flights[key] = f
		// Apart from this request's cancellation: others may wait for it.
		go r.fly(context.WithoutCancel(ctx), key, token, f)
	}
	r.mu.Unlock()
	select {
	case <-f.done:
		return f.info, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fly reviews token, remembers the outcome, and lands f.
func (r *tokenReviewer) fly(ctx context.Context, key [sha256.Size]byte, token string, f *flight) {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	info, err := r.review(ctx, token)
	r.mu.Lock()
	switch {
	case errors.Is(err, auth.ErrInvalidToken):
		r.refused.Add(key, err, r.negativeTTL)
	case err == nil:
		ttl := r.ttl
		if !info.Expiration.IsZero() {
			ttl = min(ttl, info.Expiration.Sub(r.clock.Now()))
		}
		if ttl > 0 {
			r.accepted.Add(key, info, ttl)
		}
	}
	delete(r.flights, key)
	r.mu.Unlock()
	f.info, f.err = info, err
	close(f.done)
}

// review asks the API server who token is; an answer that is not an
// authenticated ServiceAccount for the audience is auth.ErrInvalidToken.
func (r *tokenReviewer) review(ctx context.Context, token string) (*auth.TokenInfo, error) {
	review, err := r.reviews.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{r.audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("reviewing the token: %w", err)
	}
	st := review.Status
	switch {
	case !st.Authenticated:
		return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, orDefault(st.Error, "not authenticated"))
	case !slices.Contains(st.Audiences, r.audience):
		return nil, fmt.Errorf("%w: the token is not for audience %s", auth.ErrInvalidToken, r.audience)
	}
	if _, _, ok := access.ServiceAccountOf(st.User.Username); !ok {
		return nil, fmt.Errorf("%w: %s is not a ServiceAccount", auth.ErrInvalidToken, st.User.Username)
	}
	return &auth.TokenInfo{UserID: st.User.Username, Expiration: expiry(token), Extra: map[string]any{"user": st.User}}, nil
}

// expiry reads the exp claim of a JWT the API server has already verified,
// or the zero time.
func expiry(token string) time.Time {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == 0 {
		return time.Time{}
	}
	return time.Unix(claims.Exp, 0)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
