package inbox_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hitl-dev/hitl/internal/inbox"
	"github.com/hitl-dev/hitl/internal/notify/channel"
)

const deepLinkSecret = "0123456789abcdef0123"

// proxied starts an inbox behind an authenticating proxy that proves itself
// with a shared secret, serving namespace agents.
func proxied(t *testing.T) *httptest.Server {
	t.Helper()
	auth := &inbox.ProxyAuth{Secret: []byte(deepLinkSecret)}
	if err := auth.Check(); err != nil {
		t.Fatal(err)
	}
	srv, err := inbox.New(inbox.Options{Auth: auth, Clients: noClients(t), Namespaces: []string{"agents"}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs
}

var fromProxy = http.Header{"X-Hitl-Proxy-Secret": {deepLinkSecret}, "X-Forwarded-User": {"alice"}}

// The link every notification carries is a route of the inbox, word for
// word: the path of channel.Link under the inbox's URL opens the page for
// that very question, whatever prefix the inbox is served under.
func TestTheNotificationsLinkIsTheInboxsRoute(t *testing.T) {
	g := NewWithT(t)
	hs := proxied(t)
	for _, c := range []struct{ inboxURL, namespace, name string }{
		{"https://hitl.example.com", "agents", "deploy-42"},
		{"https://hitl.example.com/", "agents", "v1.2-rollout"},
		{"https://example.com/tools/hitl", "agents", "a"},
		{"https://hitl.example.com", "agents", strings.Repeat("q", 253)},
	} {
		link := channel.Link(c.inboxURL, c.namespace, c.name)
		u, err := url.Parse(link)
		g.Expect(err).NotTo(HaveOccurred(), link)
		base, err := url.Parse(c.inboxURL)
		g.Expect(err).NotTo(HaveOccurred())
		path, ok := strings.CutPrefix(u.EscapedPath(), strings.TrimSuffix(base.EscapedPath(), "/"))
		g.Expect(ok).To(BeTrue(), "%s lies under the inbox's URL %s", link, c.inboxURL)
		res, page := get(t, hs.URL+path, fromProxy)
		g.Expect(res.StatusCode).To(Equal(http.StatusOK), link)
		g.Expect(page).To(ContainSubstring(`<meta name="hitl-focus" content="`+c.namespace+"/"+c.name+`">`), link)
		g.Expect(page).To(ContainSubstring(`<meta name="hitl-root" content="../../">`), link)
		g.Expect(page).To(ContainSubstring(`href="../../static/inbox.css"`), "the page's files are the root's: "+link)
	}
}

// A deep link is protected exactly as the rest of the inbox: behind the
// proxy, a request that does not come from it is refused; locally, it
// needs the session, or the one-time token, which leads back to the link.
func TestADeepLinkIsAuthenticatedAsTheInbox(t *testing.T) {
	g := NewWithT(t)
	hs := proxied(t)
	const link = "/q/agents/deploy-42"
	for name, h := range map[string]http.Header{
		"no proxy secret": {"X-Forwarded-User": {"alice"}},
		"a wrong secret":  {"X-Forwarded-User": {"alice"}, "X-Hitl-Proxy-Secret": {deepLinkSecret + "x"}},
		"no user":         {"X-Hitl-Proxy-Secret": {deepLinkSecret}},
		"a system user":   {"X-Hitl-Proxy-Secret": {deepLinkSecret}, "X-Forwarded-User": {"system:admin"}},
	} {
		for _, path := range []string{"/", link} {
			res, body := get(t, hs.URL+path, h)
			g.Expect(res.StatusCode).To(Equal(http.StatusUnauthorized), name+" "+path)
			g.Expect(body).To(HavePrefix("401 Unauthorized"), name+" "+path)
		}
	}
	res, page := get(t, hs.URL+link, fromProxy)
	g.Expect(res.StatusCode).To(Equal(http.StatusOK))
	g.Expect(page).To(ContainSubstring(`Answering as <strong data-user>alice</strong>`))
	g.Expect(res.Header.Get("Content-Security-Policy")).To(ContainSubstring("script-src 'self'"))
	g.Expect(res.Header.Get("Cache-Control")).To(Equal("no-store"))

	local, auth := local(t)
	res, _ = get(t, local.URL+link, nil)
	g.Expect(res.StatusCode).To(Equal(http.StatusUnauthorized), "no session")
	tokenURL, err := url.Parse(auth.URL(strings.TrimPrefix(local.URL, "http://")))
	g.Expect(err).NotTo(HaveOccurred())
	res, _ = get(t, local.URL+link+"?"+tokenURL.RawQuery, nil)
	g.Expect(res.StatusCode).To(Equal(http.StatusSeeOther))
	g.Expect(res.Header.Get("Location")).To(Equal(link), "the token leads back to the question")
	cookies := res.Cookies()
	g.Expect(cookies).To(HaveLen(1))
	res, page = get(t, local.URL+link, http.Header{"Cookie": {cookies[0].String()}})
	g.Expect(res.StatusCode).To(Equal(http.StatusOK))
	g.Expect(page).To(ContainSubstring(`<meta name="hitl-focus" content="agents/deploy-42">`))
}

func TestADeepLinkOutsideTheInboxsNamespacesSaysSo(t *testing.T) {
	g := NewWithT(t)
	hs := proxied(t)
	res, page := get(t, hs.URL+"/q/kube-system/secret-plans", fromProxy)
	g.Expect(res.StatusCode).To(Equal(http.StatusOK))
	g.Expect(page).To(ContainSubstring("Question kube-system/secret-plans cannot be shown: this inbox does not serve namespace kube-system."))
	g.Expect(page).NotTo(ContainSubstring(`name="hitl-focus"`), "the page does not look for it")

	for _, path := range []string{"/q/agents", "/q/agents/", "/q/agents/deploy-42/more", "/q/"} {
		res, _ := get(t, hs.URL+path, fromProxy)
		g.Expect(res.StatusCode).To(Equal(http.StatusNotFound), path)
	}
	res, page = get(t, hs.URL+"/", fromProxy)
	g.Expect(res.StatusCode).To(Equal(http.StatusOK))
	g.Expect(page).NotTo(ContainSubstring("data-focus-note"), "the root page names no question")
	g.Expect(page).To(ContainSubstring(`href="static/inbox.css"`))
}
