package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify"
	"github.com/hitl-dev/hitl/internal/notify/channel"
	. "github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

var shared testenv.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// notifierUser is who the notifier acts as in these tests: bound to the
// roles config/notify ships, never admin.
const notifierUser = "hitl-notify-test"

// setup starts (or shares) the cluster, makes a namespace, and binds the
// shipped notifier roles to notifierUser: ClusterRole notify cluster-wide,
// notify-secrets in the namespace.
func setup(t *testing.T) (*testenv.Cluster, string) {
	t.Helper()
	k := shared.Get(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "notify-"}}
	if err := k.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	roles := shippedRoles(t)
	subject := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: notifierUser}
	for _, name := range []string{"notify", "notify-secrets"} {
		role := roles[name].DeepCopy()
		role.Name = "test-" + name
		if err := k.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-notify"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-notify"}, Subjects: []rbacv1.Subject{subject}}
	if err := k.Client.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "notify-secrets", Namespace: ns.Name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-notify-secrets"}, Subjects: []rbacv1.Subject{subject}}
	if err := k.Client.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	if err := testenv.AwaitBinding(ctx, k.Client, "", crb.RoleRef, crb.Subjects, testenv.GrantWait); err != nil {
		t.Fatal(err)
	}
	if err := testenv.AwaitBinding(ctx, k.Client, ns.Name, rb.RoleRef, rb.Subjects, testenv.GrantWait); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The next test's notifier would serve this namespace's policies.
		_ = k.Client.DeleteAllOf(ctx, &hitlv1.NotificationPolicy{}, client.InNamespace(ns.Name))
	})
	return k, ns.Name
}

// shippedRoles reads the ClusterRoles of config/notify/server/role.yaml.
func shippedRoles(t *testing.T) map[string]*rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "notify", "server", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*rbacv1.ClusterRole{}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var r rbacv1.ClusterRole
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if r.Kind == "ClusterRole" {
			out[r.Name] = r.DeepCopy()
		}
	}
	return out
}

// runNotifier runs a notifier as notifierUser until the returned function
// (also called at the test's end) stops it.
func runNotifier(t *testing.T, k *testenv.Cluster, o notify.Options) (stop func()) {
	t.Helper()
	cfg := rest.CopyConfig(k.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: notifierUser, Groups: []string{"system:authenticated"}}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	o.SkipNameValidation = true
	if o.Resync == 0 {
		o.Resync = time.Second
	}
	if _, err := notify.New(mgr, o); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// receiver is a webhook endpoint that verifies each request's signature
// and records what it received.
type receiver struct {
	t   *testing.T
	key []byte
	srv *httptest.Server

	mu sync.Mutex
	// fail is how many requests are answered 500 before the next succeed.
	fail int
	got  []received
	// refused counts the requests answered 500.
	refused int
}

type received struct {
	at  time.Time
	msg channel.Message
}

// key is the event's key within the question's life, from the
// deduplication id <uid>/<key>/<channel>.
func (r received) key() string { return strings.Split(r.msg.ID, "/")[1] }

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t, key: []byte("hmac-" + t.Name())}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

// verifiedMessage is the message a test receiver got: false, and 401 to
// the sender, when its signature does not verify with key; a body that is
// no message fails the test.
func verifiedMessage(t *testing.T, key []byte, w http.ResponseWriter, req *http.Request) (channel.Message, bool) {
	var m channel.Message
	body, _ := io.ReadAll(req.Body)
	if err := channel.Verify(key, req.Header.Get(channel.SignatureHeader), body, time.Now(), channel.DefaultTolerance); err != nil {
		t.Errorf("a request whose signature does not verify: %v", err)
		w.WriteHeader(http.StatusUnauthorized)
		return m, false
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Errorf("a body that is no message: %v", err)
	}
	return m, true
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	m, ok := verifiedMessage(r.t, r.key, w, req)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		r.refused++
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	r.got = append(r.got, received{at: time.Now(), msg: m})
}

// keys is what arrived about question (every question when ""), as
// event keys in arrival order.
func (r *receiver) keys(question string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, g := range r.got {
		if question == "" || g.msg.Question.Name == question {
			out = append(out, g.key())
		}
	}
	return out
}

