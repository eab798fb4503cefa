package inbox

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// Person is who a request comes from, as an Authenticator established it.
type Person struct {
	// Username is the Kubernetes username the inbox acts as (local: the
	// kubeconfig's user, as the API server names it; behind a proxy: the
	// user header).
	Username string
	// Groups are the groups impersonated with Username (behind a proxy).
	Groups []string
	// Session distinguishes the browser sessions of one person (local
	// mode); the CSRF token is bound to it.
	Session string
}

// key identifies the person and session, for CSRF tokens and claims.
func (p Person) key() string {
	return p.Username + "\x00" + strings.Join(p.Groups, ",") + "\x00" + p.Session
}

// identity is who the API server sees the person's requests as (their
// username and groups, whatever the session): requests under one identity
// are allowed and refused alike.
func (p Person) identity() string {
	groups := slices.Clone(p.Groups)
	slices.Sort(groups)
	return p.Username + "\x00" + strings.Join(slices.Compact(groups), "\x00")
}

// An Authenticator tells who sends a request. When it cannot, it writes
// the response itself (401, or a redirect) and reports false.
type Authenticator interface {
	Authenticate(w http.ResponseWriter, r *http.Request) (Person, bool)
}

// sessionCookie is the cookie of a local inbox's session.
const sessionCookie = "hitl_inbox_session"

// TokenAuth admits the browser that opens the inbox's URL first, like
// Jupyter: the URL carries a random one-time token; the first request with
// it gets a session cookie (HttpOnly, SameSite=Strict) and is redirected to
// the same page without the token. Every other request needs the cookie.
// Requests must name a loopback host (Host: 127.0.0.1:PORT, localhost or
// [::1]), so that a web page cannot reach the inbox by rebinding its own
// DNS name to 127.0.0.1.
type TokenAuth struct {
	person Person

	mu       sync.Mutex
	token    string // "" once used
	sessions map[string]bool
}

// NewTokenAuth returns a TokenAuth whose sessions act as person.
func NewTokenAuth(person Person) (*TokenAuth, error) {
	token, err := randomString(32)
	if err != nil {
		return nil, err
	}
	return &TokenAuth{person: person, token: token, sessions: map[string]bool{}}, nil
}

// URL is the address to open in the browser: http://addr/?token=TOKEN.
func (a *TokenAuth) URL(addr string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return "http://" + addr + "/?token=" + a.token
}

func (a *TokenAuth) Authenticate(w http.ResponseWriter, r *http.Request) (Person, bool) {
	if !loopbackHost(r.Host) {
		http.Error(w, "the inbox answers only to a loopback host name (127.0.0.1, localhost or [::1])", http.StatusForbidden)
		return Person{}, false
	}
	if c, err := r.Cookie(sessionCookie); err == nil && a.session(c.Value) {
		p := a.person
		p.Session = sessionID(c.Value)
		return p, true
	}
	if token := r.URL.Query().Get("token"); token != "" && a.redeem(token) {
		session, err := randomString(32)
		if err != nil {
			http.Error(w, "creating a session: "+err.Error(), http.StatusInternalServerError)
			return Person{}, false
		}
		a.mu.Lock()
		a.sessions[sessionID(session)] = true
		a.mu.Unlock()
		http.SetCookie(w, &http.Cookie{
			Name: sessionCookie, Value: session, Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode,
		})
		q := r.URL.Query()
		q.Del("token")
		target := r.URL.Path
		if enc := q.Encode(); enc != "" {
			target += "?" + enc
		}
		http.Redirect(w, r, target, http.StatusSeeOther)
		return Person{}, false
	}
	unauthorized(w, "open the URL that kubectl hitl inbox --web printed (its token works once); restart it for a new one")
	return Person{}, false
}

// redeem uses up the one-time token if it is the one given.
func (a *TokenAuth) redeem(token string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token == "" || !equal(a.token, token) {
		return false
	}
	a.token = ""
	return true
}

func (a *TokenAuth) session(cookie string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[sessionID(cookie)]
}

