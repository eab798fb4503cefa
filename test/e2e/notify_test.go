package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hitl-dev/hitl/internal/notify/channel"
	"github.com/hitl-dev/hitl/test/testenv"
)

// notifyConfig is what the platform team applies: the HMAC key's Secret, a
// webhook channel to the receiver, and a policy that tells of every event
// of bot's questions, with reminders at 40 % and 80 % of a timed window.
func notifyConfig(key, url string) string {
	return `apiVersion: v1
kind: Secret
metadata: {name: hitl-webhook}
stringData: {key: ` + key + `}
---
apiVersion: hitl.dev/v1alpha1
kind: NotificationChannel
metadata: {name: audit-webhook}
spec:
  webhook:
    url: ` + url + `/hitl
    secretRef: {name: hitl-webhook}
---
apiVersion: hitl.dev/v1alpha1
kind: NotificationPolicy
metadata: {name: bot-questions}
spec:
  selector: {agents: [bot]}
  channels: [audit-webhook]
  reminders: {percents: [40, 80]}
`
}

// notificationAdmin is what the platform team may do in the namespace
// beside the built-in admin role (Secrets): write the notification
// policies and channels, which no shipped role grants.
var notificationAdmin = rbacv1.PolicyRule{APIGroups: []string{"hitl.dev"}, Resources: []string{"notificationpolicies", "notificationchannels"},
	Verbs: []string{"create", "get", "list", "watch", "update", "patch", "delete"}}

