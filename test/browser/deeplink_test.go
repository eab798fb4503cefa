package browser

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/inbox"
	"github.com/hitl-dev/hitl/internal/notify/channel"
	. "github.com/hitl-dev/hitl/test/builders"
)

// signInProxy stands for the authenticating proxy (oauth2-proxy, say) in
// front of the in-cluster inbox, which it serves under /inbox/. A request
// without the proxy's session cookie is sent to sign in
// (/oauth2/sign_in?rd=<where it was going>), which signs in the person the
// test names and sends the browser back where it was going; a request
// with the cookie goes to the inbox, the prefix stripped, with the
// person's name and the shared secret in the headers the inbox trusts
// (oauth2-proxy's --pass-user-headers and an injected header), replacing
// whatever the browser sent in them.
type signInProxy struct {
	inbox http.Handler

	mu       sync.Mutex
	next     string            // who signs in next
	sessions map[string]string // cookie -> person
	signIns  int
}

const proxyCookie = "_oauth2_proxy"

func newSignInProxy(inboxURL string) *signInProxy {
	u, _ := url.Parse(inboxURL)
	return &signInProxy{inbox: http.StripPrefix("/inbox", httputil.NewSingleHostReverseProxy(u)), sessions: map[string]string{}}
}

// signInAs makes user the person who signs in next.
func (p *signInProxy) signInAs(user string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = user
}

// signedIn counts the sign-ins.
func (p *signInProxy) signedIn() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signIns
}

func (p *signInProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/oauth2/sign_in" {
		rd := r.URL.Query().Get("rd")
		if !strings.HasPrefix(rd, "/inbox/") {
			http.Error(w, "no way back", http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		p.signIns++
		session := fmt.Sprintf("session-%d", p.signIns)
		p.sessions[session] = p.next
		p.mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: proxyCookie, Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		http.Redirect(w, r, rd, http.StatusFound)
		return
	}
	var user string
	if c, err := r.Cookie(proxyCookie); err == nil {
		p.mu.Lock()
		user = p.sessions[c.Value]
		p.mu.Unlock()
	}
	if user == "" {
		http.Redirect(w, r, "/oauth2/sign_in?rd="+url.QueryEscape(r.URL.RequestURI()), http.StatusFound)
		return
	}
	r.Header.Set("X-Forwarded-User", user)
	r.Header.Del("X-Forwarded-Groups")
	r.Header.Set("X-Hitl-Proxy-Secret", proxySecret)
	p.inbox.ServeHTTP(w, r)
}

// emailLink renders the email hitl-notify sends about q, as
// internal/notify/channel renders it, and returns its HTML part and the
// link of its "Open in hitl" button.
func (e *env) emailLink(q *hitlv1.UserQuestion, inboxURL string) (html, link string) {
	m := channel.NewMessage(q, hitlv1.EventAsked, string(q.UID)+"/asked/oncall-email", time.Now(), inboxURL)
	raw, err := channel.EmailMessage(m, "hitl@example.com", []string{"oncall@example.com"}, time.Now())
	e.g.Expect(err).NotTo(HaveOccurred())
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	e.g.Expect(err).NotTo(HaveOccurred())
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	e.g.Expect(err).NotTo(HaveOccurred())
	parts := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := parts.NextPart()
		e.g.Expect(err).NotTo(HaveOccurred(), "the email has an HTML part")
		if strings.HasPrefix(part.Header.Get("Content-Type"), "text/html") {
			b, err := io.ReadAll(part) // quoted-printable, decoded by the reader
			e.g.Expect(err).NotTo(HaveOccurred())
			html = string(b)
			break
		}
	}
	found := regexp.MustCompile(`<a href="([^"]+)">Open in hitl</a>`).FindStringSubmatch(html)
	e.g.Expect(found).To(HaveLen(2), "the email's HTML has an Open in hitl link:\n%s", html)
	return html, found[1]
}