// sessionID is what the server keeps of a session cookie: its hash, so
// that the session table cannot be read back into cookies.
func sessionID(cookie string) string {
	sum := sha256.Sum256([]byte(cookie))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// loopbackHost reports whether a Host header names the loopback interface.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ProxyAuth trusts the user and group headers that an authenticating proxy
// (oauth2-proxy, say) sets, but only on requests that prove they come from
// that proxy: with the shared secret in SecretHeader, or over a TLS
// connection whose client certificate, verified against the server's
// client CA, names one of ClientNames. Anything else is 401, and so is a
// request that carries the user, groups or secret header more than once.
type ProxyAuth struct {
	// UserHeader carries the username (default X-Forwarded-User).
	UserHeader string
	// GroupsHeader carries the groups, comma-separated in one header
	// (default X-Forwarded-Groups); a request that repeats it is refused,
	// as one that repeats UserHeader is.
	GroupsHeader string
	// SecretHeader carries Secret (default X-Hitl-Proxy-Secret).
	SecretHeader string
	// Secret, when set, must be in SecretHeader.
	Secret []byte
	// ClientNames, when set, are the names (common name or DNS SAN) one of
	// which the proxy's verified client certificate must carry.
	ClientNames []string
}

// Default header names of ProxyAuth.
const (
	DefaultUserHeader   = "X-Forwarded-User"
	DefaultGroupsHeader = "X-Forwarded-Groups"
	DefaultSecretHeader = "X-Hitl-Proxy-Secret"
)

// maxNameLength bounds a username or group name from the proxy.
const maxNameLength = 256

// Check completes the defaults and refuses a ProxyAuth that would trust
// anybody.
func (a *ProxyAuth) Check() error {
	if a.UserHeader == "" {
		a.UserHeader = DefaultUserHeader
	}
	if a.GroupsHeader == "" {
		a.GroupsHeader = DefaultGroupsHeader
	}
	if a.SecretHeader == "" {
		a.SecretHeader = DefaultSecretHeader
	}
	if len(a.Secret) == 0 && len(a.ClientNames) == 0 {
		return errors.New("the proxy must prove itself: give a shared secret or the names of its client certificate (mTLS)")
	}
	if len(a.Secret) > 0 && len(a.Secret) < 16 {
		return errors.New("the proxy's shared secret must be at least 16 bytes long")
	}
	return nil
}

func (a *ProxyAuth) Authenticate(w http.ResponseWriter, r *http.Request) (Person, bool) {
	if err := a.fromProxy(r); err != nil {
		unauthorized(w, err.Error())
		return Person{}, false
	}
	// One header line each: a second user or groups line is either a
	// proxy that appends instead of replacing (the client's own header
	// would then survive beside the proxy's) or a request smuggled past
	// it, and which line is the proxy's cannot be told.
	users := r.Header.Values(a.UserHeader)
	if len(users) != 1 {
		unauthorized(w, fmt.Sprintf("the proxy sent %d %s headers, not one", len(users), a.UserHeader))
		return Person{}, false
	}
	user := strings.TrimSpace(users[0])
	if err := checkName(user); err != nil {
		unauthorized(w, fmt.Sprintf("%s: %v", a.UserHeader, err))
		return Person{}, false
	}
	if strings.Contains(user, ",") {
		// How an intermediary joins a repeated header into one line.
		unauthorized(w, fmt.Sprintf("%s: %q holds a comma: it names more than one user (a repeated header joined into one)", a.UserHeader, user))
		return Person{}, false
	}
	if strings.HasPrefix(user, "system:") {
		// ServiceAccounts, nodes and the control plane's own users are
		// never people; a proxy that names one is misconfigured.
		unauthorized(w, fmt.Sprintf("%s: %q is a Kubernetes system user, not a person", a.UserHeader, user))
		return Person{}, false
	}
	lines := r.Header.Values(a.GroupsHeader)
	if len(lines) > 1 {
		unauthorized(w, fmt.Sprintf("the proxy sent %d %s headers, not one: groups must come comma-separated in a single header", len(lines), a.GroupsHeader))
		return Person{}, false
	}
	var groups []string
	for _, v := range lines {
		for _, g := range strings.Split(v, ",") {
			g = strings.TrimSpace(g)
			// The API server adds system:authenticated itself; other
			// system: groups (system:masters) are never taken from a header.
			if g == "" || strings.HasPrefix(g, "system:") || checkName(g) != nil {
				continue
			}
			groups = append(groups, g)
		}
	}
	slices.Sort(groups)
	return Person{Username: user, Groups: slices.Compact(groups)}, true
}

// fromProxy checks that a request comes from the proxy.
func (a *ProxyAuth) fromProxy(r *http.Request) error {
	if len(a.Secret) > 0 {
		vals := r.Header.Values(a.SecretHeader)
		if len(vals) == 0 || vals[0] == "" {
			return fmt.Errorf("no %s header: requests must come through the authenticating proxy", a.SecretHeader)
		}
		if len(vals) > 1 {
			return fmt.Errorf("%d %s headers, not one: requests must come through the authenticating proxy, which sends it once", len(vals), a.SecretHeader)
		}
		got := vals[0]
		if !equal(got, string(a.Secret)) {
			return fmt.Errorf("the %s header is wrong: requests must come through the authenticating proxy", a.SecretHeader)
		}
	}
	if len(a.ClientNames) > 0 {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			return errors.New("no verified client certificate: requests must come through the authenticating proxy")
		}
		leaf := r.TLS.VerifiedChains[0][0]
		names := append([]string{leaf.Subject.CommonName}, leaf.DNSNames...)
		if !slices.ContainsFunc(names, func(n string) bool { return slices.Contains(a.ClientNames, n) }) {
			return fmt.Errorf("the client certificate of %q is not the proxy's", leaf.Subject.CommonName)
		}
	}
	return nil
}

// checkName refuses empty, oversized and control-character names.
func checkName(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > maxNameLength {
		return fmt.Errorf("longer than %d bytes", maxNameLength)
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return errors.New("contains control characters")
	}
	return nil
}

func unauthorized(w http.ResponseWriter, why string) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "401 Unauthorized: "+why, http.StatusUnauthorized)
}

// equal compares two secrets in constant time (their hashes, so that the
// time does not tell the length either).
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

func randomString(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