var _ = Describe("hitl-notify", func() {
	var (
		ns       string
		bot      actor
		notifier *notifierProcess
		hook     *hookReceiver
	)
	BeforeEach(func() {
		_, err := os.Stat(filepath.Join(binDir, "hitl-notify"))
		Expect(err).NotTo(HaveOccurred(), "run `make build` first (or `make test-e2e`)")
		ns, bot = newNamespace()
		ctx := context.Background()

		// hitl-notify's ServiceAccount and roles as config/notify ships
		// them, and the Secrets binding docs/notifications.md has each
		// namespace create.
		id, err := testenv.InstallNotifierRBAC(ctx, adminClient)
		Expect(err).NotTo(HaveOccurred())
		bound := admin.kubectl("-n", ns, "create", "rolebinding", "hitl-notify-secrets", "--clusterrole="+id.SecretsRole,
			"--serviceaccount="+id.Namespace+":"+id.ServiceAccount)
		Expect(bound.code).To(BeZero(), bound.stderr)
		waitAllowed(id.Username(), authorizationv1.ResourceAttributes{Namespace: ns, Resource: "secrets", Verb: "get"})
		waitAllowed(id.Username(), authorizationv1.ResourceAttributes{Namespace: ns, Group: "hitl.dev", Resource: "agents", Name: agentName, Verb: "notify"})
		token, _, err := testenv.RequestToken(ctx, adminClient, id.Namespace, id.ServiceAccount, time.Hour)
		Expect(err).NotTo(HaveOccurred())
		cfg, err := clientcmd.BuildConfigFromFlags("", admin.kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		data, err := testenv.TokenKubeconfig(cfg, id.Username(), token, "")
		Expect(err).NotTo(HaveOccurred())
		kubeconfig := filepath.Join(workDir, "kubeconfig-notify-"+ns)
		Expect(os.WriteFile(kubeconfig, data, 0o600)).To(Succeed())

		// The platform team: the namespace's admin, and the notification
		// objects' writer.
		platformUser := rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: platform.name}
		bind(ns, "ClusterRole", "admin", platformUser)
		Expect(adminClient.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "notification-admin", Namespace: ns},
			Rules: []rbacv1.PolicyRule{notificationAdmin}})).To(Succeed())
		bind(ns, "Role", "notification-admin", platformUser)
		waitAllowed(platform.name, authorizationv1.ResourceAttributes{Namespace: ns, Group: "hitl.dev", Resource: "notificationpolicies", Verb: "create"})
		waitAllowed(platform.name, authorizationv1.ResourceAttributes{Namespace: ns, Resource: "secrets", Verb: "create"})

		hook = newHookReceiver()
		DeferCleanup(hook.srv.Close)
		applied := platform.kubectl("-n", ns, "apply", "-f", writeFile(ns+"-notify.yaml", notifyConfig(string(hook.key), hook.srv.URL)))
		Expect(applied.code).To(BeZero(), applied.stderr)

		notifier = &notifierProcess{kubeconfig: kubeconfig, leaseNamespace: id.Namespace}
		DeferCleanup(func() {
			notifier.kill()
			// The next spec's notifier would otherwise serve this namespace.
			Expect(admin.kubectl("-n", ns, "delete", "notificationpolicies", "--all").code).To(BeZero())
		})
		notifier.start()
	})

	It("tells a webhook of a timed question, its reminders and Continued, and of a settled one, once each across a SIGKILL", func() {
		// Leader election as shipped: the notifier holds its Lease in
		// hitl's namespace, and sets the policy Ready.
		holder := jsonpath(notifier.leaseNamespace, "lease/hitl-notify.hitl.dev", "{.spec.holderIdentity}")
		Eventually(holder).ShouldNot(BeEmpty())
		firstHolder := holder()
		Eventually(jsonpath(ns, "notificationpolicy/bot-questions", `{.status.conditions[?(@.type=="Ready")].status}`)).Should(Equal("True"))

		// A timed question asked with the agent SDK: Asked, both
		// reminders, Continued, in order.
		_, waitAsk := bot.background(filepath.Join(workDir, "agent"), "--namespace", ns, "--agent", agentName, "--name", "deploy", "--timeout", "4s")
		Eventually(hook.keysOf("deploy"), "15s").Should(HaveLen(4))
		Expect(hook.keysOf("deploy")()).To(Equal([]string{"asked", "reminder-40", "reminder-80", "continued"}))
		Expect(decode(waitAsk().stdout)).To(HaveKeyWithValue("Pending", true))
		asked := hook.message("deploy", "asked")
		uid := jsonpath(ns, "uq/deploy", "{.metadata.uid}")()
		Expect(asked.ID).To(Equal(uid + "/asked/audit-webhook"))
		Expect(asked.Link).To(Equal("https://hitl.example.com/q/" + ns + "/deploy"))
		Expect(asked.Question.Agent).To(Equal(agentName))
		Expect(hook.message("deploy", "reminder-80").Reminder.Percent).To(BeEquivalentTo(80))

		// A question a person answers: Asked, then Settled with the answer.
		_, waitLunch := bot.background(filepath.Join(workDir, "agent"), "--namespace", ns, "--agent", agentName, "--name", "lunch")
		Eventually(hook.keysOf("lunch")).Should(Equal([]string{"asked"}))
		answered := alice.hitl("-n", ns, "answer", "lunch", "--select", "q=yes")
		Expect(answered.code).To(BeZero(), answered.stderr)
		Expect(waitLunch().code).To(BeZero())
		Eventually(hook.keysOf("lunch")).Should(Equal([]string{"asked", "settled"}))
		settled := hook.message("lunch", "settled")
		Expect(settled.Settlement).NotTo(BeNil())
		Expect(settled.Settlement.AnsweredBy).To(Equal(alice.name))
		Expect(settled.Settlement.Answers).To(ConsistOf(channel.Answer{ID: "q", Selected: []string{"yes"}}))

		// Killed between the reminders, once the first is recorded on the
		// question: the next notifier sends the second and Continued, and
		// nothing again.
		_, waitRollout := bot.background(filepath.Join(workDir, "agent"), "--namespace", ns, "--agent", agentName, "--name", "rollout", "--timeout", "12s")
		Eventually(jsonpath(ns, "uq/rollout", `{.metadata.annotations.hitl\.dev/notified}`), "15s").
			Should(Equal(`{"audit-webhook":["asked","reminder-40"]}`))
		notifier.kill()
		Expect(hook.keysOf("rollout")()).To(Equal([]string{"asked", "reminder-40"}))
		notifier.start()
		Eventually(hook.keysOf("rollout"), "20s").Should(HaveLen(4))
		Expect(hook.keysOf("rollout")()).To(Equal([]string{"asked", "reminder-40", "reminder-80", "continued"}))
		Expect(decode(waitRollout().stdout)).To(HaveKeyWithValue("Pending", true))
		Expect(holder()).NotTo(Equal(firstHolder), "the second notifier leads")

		// Time for a repeat to show: every notification arrived once.
		Consistently(hook.repeats, "1s").Should(BeEmpty())
		Expect(hook.refused()).To(BeZero())
		Eventually(jsonpath(ns, "uq/rollout", `{.metadata.annotations.hitl\.dev/notified}`)).
			Should(Equal(`{"audit-webhook":["asked","reminder-40","reminder-80","continued"]}`))
	})
})

