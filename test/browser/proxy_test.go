package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/inbox"
	. "github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

const proxySecret = "0123456789abcdef0123456789abcdef"

// inboxServiceAccount is the in-cluster inbox's identity: a ServiceAccount
// bound to exactly the ClusterRole of config/inbox/server/role.yaml.
func (e *env) inboxServiceAccount() *rest.Config {
	data, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "inbox", "server", "role.yaml"))
	e.g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	e.g.Expect(yaml.NewYAMLOrJSONDecoder(strings.NewReader(data2first(string(data))), 4096).Decode(role)).To(Succeed())
	e.g.Expect(role.Kind).To(Equal("ClusterRole"))
	role.Name = "hitl-inbox-" + e.ns
	e.g.Expect(e.admin.Create(e.ctx, role)).To(Succeed())
	e.g.Expect(e.admin.Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "hitl-inbox"}})).To(Succeed())
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: e.ns, Name: "hitl-inbox"}},
	}
	e.g.Expect(e.admin.Create(e.ctx, binding)).To(Succeed())
	// The authorizer learns of the role and the binding from watches.
	e.g.Expect(testenv.AwaitBinding(e.ctx, e.admin, "", binding.RoleRef, binding.Subjects, testenv.GrantWait)).To(Succeed())
	token, _, err := testenv.RequestToken(e.ctx, e.admin, e.ns, "hitl-inbox", time.Hour)
	e.g.Expect(err).NotTo(HaveOccurred())
	return &rest.Config{Host: e.k.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: e.k.Config.CAData}}
}

// data2first is the first document of a multi-document YAML file.
func data2first(s string) string { return strings.SplitN(s, "\n---\n", 2)[0] }

type proxied struct {
	e   *env
	url string
}

