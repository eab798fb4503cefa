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
	"github.com/modelcontextprotocol/go-sdk/mcp"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/access"
)

// DefaultAudience is the audience a token must be minted for to call the
// HTTP server.
const DefaultAudience = "hitl-mcp"

// HTTPOptions configure NewHTTPHandler.
type HTTPOptions struct {
	Options
	// Config is the server's own identity: it reviews the callers' tokens
	// (tokenreviews create) and impersonates them (impersonate on
	// serviceaccounts).
	Config *rest.Config
	// Audience is the audience a caller's token must carry; empty means
	// DefaultAudience.
	Audience string
	// ReviewTTL bounds how long a reviewed token is trusted without another
	// TokenReview (never past its expiry); zero means 30s.
	ReviewTTL time.Duration
}

// HTTPServer serves the tools over the streamable HTTP transport, each
// request as the ServiceAccount whose token it carries.
type HTTPServer struct {
	*Server
	handler  http.Handler
	reviews  kubernetes.Interface
	base     *rest.Config
	scheme   *runtime.Scheme
	audience string
	ttl      time.Duration

	mu      sync.Mutex
	tokens  map[[32]byte]reviewed
	clients map[string]client.WithWatch
}

type reviewed struct {
	info  *auth.TokenInfo
	until time.Time
}

// maxCached bounds the reviewed tokens and the clients kept; past it the
// cache starts over.
const maxCached = 4096

// NewHTTPHandler returns the streamable HTTP handler of the tools. Every
// request must carry "Authorization: Bearer <token>", a ServiceAccount
// token for the audience, verified with a TokenReview; anything else is
// refused with 401. A call then acts as that ServiceAccount (client-go
// impersonation of its username; the API server derives the
// ServiceAccount's groups), and asks as the agent named after it, in its
// namespace.
func NewHTTPHandler(o HTTPOptions) (*HTTPServer, error) {
	if o.Config == nil {
		return nil, errors.New("no rest config")
	}
	if o.Audience == "" {
		o.Audience = DefaultAudience
	}
	if o.ReviewTTL <= 0 {
		o.ReviewTTL = 30 * time.Second
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	scheme := hitlv1.NewScheme()
	h := &HTTPServer{
		reviews: cs, base: rest.CopyConfig(o.Config), scheme: scheme, audience: o.Audience, ttl: o.ReviewTTL,
		tokens: map[[32]byte]reviewed{}, clients: map[string]client.WithWatch{},
	}
	h.Server = New(h.caller, o.Options)
	srv := h.MCPServer()
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	h.handler = auth.RequireBearerToken(h.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	return h, nil
}

func (h *HTTPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.handler.ServeHTTP(w, r) }

// verify reviews a bearer token for the audience; a token that is not
// authenticated, not for the audience, or not a ServiceAccount's is an
// invalid token (401).
func (h *HTTPServer) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	h.mu.Lock()
	if r, ok := h.tokens[key]; ok && now.Before(r.until) {
		h.mu.Unlock()
		return r.info, nil
	}
	h.mu.Unlock()

	review, err := h.reviews.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{h.audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("reviewing the token: %w", err)
	}
	st := review.Status
	switch {
	case !st.Authenticated:
		return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, orDefault(st.Error, "not authenticated"))
	case !slices.Contains(st.Audiences, h.audience):
		return nil, fmt.Errorf("%w: the token is not for audience %s", auth.ErrInvalidToken, h.audience)
	}
	if _, _, ok := access.ServiceAccountOf(st.User.Username); !ok {
		return nil, fmt.Errorf("%w: %s is not a ServiceAccount", auth.ErrInvalidToken, st.User.Username)
	}
	info := &auth.TokenInfo{UserID: st.User.Username, Extra: map[string]any{"user": st.User}}
	until := now.Add(h.ttl)
	if exp := expiry(token); !exp.IsZero() {
		info.Expiration = exp
		if exp.Before(until) {
			until = exp
		}
	}
	h.mu.Lock()
	if len(h.tokens) >= maxCached {
		h.tokens = map[[32]byte]reviewed{}
	}
	h.tokens[key] = reviewed{info: info, until: until}
	h.mu.Unlock()
	return info, nil
}

// caller is the reviewed identity of the request a call came in.
func (h *HTTPServer) caller(_ context.Context, req *mcp.CallToolRequest) (*Caller, error) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return nil, errors.New("the request carries no reviewed token")
	}
	u, ok := req.Extra.TokenInfo.Extra["user"].(authenticationv1.UserInfo)
	if !ok {
		return nil, errors.New("the request carries no reviewed identity")
	}
	ns, name, _ := access.ServiceAccountOf(u.Username)
	c, err := h.clientFor(u.Username)
	if err != nil {
		return nil, err
	}
	return &Caller{Key: u.Username, Client: c, Namespace: ns, Agent: name}, nil
}

// clientFor is a client that acts as the ServiceAccount username. Only the
// username is impersonated: the API server gives an impersonated
// ServiceAccount its groups (system:serviceaccounts,
// system:serviceaccounts:<namespace>, system:authenticated), the groups
// its token review returned, so the server needs to impersonate nothing
// but serviceaccounts.
func (h *HTTPServer) clientFor(username string) (client.WithWatch, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.clients[username]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(h.base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: username}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: h.scheme})
	if err != nil {
		return nil, fmt.Errorf("a client for %s: %w", username, err)
	}
	if len(h.clients) >= maxCached {
		h.clients = map[string]client.WithWatch{}
	}
	h.clients[username] = c
	return c, nil
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
