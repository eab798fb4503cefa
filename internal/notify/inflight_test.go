package notify_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify"
	. "github.com/hitl-dev/hitl/test/builders"
)

// slowReceiver is a webhook endpoint that takes its time over each
// request, and notes how many requests it held at once, in all and per
// question.
type slowReceiver struct {
	t     *testing.T
	key   []byte
	delay time.Duration
	srv   *httptest.Server

	mu       sync.Mutex
	inFlight map[string]int // by question
	total    int
	// most is the most requests held at once; overlapped lists the
	// questions two of whose notifications were held at once.
	most       int
	overlapped []string
	got        map[string][]string // event keys by question, in arrival order
}

func newSlowReceiver(t *testing.T, delay time.Duration) *slowReceiver {
	r := &slowReceiver{t: t, key: []byte("hmac-" + t.Name()), delay: delay, inFlight: map[string]int{}, got: map[string][]string{}}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *slowReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	m, ok := verifiedMessage(r.t, r.key, w, req)
	if !ok {
		return
	}
	name := m.Question.Name
	r.mu.Lock()
	r.inFlight[name]++
	r.total++
	r.most = max(r.most, r.total)
	if r.inFlight[name] > 1 {
		r.overlapped = append(r.overlapped, name)
	}
	r.got[name] = append(r.got[name], strings.Split(m.ID, "/")[1])
	r.mu.Unlock()

	time.Sleep(r.delay)

	r.mu.Lock()
	r.inFlight[name]--
	r.total--
	r.mu.Unlock()
}

func (r *slowReceiver) keys(question string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got[question]...)
}

// A channel sends a few notifications at once, so that one slow round
// trip does not hold up every question behind it; but never two of one
// question, whose notifications still arrive in the order they fell due.
func TestSendsOverlapButAQuestionsNotificationsStayInOrder(t *testing.T) {
	g := NewWithT(t)
	k, ns := setup(t)
	ctx := context.Background()
	hook := newSlowReceiver(t, 400*time.Millisecond)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "slow-hmac", Namespace: ns}, Data: map[string][]byte{"key": hook.key}}
	ch := &hitlv1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: ns}, Spec: hitlv1.NotificationChannelSpec{
		Webhook:   &hitlv1.WebhookChannel{URL: hook.srv.URL + "/hitl", SecretRef: hitlv1.SecretKeyReference{Name: sec.Name}},
		RateLimit: &hitlv1.RateLimit{PerMinute: 6000, Burst: 100},
	}}
	for _, o := range []client.Object{sec, ch} {
		g.Expect(k.Client.Create(ctx, o)).To(Succeed())
	}
	// Each question's four notifications fall due within a second of its
	// ask (reminders at 1, 2 and 3 % of a 30 s window), each before the
	// one before it has been received.
	createPolicy(t, k, ns, "team", hitlv1.NotificationPolicySpec{
		Channels: []string{"slow"}, On: []hitlv1.NotificationEvent{hitlv1.EventAsked, hitlv1.EventReminder},
		Reminders: &hitlv1.Reminders{Percents: []int32{1, 2, 3}},
	})
	runNotifier(t, k, notify.Options{})

	var names []string
	for i := range 4 {
		q := ask(t, k, Question(fmt.Sprintf("q%d", i), ns).Agent("bot").Ask("a", "A?", "yes", "no").Timeout(30*time.Second).Obj())
		names = append(names, q.Name)
	}
	want := []string{"asked", "reminder-1", "reminder-2", "reminder-3"}
	for _, name := range names {
		g.Eventually(func() []string { return hook.keys(name) }, 20*time.Second).Should(HaveLen(len(want)))
	}
	hook.mu.Lock()
	most, overlapped := hook.most, hook.overlapped
	hook.mu.Unlock()
	g.Expect(most).To(BeNumerically(">=", 2), "the channel sent one notification at a time")
	g.Expect(most).To(BeNumerically("<=", 4), "the channel sent more notifications at once than it may")
	g.Expect(overlapped).To(BeEmpty(), "two notifications of one question were sent at once")
	for _, name := range names {
		g.Expect(hook.keys(name)).To(Equal(want), "the notifications of %s", name)
	}
	for _, name := range names {
		g.Eventually(func(g Gomega) string { return notified(g, k, ns, name) }, 10*time.Second).Should(
			Equal(`{"slow":["asked","reminder-1","reminder-2","reminder-3"]}`))
	}
}
