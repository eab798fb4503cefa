package inbox_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hitl-dev/hitl/internal/inbox"
)

// noClients fails a test that reaches the API server: the requests of
// these tests must be turned away before.
func noClients(t *testing.T) inbox.ClientFunc {
	return func(inbox.Person) (client.WithWatch, error) {
		t.Error("the request reached the API server")
		return nil, io.EOF
	}
}

// local starts an inbox with the one-time token of kubectl hitl inbox --web.
func local(t *testing.T) (*httptest.Server, *inbox.TokenAuth) {
	t.Helper()
	auth, err := inbox.NewTokenAuth(inbox.Person{Username: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := inbox.New(inbox.Options{Auth: auth, Clients: noClients(t), Namespaces: []string{"agents"}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs, auth
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, url string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

func post(t *testing.T, url string, header http.Header, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

var csrfMeta = regexp.MustCompile(`<meta name="hitl-csrf" content="([^"]+)">`)

// csrfOf reads the CSRF token of a page.
func csrfOf(g *WithT, page string) string {
	m := csrfMeta.FindStringSubmatch(page)
	g.Expect(m).To(HaveLen(2), "the page carries its CSRF token")
	return m[1]
}

// login opens the URL with the token and returns the session cookie.
func login(t *testing.T, g *WithT, hs *httptest.Server, auth *inbox.TokenAuth) *http.Cookie {
	res, _ := get(t, auth.URL(strings.TrimPrefix(hs.URL, "http://")), nil)
	g.Expect(res.StatusCode).To(Equal(http.StatusSeeOther))
	g.Expect(res.Header.Get("Location")).To(Equal("/"), "the token leaves the address bar")
	cookies := res.Cookies()
	g.Expect(cookies).To(HaveLen(1))
	return cookies[0]
}

func TestTheOneTimeTokenOpensOneSession(t *testing.T) {
	g := NewWithT(t)
	hs, auth := local(t)
	for _, path := range []string{"/", "/events", "/static/inbox.js", "/?token=wrong"} {
		res, body := get(t, hs.URL+path, nil)
		g.Expect(res.StatusCode).To(Equal(http.StatusUnauthorized), path)
		g.Expect(body).To(HavePrefix("401 Unauthorized"), path)
	}
	res, _ := post(t, hs.URL+"/api/reply", nil, `{}`)
	g.Expect(res.StatusCode).To(Equal(http.StatusUnauthorized))

	cookie := login(t, g, hs, auth)
	g.Expect(cookie.Name).To(Equal("hitl_inbox_session"))
	g.Expect(cookie.HttpOnly).To(BeTrue())
	g.Expect(cookie.SameSite).To(Equal(http.SameSiteStrictMode))

	res, _ = get(t, auth.URL(strings.TrimPrefix(hs.URL, "http://")), nil)
	g.Expect(res.StatusCode).To(Equal(http.StatusUnauthorized), "the token works once")

	withCookie := http.Header{"Cookie": {cookie.String()}}
	res, page := get(t, hs.URL+"/", withCookie)
	g.Expect(res.StatusCode).To(Equal(http.StatusOK))
	g.Expect(page).To(ContainSubstring(`Answering as <strong data-user>alice</strong>`))
	g.Expect(res.Header.Get("Content-Security-Policy")).To(ContainSubstring("script-src 'self'"))
	g.Expect(res.Header.Get("Content-Security-Policy")).To(ContainSubstring("img-src 'self' data:;"), "no image from elsewhere")
	g.Expect(res.Header.Get("Content-Security-Policy")).NotTo(ContainSubstring("https:"))
	g.Expect(res.Header.Get("Referrer-Policy")).To(Equal("no-referrer"))
	g.Expect(res.Header.Get("X-Frame-Options")).To(Equal("DENY"))

	forged := http.Header{"Cookie": {"hitl_inbox_session=" + strings.Repeat("A", 43)}}
	res, _ = get(t, hs.URL+"/", forged)
	g.Expect(res.StatusCode).To(Equal(http.StatusUnauthorized), "a forged session cookie")

	// A page of another site that rebinds its DNS name to 127.0.0.1.
	rebound := http.Header{"Cookie": {cookie.String()}}
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/", nil)
	req.Header = rebound
	req.Host = "attacker.example:80"
	res2, err := noRedirect.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	res2.Body.Close()
	g.Expect(res2.StatusCode).To(Equal(http.StatusForbidden))
}

func TestPostsNeedThePagesCSRFToken(t *testing.T) {
	g := NewWithT(t)
	hs, auth := local(t)
	cookie := login(t, g, hs, auth)
	_, page := get(t, hs.URL+"/", http.Header{"Cookie": {cookie.String()}})
	token := csrfOf(g, page)
	wrong := "x" + token[1:]
	if token[0] == 'x' { // one token in 64 starts with x: "x…" would be the page's own
		wrong = "y" + token[1:]
	}

	for _, c := range []struct {
		name   string
		header http.Header
		status int
		says   string
	}{
		{"no token", http.Header{}, http.StatusForbidden, "CSRF: the request lacks the page's token"},
		{"a wrong token", http.Header{"X-Hitl-Csrf": {wrong}}, http.StatusForbidden, "CSRF"},
		{"a form post", http.Header{"X-Hitl-Csrf": {token}, "Content-Type": {"application/x-www-form-urlencoded"}}, http.StatusUnsupportedMediaType, "application/json"},
		{"a cross-site request", http.Header{"X-Hitl-Csrf": {token}, "Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden, "CSRF: a cross-site request"},
		{"the page's token", http.Header{"X-Hitl-Csrf": {token}}, http.StatusBadRequest, "the request must name a namespace and a name (namespace, name)"},
	} {
		c.header.Set("Cookie", cookie.String())
		res, body := post(t, hs.URL+"/api/reply", c.header, `{"answers":[]}`)
		g.Expect(res.StatusCode).To(Equal(c.status), c.name)
		var p struct{ Message string }
		g.Expect(json.Unmarshal([]byte(body), &p)).To(Succeed(), c.name)
		g.Expect(p.Message).To(ContainSubstring(c.says), c.name)
	}
	h := http.Header{"Cookie": {cookie.String()}, "X-Hitl-Csrf": {token}}
	res, body := post(t, hs.URL+"/api/reply", h, `{"namespace":"kube-system","name":"q","answers":[]}`)
	g.Expect(res.StatusCode).To(Equal(http.StatusForbidden))
	g.Expect(body).To(ContainSubstring(`this inbox does not serve namespace \"kube-system\" (namespace)`))
	res, body = post(t, hs.URL+"/api/reply", h, `{"namespace":"agents","name":"q","answers":[],"answeredBy":"root"}`)
	g.Expect(res.StatusCode).To(Equal(http.StatusBadRequest), "unknown fields are refused")
	g.Expect(body).To(ContainSubstring("answeredBy"))
}

// whoami serves the person an Authenticator establishes, as JSON.
func whoami(a inbox.Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := a.Authenticate(w, r)
		if ok {
			_ = json.NewEncoder(w).Encode(p)
		}
	})
}

func TestProxyHeadersAreTrustedOnlyFromTheProxy(t *testing.T) {
	g := NewWithT(t)
	g.Expect((&inbox.ProxyAuth{}).Check()).To(MatchError(ContainSubstring("the proxy must prove itself")))
	g.Expect((&inbox.ProxyAuth{Secret: []byte("short")}).Check()).To(MatchError(ContainSubstring("at least 16 bytes")))
	auth := &inbox.ProxyAuth{Secret: []byte("0123456789abcdef0123")}
	g.Expect(auth.Check()).To(Succeed())
	hs := httptest.NewServer(whoami(auth))
	t.Cleanup(hs.Close)
	secret := "0123456789abcdef0123"
	for _, c := range []struct {
		name   string
		header http.Header
		says   string
	}{
		{"no secret (a request that bypassed the proxy)", http.Header{"X-Forwarded-User": {"alice"}}, "no X-Hitl-Proxy-Secret header"},
		{"a wrong secret", http.Header{"X-Forwarded-User": {"alice"}, "X-Hitl-Proxy-Secret": {secret + "x"}}, "header is wrong"},
		{"no user", http.Header{"X-Hitl-Proxy-Secret": {secret}}, "the proxy sent 0 X-Forwarded-User headers"},
		{"two users", http.Header{"X-Hitl-Proxy-Secret": {secret}, "X-Forwarded-User": {"alice", "admin"}}, "sent 2"},
		{"a system user", http.Header{"X-Hitl-Proxy-Secret": {secret}, "X-Forwarded-User": {"system:serviceaccount:hitl-system:hitl-controller-manager"}}, "a Kubernetes system user"},
		{"control characters", http.Header{"X-Hitl-Proxy-Secret": {secret}, "X-Forwarded-User": {"al\tice"}}, "control characters"},
		{"an oversized name", http.Header{"X-Hitl-Proxy-Secret": {secret}, "X-Forwarded-User": {strings.Repeat("a", 300)}}, "longer than 256"},
		{"two users joined into one header", http.Header{"X-Hitl-Proxy-Secret": {secret}, "X-Forwarded-User": {"admin, alice"}}, `"admin, alice" holds a comma`},
		{"two group headers", http.Header{"X-Hitl-Proxy-Secret": {secret}, "X-Forwarded-User": {"alice"},
			"X-Forwarded-Groups": {"oncall", "release-managers"}}, "the proxy sent 2 X-Forwarded-Groups headers, not one"},
		{"two group headers, one empty", http.Header{"X-Hitl-Proxy-Secret": {secret}, "X-Forwarded-User": {"alice"},
			"X-Forwarded-Groups": {"", "release-managers"}}, "sent 2 X-Forwarded-Groups headers"},
		{"two secret headers", http.Header{"X-Hitl-Proxy-Secret": {secret, secret}, "X-Forwarded-User": {"alice"}}, "2 X-Hitl-Proxy-Secret headers, not one"},
	} {
		res, body := get(t, hs.URL, c.header)
		g.Expect(res.StatusCode).To(Equal(http.StatusUnauthorized), c.name)
		g.Expect(body).To(ContainSubstring(c.says), c.name)
	}
	res, body := get(t, hs.URL, http.Header{"X-Hitl-Proxy-Secret": {secret}, "X-Forwarded-User": {" alice "},
		"X-Forwarded-Groups": {"release-managers, system:masters,oncall,,oncall,system:authenticated"}})
	g.Expect(res.StatusCode).To(Equal(http.StatusOK))
	var p inbox.Person
	g.Expect(json.Unmarshal([]byte(body), &p)).To(Succeed())
	g.Expect(p).To(Equal(inbox.Person{Username: "alice", Groups: []string{"oncall", "release-managers"}}),
		"system: groups are never taken from a header")
}

func TestProxyProvesItselfWithItsClientCertificate(t *testing.T) {
	g := NewWithT(t)
	ca, caKey := certificate(t, "hitl test CA", nil, nil)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	proxyCert, proxyKey := certificate(t, "oauth2-proxy", ca, caKey)
	otherCert, otherKey := certificate(t, "some-pod", ca, caKey)
	auth := &inbox.ProxyAuth{ClientNames: []string{"oauth2-proxy"}}
	g.Expect(auth.Check()).To(Succeed())
	hs := httptest.NewUnstartedServer(whoami(auth))
	hs.TLS = &tls.Config{ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
	hs.StartTLS()
	t.Cleanup(hs.Close)
	call := func(cert *x509.Certificate, key *rsa.PrivateKey) (int, string) {
		tr := hs.Client().Transport.(*http.Transport).Clone()
		if cert != nil {
			tr.TLSClientConfig.Certificates = []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: key}}
		}
		req, _ := http.NewRequest(http.MethodGet, hs.URL, nil)
		req.Header.Set("X-Forwarded-User", "alice")
		res, err := (&http.Client{Transport: tr}).Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	status, body := call(proxyCert, proxyKey)
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(body).To(ContainSubstring(`"Username":"alice"`))
	status, body = call(otherCert, otherKey)
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	g.Expect(body).To(ContainSubstring(`the client certificate of "some-pod" is not the proxy's`))
	status, body = call(nil, nil)
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	g.Expect(body).To(ContainSubstring("no verified client certificate"))
}

// certificate makes a certificate for name, signed by parent (self-signed,
// as a CA, when parent is nil).
func certificate(t *testing.T, name string, parent *x509.Certificate, parentKey *rsa.PrivateKey) (*x509.Certificate, *rsa.PrivateKey) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}