// notifierProcess is hitl-notify built from this tree, run as its
// ServiceAccount with the Deployment's flags (--leader-elect) and a Lease
// short enough that a restarted notifier takes over within seconds.
type notifierProcess struct {
	kubeconfig, leaseNamespace string
	cmd                        *exec.Cmd
	exited                     chan struct{}
}

// start runs the notifier and waits until it leads.
func (p *notifierProcess) start() {
	GinkgoHelper()
	p.cmd = exec.Command(filepath.Join(binDir, "hitl-notify"), "--kubeconfig", p.kubeconfig,
		"--leader-elect", "--leader-election-namespace", p.leaseNamespace,
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms",
		"--health-probe-bind-address=0", "--metrics-bind-address=0", "--inbox-url=https://hitl.example.com")
	stderr, err := p.cmd.StderrPipe()
	Expect(err).NotTo(HaveOccurred())
	p.cmd.Stdout = GinkgoWriter
	Expect(p.cmd.Start()).To(Succeed())
	leading, exited := make(chan struct{}), make(chan struct{})
	p.exited = exited
	go func() {
		defer close(exited)
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		once := sync.Once{}
		for s.Scan() {
			fmt.Fprintln(GinkgoWriter, "[hitl-notify]", s.Text())
			if strings.Contains(strings.ToLower(s.Text()), "successfully acquired lease") {
				once.Do(func() { close(leading) })
			}
		}
		_ = p.cmd.Wait()
	}()
	Eventually(leading, "20s").Should(BeClosed(), "hitl-notify did not acquire its Lease")
}

// kill ends the notifier with SIGKILL: no clean-up, no hand-over.
func (p *notifierProcess) kill() {
	GinkgoHelper()
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	p.cmd = nil
}

// hookReceiver is a webhook receiver as docs/notifications.md describes
// one: it verifies each request's HMAC signature, and counts each
// notification by its deduplication id.
type hookReceiver struct {
	key []byte
	srv *httptest.Server

	mu    sync.Mutex
	order []channel.Message // the first arrival of each id, in order
	count map[string]int    // arrivals by id
	bad   int
}

func newHookReceiver() *hookReceiver {
	GinkgoHelper()
	random := make([]byte, 32)
	_, err := rand.Read(random)
	Expect(err).NotTo(HaveOccurred())
	// The key as `openssl rand -hex 32` makes it: the notifier signs with
	// the Secret's bytes, the hex text.
	r := &hookReceiver{key: []byte(hex.EncodeToString(random)), count: map[string]int{}}
	r.srv = httptest.NewServer(r)
	return r
}

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var m channel.Message
	err := channel.Verify(r.key, req.Header.Get(channel.SignatureHeader), body, time.Now(), channel.DefaultTolerance)
	if err == nil {
		err = json.Unmarshal(body, &m)
	}
	if err == nil && req.Header.Get(channel.DeliveryHeader) != m.ID {
		err = fmt.Errorf("delivery header %q, id %q", req.Header.Get(channel.DeliveryHeader), m.ID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		fmt.Fprintln(GinkgoWriter, "[receiver] refused:", err)
		r.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.count[m.ID]++; r.count[m.ID] == 1 {
		r.order = append(r.order, m)
	}
}

// keysOf returns the event keys (from the ids <uid>/<key>/<channel>) of
// what arrived about a question, in the order they first arrived.
func (r *hookReceiver) keysOf(question string) func() []string {
	return func() []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		keys := []string{}
		for _, m := range r.order {
			if m.Question.Name == question {
				keys = append(keys, strings.Split(m.ID, "/")[1])
			}
		}
		return keys
	}
}

func (r *hookReceiver) message(question, key string) channel.Message {
	GinkgoHelper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.order {
		if m.Question.Name == question && strings.Split(m.ID, "/")[1] == key {
			return m
		}
	}
	Fail(fmt.Sprintf("no %s notification of %s arrived", key, question))
	return channel.Message{}
}

// repeats are the ids that arrived more than once, with their counts.
func (r *hookReceiver) repeats() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for id, n := range r.count {
		if n > 1 {
			out[id] = n
		}
	}
	return out
}

func (r *hookReceiver) refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}