// as sends a request as the proxy does for user (and groups).
func (p proxied) as(method, path, user string, groups []string, csrf, body string) (int, string) {
	p.e.t.Helper()
	req, err := http.NewRequestWithContext(p.e.ctx, method, p.url+path, strings.NewReader(body))
	p.e.g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("X-Hitl-Proxy-Secret", proxySecret)
	req.Header.Set("X-Forwarded-User", user)
	if len(groups) > 0 {
		req.Header.Set("X-Forwarded-Groups", strings.Join(groups, ","))
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Hitl-Csrf", csrf)
	}
	res, err := http.DefaultClient.Do(req)
	p.e.g.Expect(err).NotTo(HaveOccurred())
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

var csrfMeta = regexp.MustCompile(`<meta name="hitl-csrf" content="([^"]+)">`)

func (p proxied) csrf(user string, groups []string) string {
	status, page := p.as(http.MethodGet, "/", user, groups, "", "")
	p.e.g.Expect(status).To(Equal(http.StatusOK))
	m := csrfMeta.FindStringSubmatch(page)
	p.e.g.Expect(m).To(HaveLen(2))
	return m[1]
}

// firstEvent reads the event stream as user until its first message.
func (p proxied) firstEvent(user string) map[string]any {
	ctx, cancel := context.WithTimeout(p.e.ctx, 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/events", nil)
	req.Header.Set("X-Hitl-Proxy-Secret", proxySecret)
	req.Header.Set("X-Forwarded-User", user)
	res, err := http.DefaultClient.Do(req)
	p.e.g.Expect(err).NotTo(HaveOccurred())
	defer res.Body.Close()
	s := bufio.NewScanner(res.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if data, ok := strings.CutPrefix(s.Text(), "data: "); ok {
			msg := map[string]any{}
			p.e.g.Expect(json.Unmarshal([]byte(data), &msg)).To(Succeed())
			return msg
		}
	}
	p.e.t.Fatalf("the event stream of %s ended without a message: %v", user, s.Err())
	return nil
}

// The in-cluster inbox, with nothing but config/inbox's RBAC, acts as the
// person its proxy names: their RBAC applies and answeredBy is theirs.
func TestBehindTheProxyTheInboxActsAsThePerson(t *testing.T) {
	e := newEnv(t)
	sa := e.inboxServiceAccount()
	saClient, err := client.New(sa, client.Options{Scheme: hitlv1.NewScheme()})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(saClient.List(e.ctx, &hitlv1.UserQuestionList{}, client.InNamespace(e.ns))).To(
		MatchError(ContainSubstring("forbidden")), "the inbox's own identity reads no question")

	srv, err := inbox.New(inbox.Options{
		Auth:       &inbox.ProxyAuth{Secret: []byte(proxySecret), UserHeader: "X-Forwarded-User", GroupsHeader: "X-Forwarded-Groups", SecretHeader: "X-Hitl-Proxy-Secret"},
		Clients:    inbox.ImpersonatingClients(sa),
		Namespaces: []string{e.ns},
	})
	e.g.Expect(err).NotTo(HaveOccurred())
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close(); srv.Close() })
	p := proxied{e: e, url: hs.URL}

	e.ask(Question("deploy", e.ns).Ask("env", "Where should I deploy?", "staging", "production").Obj())
	e.ask(Question("other", e.ns).Ask("env", "And here?", "staging", "production").Obj())
	e.g.Eventually(e.state("other")).Should(Equal(hitlv1.StateOpen))

	// A person the cluster grants nothing: the list says why it is empty,
	// and a reply is refused by the API server.
	mallory := "mallory-" + e.ns
	msg := p.firstEvent(mallory)
	e.g.Expect(msg["type"]).To(Equal("problem"))
	e.g.Expect(msg["problem"]).To(ContainSubstring("forbidden"))
	status, body := p.as(http.MethodPost, "/api/reply", mallory, nil, p.csrf(mallory, nil),
		`{"namespace":"`+e.ns+`","name":"deploy","answers":[{"id":"env","selected":["staging"]}]}`)
	e.g.Expect(status).To(Equal(http.StatusForbidden), body)
	e.g.Expect(body).To(ContainSubstring(`User \"` + mallory + `\" cannot get resource \"userquestions\"`))

	// The person: their own list, a bad batch refused with its code and
	// field before anything is created, then their reply.
	msg = p.firstEvent(e.person)
	e.g.Expect(msg["type"]).To(Equal("reset"))
	e.g.Expect(msg["items"]).To(HaveLen(2))
	csrf := p.csrf(e.person, nil)
	status, body = p.as(http.MethodPost, "/api/reply", e.person, nil, csrf,
		`{"namespace":"`+e.ns+`","name":"deploy","answers":[{"id":"env","selected":["staging","production"]}]}`)
	e.g.Expect(status).To(Equal(http.StatusUnprocessableEntity))
	e.g.Expect(body).To(ContainSubstring(`"message":"BAD_ANSWER: question env: the question is single-select: select at most one label (spec.answers[0].selected)"`))
	e.g.Expect(body).To(ContainSubstring(`"field":"spec.answers[0].selected"`))
	status, body = p.as(http.MethodPost, "/api/reply", e.person, nil, csrf,
		`{"namespace":"`+e.ns+`","name":"deploy","answers":[{"id":"env","selected":["production"]}]}`)
	e.g.Expect(status).To(Equal(http.StatusOK), body)
	e.g.Expect(body).To(ContainSubstring(`"outcome":"Applied"`))
	e.answered("deploy", hitlv1.AnswerItem{ID: "env", Selected: []string{"production"}})

	// A person who may answer through a group only: the proxy's groups
	// are impersonated too.
	role := e.shippedRole("hitl_answerer.yaml")
	e.bind(role.Name, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "release-managers-" + e.ns})
	gina, groups := "gina-"+e.ns, []string{"release-managers-" + e.ns}
	status, body = p.as(http.MethodPost, "/api/reply", gina, groups, p.csrf(gina, groups),
		`{"namespace":"`+e.ns+`","name":"other","answers":[{"id":"env","selected":["staging"]}]}`)
	e.g.Expect(status).To(Equal(http.StatusOK), body)
	e.g.Eventually(e.state("other")).Should(Equal(hitlv1.StateSettled))
	settled := e.question("other").Status.Settlement.AnsweredBy
	e.g.Expect(settled.Username).To(Equal(gina))
	e.g.Expect(settled.Groups).To(ContainElement("release-managers-" + e.ns))

	// A CSRF token is bound to its person.
	status, _ = p.as(http.MethodPost, "/api/reply", gina, groups, csrf, `{}`)
	e.g.Expect(status).To(Equal(http.StatusForbidden))
}