// The email hitl-notify sends links to the question's card: a person who
// follows it from their mail, not yet signed in to the in-cluster inbox's
// proxy, signs in, lands on the deep link and finds that card open,
// holding the window for them, and answers it there. The same link, once
// the question is answered, and links to a cancelled question, to one
// that never was and to one the person may not see, say that the
// question is not open for them.
func TestAnEmailsLinkOpensTheQuestionsCardAfterSignIn(t *testing.T) {
	e := newEnv(t)
	sa := e.inboxServiceAccount()
	srv, err := inbox.New(inbox.Options{
		Auth:       &inbox.ProxyAuth{Secret: []byte(proxySecret), UserHeader: "X-Forwarded-User", GroupsHeader: "X-Forwarded-Groups", SecretHeader: "X-Hitl-Proxy-Secret"},
		Clients:    inbox.ImpersonatingClients(sa),
		Namespaces: []string{e.ns},
	})
	e.g.Expect(err).NotTo(HaveOccurred())
	backend := httptest.NewServer(srv)
	proxy := newSignInProxy(backend.URL)
	front := httptest.NewServer(proxy)
	t.Cleanup(func() {
		front.CloseClientConnections()
		front.Close()
		backend.CloseClientConnections()
		backend.Close()
		srv.Close()
	})
	inboxURL := front.URL + "/inbox"

	e.ask(Question("earlier", e.ns).Ask("env", "Which region first?", "eu", "us").Obj())
	e.ask(Question("deploy", e.ns).Ask("env", "Where should I deploy?", "staging", "production").Timeout(10 * time.Minute).Obj())
	e.g.Eventually(e.state("deploy")).Should(Equal(hitlv1.StateOpen))
	html, link := e.emailLink(e.question("deploy"), inboxURL)
	e.g.Expect(link).To(Equal(inboxURL+hitlv1.InboxQuestionPath(e.ns, "deploy")), "the link is the inbox's route of the question")

	// The person's mail client shows the email; they click its button.
	mailbox := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, html)
	}))
	t.Cleanup(mailbox.Close)
	proxy.signInAs(e.person)
	tab := e.tab("", false)
	e.do(tab, chromedp.Navigate(mailbox.URL), chromedp.Click(chromedp.CSS(`a`)),
		chromedp.WaitVisible(card("deploy", `input[type=radio][value="production"]`)))
	e.g.Expect(eval[string](e, tab, `location.pathname`)).To(Equal("/inbox"+hitlv1.InboxQuestionPath(e.ns, "deploy")),
		"after sign-in the browser is back at the deep link")
	e.g.Expect(proxy.signedIn()).To(Equal(1), "the person signed in once, on the way")
	e.g.Expect(eval[bool](e, tab, `document.querySelector('li.item[data-name="deploy"]').classList.contains('linked')`)).To(BeTrue())
	e.g.Expect(eval[bool](e, tab, `document.querySelector('li.item[data-name="earlier"] .card-body').hidden`)).To(BeTrue(),
		"the other questions are listed, closed")
	e.g.Expect(eval[bool](e, tab, `document.querySelector('[data-focus-note]').hidden`)).To(BeTrue())
	e.g.Eventually(e.claims("deploy")).Should(HaveLen(1), "the card the link opened holds the window, as opening it by hand does")
	e.g.Expect(e.claims("deploy")()[0].Spec.Holder).To(HaveValue(HaveField("Username", e.person)))
	e.do(tab, chromedp.Click(card("deploy", `input[value="production"]`)), chromedp.Click(card("deploy", `button.primary`)),
		chromedp.WaitVisible(card("deploy", ".outcome-applied")))
	e.answered("deploy", hitlv1.AnswerItem{ID: "env", Selected: []string{"production"}})

	note := func() string { return e.text(tab, `[data-focus-text]`) }
	// The same link again: answered.
	e.do(tab, chromedp.Navigate(link))
	e.g.Eventually(note).Should(Equal(fmt.Sprintf("Question %s/deploy is no longer open: it has been answered.", e.ns)))
	e.g.Expect(e.text(tab, card("earlier", ".card-title"))).To(Equal("Which region first?"), "the rest of the inbox is there")

	// A cancelled question.
	e.ask(Question("dropped", e.ns).Ask("env", "Roll back?", "yes", "no").Obj())
	e.g.Eventually(e.state("dropped")).Should(Equal(hitlv1.StateOpen))
	dropped := e.question("dropped")
	orig := dropped.DeepCopy()
	dropped.Spec.Cancelled = true
	e.g.Expect(e.agent.Patch(e.ctx, dropped, client.MergeFrom(orig))).To(Succeed())
	e.g.Eventually(e.state("dropped")).Should(Equal(hitlv1.StateCancelled))
	_, link = e.emailLink(dropped, inboxURL)
	e.do(tab, chromedp.Navigate(link))
	e.g.Eventually(note).Should(Equal(fmt.Sprintf("Question %s/dropped is no longer open: its agent cancelled it.", e.ns)))

	// A question that never was.
	missing := `Question %s/%s is not open in your inbox: it does not exist (any more), or you may not see it. Your other questions are below.`
	e.do(tab, chromedp.Navigate(channel.Link(inboxURL, e.ns, "never-asked")))
	e.g.Eventually(note).Should(Equal(fmt.Sprintf(missing, e.ns, "never-asked")))

	// A person who may not see the namespace's questions, signing in
	// from another browser, learns no more than that.
	mallory := e.tab("", false)
	proxy.signInAs("mallory-" + e.ns)
	e.do(mallory, chromedp.Navigate(channel.Link(inboxURL, e.ns, "earlier")))
	e.g.Eventually(func() string { return e.text(mallory, `[data-focus-text]`) }).Should(Equal(fmt.Sprintf(missing, e.ns, "earlier")))
	e.g.Expect(eval[int](e, mallory, `document.querySelectorAll('li.item').length`)).To(Equal(0))
	e.g.Expect(eval[string](e, mallory, `location.pathname`)).To(Equal("/inbox" + hitlv1.InboxQuestionPath(e.ns, "earlier")))
}