func (r *receiver) first(question, key string) (received, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.got {
		if g.msg.Question.Name == question && g.key() == key {
			return g, true
		}
	}
	return received{}, false
}

// webhook creates a webhook channel to r with its Secret.
func webhook(t *testing.T, k *testenv.Cluster, ns, name string, r *receiver) {
	t.Helper()
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-hmac", Namespace: ns}, Data: map[string][]byte{"key": r.key}}
	ch := &hitlv1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: hitlv1.NotificationChannelSpec{
		Webhook: &hitlv1.WebhookChannel{URL: r.srv.URL + "/hitl", SecretRef: hitlv1.SecretKeyReference{Name: sec.Name}},
	}}
	for _, o := range []client.Object{sec, ch} {
		if err := k.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

func createPolicy(t *testing.T, k *testenv.Cluster, ns, name string, spec hitlv1.NotificationPolicySpec) *hitlv1.NotificationPolicy {
	t.Helper()
	p := &hitlv1.NotificationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	if err := k.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func ask(t *testing.T, k *testenv.Cluster, q *hitlv1.UserQuestion) *hitlv1.UserQuestion {
	t.Helper()
	if err := k.Client.Create(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	return q
}

func notified(g Gomega, k *testenv.Cluster, ns, name string) string {
	q := &hitlv1.UserQuestion{}
	g.Expect(k.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, q)).To(Succeed())
	return q.Annotations[hitlv1.NotifiedAnnotation]
}

func readyOf(g Gomega, k *testenv.Cluster, obj client.Object) *metav1.Condition {
	g.Expect(k.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	var conds []metav1.Condition
	switch o := obj.(type) {
	case *hitlv1.NotificationPolicy:
		conds = o.Status.Conditions
	case *hitlv1.NotificationChannel:
		conds = o.Status.Conditions
	}
	return meta.FindStatusCondition(conds, hitlv1.ConditionReady)
}

func TestTimedQuestionIsAskedRemindedTwiceAndContinuedOnce(t *testing.T) {
	g := NewWithT(t)
	k, ns := setup(t)
	hook := newReceiver(t)
	webhook(t, k, ns, "hook", hook)
	p := createPolicy(t, k, ns, "team", hitlv1.NotificationPolicySpec{
		Selector: hitlv1.ApprovalSelector{Agents: []string{"release-bot"}}, Channels: []string{"hook"},
		Reminders: &hitlv1.Reminders{Percents: []int32{50, 90}},
	})
	runNotifier(t, k, notify.Options{InboxURL: "https://hitl.example.com"})
	g.Eventually(func(g Gomega) {
		c := readyOf(g, k, p)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	}, 20*time.Second).Should(Succeed())

	q := ask(t, k, Question("deploy", ns).Agent("release-bot").Ask("env", "Where to?", "staging", "prod").Timeout(4*time.Second).Obj())
	other := ask(t, k, Question("not-selected", ns).Agent("other-bot").Ask("x", "X?").Timeout(4*time.Second).Obj())
	g.Eventually(func() []string { return hook.keys(q.Name) }, 20*time.Second).Should(ContainElement("continued"))
	time.Sleep(1500 * time.Millisecond) // time for a duplicate to show
	g.Expect(hook.keys("")).To(Equal([]string{"asked", "reminder-50", "reminder-90", "continued"}))
	g.Expect(hook.keys(other.Name)).To(BeEmpty())

	asked, _ := hook.first(q.Name, "asked")
	g.Expect(asked.msg.Link).To(Equal("https://hitl.example.com/q/" + ns + "/deploy"))
	g.Expect(asked.msg.Question.Items[0].Options).To(Equal([]string{"staging", "prod"}))
	g.Expect(asked.msg.ID).To(Equal(string(q.UID) + "/asked/hook"))
	// The reminders came at their times: not before half and nine tenths
	// of the window (measured from the ask, which creationTimestamp
	// rounds down by up to a second).
	created := q.CreationTimestamp.Time
	r50, _ := hook.first(q.Name, "reminder-50")
	r90, _ := hook.first(q.Name, "reminder-90")
	g.Expect(r50.at).To(BeTemporally(">=", created.Add(2*time.Second)))
	g.Expect(r90.at).To(BeTemporally(">=", created.Add(3600*time.Millisecond)))
	g.Expect(r50.msg.Reminder.Percent).To(BeEquivalentTo(50))

	g.Eventually(func(g Gomega) string { return notified(g, k, ns, q.Name) }).Should(
		Equal(`{"hook":["asked","reminder-50","reminder-90","continued"]}`))
}

func TestEscalationFiresOnlyWhileUnanswered(t *testing.T) {
	g := NewWithT(t)
	k, ns := setup(t)
	hook, oncall := newReceiver(t), newReceiver(t)
	webhook(t, k, ns, "hook", hook)
	webhook(t, k, ns, "oncall", oncall)
	createPolicy(t, k, ns, "team", hitlv1.NotificationPolicySpec{
		Channels: []string{"hook"}, On: []hitlv1.NotificationEvent{hitlv1.EventAsked, hitlv1.EventSettled},
		Escalation: []hitlv1.EscalationTier{{After: metav1.Duration{Duration: 3 * time.Second}, Channels: []string{"oncall"}}},
	})
	runNotifier(t, k, notify.Options{})

	waiting := ask(t, k, Question("waiting", ns).Agent("bot").Ask("a", "A?", "yes", "no").Obj())
	answered := ask(t, k, Question("answered", ns).Agent("bot").Ask("a", "A?", "yes", "no").Obj())
	g.Eventually(func() []string { return hook.keys(answered.Name) }, 10*time.Second).Should(Equal([]string{"asked"}))
	if err := k.Client.Create(context.Background(), Reply("yes", ns, answered.Name).Select("a", "yes").Obj()); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() []string { return hook.keys(answered.Name) }, 10*time.Second).Should(Equal([]string{"asked", "settled"}))
	settled, _ := hook.first(answered.Name, "settled")
	g.Expect(settled.msg.Settlement.Answers).To(HaveLen(1))

	g.Eventually(func() []string { return oncall.keys(waiting.Name) }, 15*time.Second).Should(Equal([]string{"escalated-3"}))
	esc, _ := oncall.first(waiting.Name, "escalated-3")
	g.Expect(esc.at).To(BeTemporally(">=", waiting.CreationTimestamp.Add(3*time.Second)))
	g.Expect(esc.msg.Escalation.After).To(Equal("3s"))
	// The answered question never escalates, and the waiting one once.
	time.Sleep(2 * time.Second)
	g.Expect(oncall.keys("")).To(Equal([]string{"escalated-3"}))
	// on leaves Escalated out: the policy's own channel does not hear it.
	g.Expect(hook.keys(waiting.Name)).To(Equal([]string{"asked"}))
}

func TestRestartMidRemindersNeitherLosesNorRepeats(t *testing.T) {
	g := NewWithT(t)
	k, ns := setup(t)
	hook := newReceiver(t)
	webhook(t, k, ns, "hook", hook)
	createPolicy(t, k, ns, "team", hitlv1.NotificationPolicySpec{
		Channels: []string{"hook"}, Reminders: &hitlv1.Reminders{Percents: []int32{30, 60}},
	})
	stop := runNotifier(t, k, notify.Options{})
	q := ask(t, k, Question("deploy", ns).Agent("bot").Ask("a", "A?", "yes", "no").Timeout(8*time.Second).Obj())
	// Stop once the first reminder is out and recorded on the question.
	g.Eventually(func(g Gomega) string { return notified(g, k, ns, q.Name) }, 15*time.Second).Should(
		Equal(`{"hook":["asked","reminder-30"]}`))
	stop()
	// The second reminder falls due while no notifier runs.
	time.Sleep(time.Until(q.CreationTimestamp.Add(6 * time.Second)))
	g.Expect(hook.keys("")).To(Equal([]string{"asked", "reminder-30"}))
	runNotifier(t, k, notify.Options{})
	g.Eventually(func() []string { return hook.keys(q.Name) }, 20*time.Second).Should(ContainElement("continued"))
	time.Sleep(time.Second)
	g.Expect(hook.keys("")).To(Equal([]string{"asked", "reminder-30", "reminder-60", "continued"}))
}

func TestFailingChannelIsRetriedAndDoesNotDelayAnother(t *testing.T) {
	g := NewWithT(t)
	k, ns := setup(t)
	bad, good := newReceiver(t), newReceiver(t)
	bad.fail = 3
	webhook(t, k, ns, "bad", bad)
	webhook(t, k, ns, "good", good)
	createPolicy(t, k, ns, "team", hitlv1.NotificationPolicySpec{Channels: []string{"bad", "good"}, On: []hitlv1.NotificationEvent{hitlv1.EventAsked}})
	runNotifier(t, k, notify.Options{Retry: channel.Retry{Attempts: 5, Base: time.Second, Max: 2 * time.Second}})

	q := ask(t, k, Question("deploy", ns).Agent("bot").Ask("a", "A?").Obj())
	g.Eventually(func() []string { return good.keys(q.Name) }, 10*time.Second).Should(Equal([]string{"asked"}))
	delivered, _ := good.first(q.Name, "asked")
	// The bad channel fails 3 times, a second and more apart: the good
	// one was not behind it.
	bad.mu.Lock()
	refusedThen := bad.refused
	bad.mu.Unlock()
	g.Expect(refusedThen).To(BeNumerically("<", 3), "the good channel waited for the bad one's retries")
	g.Eventually(func() []string { return bad.keys(q.Name) }, 20*time.Second).Should(Equal([]string{"asked"}))
	retried, _ := bad.first(q.Name, "asked")
	g.Expect(retried.at.Sub(delivered.at)).To(BeNumerically(">=", 2*time.Second))
	g.Eventually(func(g Gomega) string { return notified(g, k, ns, q.Name) }).Should(Equal(`{"bad":["asked"],"good":["asked"]}`))
}

func TestBadConfigurationGetsAClearCondition(t *testing.T) {
	g := NewWithT(t)
	k, ns := setup(t)
	ctx := context.Background()
	chat := &hitlv1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: ns}, Spec: hitlv1.NotificationChannelSpec{
		Slack: &hitlv1.ChatChannel{WebhookSecretRef: hitlv1.SecretKeyReference{Name: "slack-hook"}},
	}}
	g.Expect(k.Client.Create(ctx, chat)).To(Succeed())
	p := createPolicy(t, k, ns, "team", hitlv1.NotificationPolicySpec{Channels: []string{"chat"}})
	missing := createPolicy(t, k, ns, "typo", hitlv1.NotificationPolicySpec{Channels: []string{"chta"}})
	runNotifier(t, k, notify.Options{})

	expectReady := func(obj client.Object, status metav1.ConditionStatus, reason, message string) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			c := readyOf(g, k, obj)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(status))
			g.Expect(c.Reason).To(Equal(reason))
			g.Expect(c.Message).To(Equal(message))
			g.Expect(c.ObservedGeneration).To(Equal(obj.GetGeneration()))
		}, 20*time.Second).Should(Succeed())
	}
	expectReady(chat, metav1.ConditionFalse, hitlv1.ReasonSecretNotFound,
		"Secret slack-hook (spec.slack.webhookSecretRef) does not exist in namespace "+ns)
	expectReady(p, metav1.ConditionFalse, hitlv1.ReasonSecretNotFound,
		"NotificationChannel chat: Secret slack-hook (spec.slack.webhookSecretRef) does not exist in namespace "+ns)
	expectReady(missing, metav1.ConditionFalse, hitlv1.ReasonChannelNotFound, "NotificationChannel chta does not exist in namespace "+ns)

	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "slack-hook", Namespace: ns}, Data: map[string][]byte{"url": []byte("http://hooks.slack.example/services/T/B/SECRET")}}
	g.Expect(k.Client.Create(ctx, sec)).To(Succeed())
	expectReady(p, metav1.ConditionFalse, hitlv1.ReasonBadURL,
		"NotificationChannel chat: the webhook URL in Secret slack-hook, key url (spec.slack.webhookSecretRef), is not an https URL")

	sec.Data["url"] = []byte("https://hooks.slack.example/services/T/B/SECRET")
	g.Expect(k.Client.Update(ctx, sec)).To(Succeed())
	expectReady(p, metav1.ConditionTrue, hitlv1.ReasonReady, "Notifications can be sent")
	expectReady(chat, metav1.ConditionTrue, hitlv1.ReasonReady, "Notifications can be sent")
}
