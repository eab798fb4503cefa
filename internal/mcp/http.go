package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/access"
)

// DefaultAudience is the audience a token must be minted for to call the
// HTTP server.
const DefaultAudience = "hitl-mcp"

// DefaultSessionTimeout is how long an MCP session may stay idle before the
// server closes it.
const DefaultSessionTimeout = 30 * time.Minute

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
	// ReviewTTL bounds how long an accepted token is trusted without
	// another TokenReview (never past its expiry); zero means
	// DefaultReviewTTL.
	ReviewTTL time.Duration
	// NegativeReviewTTL is how long a refused token is refused without
	// another TokenReview; zero means DefaultNegativeReviewTTL.
	NegativeReviewTTL time.Duration
	// ReviewCacheSize bounds the accepted tokens remembered, and separately
	// the refused ones (least recently used out first); zero means
	// DefaultReviewCacheSize.
	ReviewCacheSize int
	// SessionTimeout closes a session that has had no request in progress
	// for this long (a call waiting for an answer keeps its session); zero
	// means DefaultSessionTimeout, negative never.
	SessionTimeout time.Duration
	// Clock times the token review cache; nil means the real clock.
	Clock clock.PassiveClock
}

// HTTPServer serves the tools over the streamable HTTP transport, each
// request as the ServiceAccount whose token it carries.
type HTTPServer struct {
	*Server
	handler  http.Handler
	mcp      *mcp.Server
	reviewer *tokenReviewer
	base     *rest.Config
	scheme   *runtime.Scheme

	mu      sync.Mutex
	clients map[string]client.WithWatch
}

// maxClients bounds the impersonating clients kept, one per ServiceAccount
// that called; past it the cache starts over.
const maxClients = 4096

// NewHTTPHandler returns the streamable HTTP handler of the tools. Every
// request must carry "Authorization: Bearer <token>", a ServiceAccount
// token for the audience, verified with a TokenReview (whose outcome,
// accepted or refused, is remembered a short while); anything else is
// refused with 401. A call then acts as that ServiceAccount (client-go
// impersonation of its username; the API server derives the
// ServiceAccount's groups), and asks as the agent named after it, in its
// namespace. A session idle for SessionTimeout is closed. A session is not
// the agent's process (a client may reconnect, or another replica serve
// it), so the server keeps questions on disconnect (KeepOnDisconnect): a
// stopping server returns the waiting calls still waiting, for their
// clients to go on with wait_for_answer.
func NewHTTPHandler(o HTTPOptions) (*HTTPServer, error) {
	if o.Config == nil {
		return nil, errors.New("no rest config")
	}
	o.KeepOnDisconnect = true
	if o.Audience == "" {
		o.Audience = DefaultAudience
	}
	if o.ReviewTTL <= 0 {
		o.ReviewTTL = DefaultReviewTTL
	}
	if o.NegativeReviewTTL <= 0 {
		o.NegativeReviewTTL = DefaultNegativeReviewTTL
	}
	if o.ReviewCacheSize <= 0 {
		o.ReviewCacheSize = DefaultReviewCacheSize
	}
	switch {
	case o.SessionTimeout == 0:
		o.SessionTimeout = DefaultSessionTimeout
	case o.SessionTimeout < 0:
		o.SessionTimeout = 0 // the SDK's never
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	h := &HTTPServer{
		reviewer: newTokenReviewer(cs.AuthenticationV1().TokenReviews(), o),
		base:     rest.CopyConfig(o.Config), scheme: hitlv1.NewScheme(), clients: map[string]client.WithWatch{},
	}
	h.Server = New(h.caller, o.Options)
	h.mcp = h.MCPServer()
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.mcp },
		&mcp.StreamableHTTPOptions{SessionTimeout: o.SessionTimeout})
	h.handler = auth.RequireBearerToken(h.reviewer.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	return h, nil
}

func (h *HTTPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.handler.ServeHTTP(w, r) }

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
	c, err := h.clientFor(u.Username, u.UID)
	if err != nil {
		return nil, err
	}
	return &Caller{Key: u.Username, Client: c, Namespace: ns, Agent: name}, nil
}

// clientFor is a client that acts as the ServiceAccount username, with
// the UID its token review returned, so that what it asks records both
// (spec.askedBy). Groups are not impersonated: the API server gives an
// impersonated ServiceAccount its groups (system:serviceaccounts,
// system:serviceaccounts:<namespace>, system:authenticated), the groups
// its token review returned, so the server needs to impersonate only
// serviceaccounts and uids.
func (h *HTTPServer) clientFor(username, uid string) (client.WithWatch, error) {
	key := username + "\x00" + uid
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.clients[key]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(h.base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: username, UID: uid}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: h.scheme})
	if err != nil {
		return nil, fmt.Errorf("a client for %s: %w", username, err)
	}
	if len(h.clients) >= maxClients {
		h.clients = map[string]client.WithWatch{}
	}
	h.clients[key] = c
	return c, nil
}
