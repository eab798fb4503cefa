package channel_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify/channel"
	. "github.com/hitl-dev/hitl/test/builders"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// settled is a question of release-bot, settled by alice with free text.
func settled() *hitlv1.UserQuestion {
	q := Question("deploy", "team-a").Agent("release-bot").Ask("env", "Where to?", "staging", "prod").
		Ask("notes", "Anything else?").Timeout(time.Minute).Obj()
	q.UID = "uid-1"
	q.CreationTimestamp = metav1.NewTime(t0)
	q.Status.State = hitlv1.StateSettled
	q.Status.Answers = []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}, {ID: "notes", Custom: "ship <it> & go"}}
	q.Status.Settlement = &hitlv1.Settlement{Reply: "r", AnsweredBy: &hitlv1.UserInfo{Username: "alice"}, At: metav1.NewMicroTime(t0.Add(time.Second))}
	return q
}

// voted is settled()'s question still Open under a rule of two approvals
// without veto, alice having approved and bob rejected; its answers are
// left in place to show that quorum progress does not carry them.
func voted() *hitlv1.UserQuestion {
	q := settled()
	q.Status.State, q.Status.Settlement = hitlv1.StateOpen, nil
	q.Status.Approval = &hitlv1.EffectiveApproval{Approvals: 2}
	q.Status.Votes = []hitlv1.Vote{
		{Reply: "r-alice", ReplyUID: "u-alice", By: hitlv1.UserInfo{Username: "alice"}, Choice: hitlv1.VoteApprove,
			Sets: []string{"release/sre"}, At: metav1.NewMicroTime(t0.Add(time.Second))},
		{Reply: "r-bob", ReplyUID: "u-bob", By: hitlv1.UserInfo{Username: "bob"}, Choice: hitlv1.VoteReject, At: metav1.NewMicroTime(t0.Add(2 * time.Second))},
	}
	return q
}

// progress is the QuorumProgress message of voted()'s second vote.
func progress(inboxURL string) *channel.Message {
	q := voted()
	m := channel.NewMessage(q, hitlv1.EventQuorumProgress, "uid-1/vote-u-bob/ops", t0.Add(2*time.Second), inboxURL)
	m.Quorum = channel.QuorumAfter(q, 2)
	return m
}

func TestQuorumAfterTalliesTheVotesSoFar(t *testing.T) {
	q := voted()
	first, second := channel.QuorumAfter(q, 1), channel.QuorumAfter(q, 2)
	if first == nil || first.Tally != "1/2" || first.Approvals != 1 || first.Rejections != 0 || first.Required != 2 ||
		len(first.Votes) != 1 || first.Vote.By != "alice" || first.Vote.Choice != hitlv1.VoteApprove || first.Vote.Sets[0] != "release/sre" {
		t.Errorf("after the first vote: %+v", first)
	}
	if second == nil || second.Tally != "1/2 (1 no)" || second.Rejections != 1 || len(second.Votes) != 2 ||
		second.Vote.By != "bob" || second.Vote.Choice != hitlv1.VoteReject || !second.Vote.At.Equal(t0.Add(2*time.Second)) {
		t.Errorf("after the second vote: %+v", second)
	}
	if channel.QuorumAfter(q, 3) != nil || channel.QuorumAfter(q, 0) != nil {
		t.Error("a quorum after votes that were not counted")
	}
	q.Status.Approval = nil
	if channel.QuorumAfter(q, 1) != nil {
		t.Error("a quorum without a rule")
	}
	if got, want := progress("").Title(), "bob voted Reject on release-bot's question: approvals 1/2 (1 no)"; got != want {
		t.Errorf("title %q, want %q", got, want)
	}
}

func TestMessageCarriesAnswersOnlyWhenSettled(t *testing.T) {
	q := settled()
	for _, ev := range hitlv1.NotificationEvents() {
		m := channel.NewMessage(q, ev, "id", t0, "https://inbox.example.com/")
		body, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		has := strings.Contains(string(body), "ship")
		if has != (ev == hitlv1.EventSettled) {
			t.Errorf("%s: carries the free-text answer: %v, want %v\n%s", ev, has, ev == hitlv1.EventSettled, body)
		}
		if m.Link != "https://inbox.example.com/q/team-a/deploy" {
			t.Errorf("%s: link %q", ev, m.Link)
		}
	}
	// A late reply waiting for admission is not an answer yet.
	q = settled()
	q.Status.State, q.Status.Settlement, q.Status.Answers = hitlv1.StateContinued, nil, nil
	q.Status.QueuedReply = &hitlv1.QueuedReply{Name: "late", Answers: []hitlv1.AnswerItem{{ID: "notes", Custom: "queued secret"}}}
	for _, ev := range hitlv1.NotificationEvents() {
		body, _ := json.Marshal(channel.NewMessage(q, ev, "id", t0, ""))
		if strings.Contains(string(body), "queued secret") {
			t.Errorf("%s carries a queued reply's text: %s", ev, body)
		}
	}
}

func TestSensitiveAnswersAreNeverSent(t *testing.T) {
	q := settled()
	q.Spec.Questions = append(q.Spec.Questions, hitlv1.Question{ID: "token", Question: "Token?", Sensitive: true})
	q.Status.Answers = append(q.Status.Answers, hitlv1.AnswerItem{ID: "token", Sealed: "U0VBTEVEVEVYVA"})
	m := channel.NewMessage(q, hitlv1.EventSettled, "id", t0, "")
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), "U0VBTEVEVEVYVA") || !strings.Contains(string(body), `{"id":"token","sensitive":true}`) {
		t.Errorf("the webhook body carries the sealed text, or does not say the answer was given: %s", body)
	}
	email, err := channel.EmailMessage(m, "hitl@example.com", []string{"ops@example.com"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	slack, _ := json.Marshal(channel.SlackPayload(m, t0))
	teams, _ := json.Marshal(channel.TeamsPayload(m, t0))
	for name, text := range map[string]string{"email": string(email), "slack": string(slack), "teams": string(teams)} {
		if strings.Contains(text, "U0VBTEVEVEVYVA") || !strings.Contains(text, "(sensitive answer given)") {
			t.Errorf("%s: %s", name, text)
		}
	}
}

// receiver is a webhook receiver that verifies each request's signature
// and answers with the statuses of fail first.
type receiver struct {
	key  []byte
	mu   sync.Mutex
	got  []channel.Message
	bad  []string
	fail []int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fail) > 0 {
		code := r.fail[0]
		r.fail = r.fail[1:]
		w.WriteHeader(code)
		return
	}
	if err := channel.Verify(r.key, req.Header.Get(channel.SignatureHeader), body, time.Now(), channel.DefaultTolerance); err != nil {
		r.bad = append(r.bad, err.Error())
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var m channel.Message
	if err := json.Unmarshal(body, &m); err != nil {
		r.bad = append(r.bad, err.Error())
	}
	if req.Header.Get(channel.DeliveryHeader) != m.ID || req.Header.Get(channel.EventHeader) != string(m.Event) {
		r.bad = append(r.bad, "headers disagree with the body")
	}
	r.got = append(r.got, m)
}

func TestWebhookSignsAndTheReceiverVerifies(t *testing.T) {
	r := &receiver{key: []byte("s3cret")}
	srv := httptest.NewServer(r)
	defer srv.Close()
	w := &channel.Webhook{URL: srv.URL + "/hook", Key: r.key}
	m := channel.NewMessage(settled(), hitlv1.EventAsked, "uid-1/asked/ops", t0, "https://inbox")
	if err := w.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if len(r.got) != 1 || len(r.bad) > 0 {
		t.Fatalf("got %d, refused %v", len(r.got), r.bad)
	}
	g := r.got[0]
	if g.Version != channel.SchemaVersion || g.ID != "uid-1/asked/ops" || g.Question.Agent != "release-bot" ||
		g.Question.Deadline == nil || !g.Question.Deadline.Equal(t0.Add(time.Minute)) || len(g.Question.Items) != 2 ||
		g.Question.Items[0].Options[1] != "prod" || g.Link != "https://inbox/q/team-a/deploy" {
		t.Errorf("the receiver read %+v", g)
	}

	// With another key, the receiver refuses it, and a 401 is not retried.
	w.Key = []byte("other")
	err := channel.DefaultRetry.Do(context.Background(), func(ctx context.Context) error { return w.Send(ctx, m) }, nil)
	if err == nil || channel.Transient(err) || len(r.bad) != 1 || !strings.Contains(r.bad[0], "no signature matches") {
		t.Errorf("a wrong key: err %v, refused %v", err, r.bad)
	}
}

func TestWebhookBodyCarriesTheTallyAndTheVotes(t *testing.T) {
	r := &receiver{key: []byte("s3cret")}
	srv := httptest.NewServer(r)
	defer srv.Close()
	m := progress("https://inbox")
	body, _ := json.Marshal(m)
	if strings.Contains(string(body), "ship") || strings.Contains(string(body), `"settlement"`) {
		t.Errorf("quorum progress carries an answer: %s", body)
	}
	if err := (&channel.Webhook{URL: srv.URL, Key: r.key}).Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if len(r.got) != 1 || len(r.bad) > 0 {
		t.Fatalf("got %d, refused %v", len(r.got), r.bad)
	}
	g := r.got[0]
	if g.Event != hitlv1.EventQuorumProgress || g.Quorum == nil || g.Quorum.Tally != "1/2 (1 no)" || g.Quorum.Required != 2 ||
		g.Quorum.Vote.By != "bob" || len(g.Quorum.Votes) != 2 || g.Quorum.Votes[0].By != "alice" || g.Quorum.Votes[0].Choice != hitlv1.VoteApprove {
		t.Errorf("the receiver read %+v", g.Quorum)
	}
	// Every other event leaves quorum out.
	for _, ev := range hitlv1.NotificationEvents() {
		if body, _ := json.Marshal(channel.NewMessage(voted(), ev, "id", t0, "")); strings.Contains(string(body), `"quorum"`) {
			t.Errorf("%s carries a quorum: %s", ev, body)
		}
	}
}

func TestVerifyRefusesReplaysAndTampering(t *testing.T) {
	key, body := []byte("k"), []byte(`{"id":"x"}`)
	sig := channel.Sign(key, t0, body)
	if err := channel.Verify(key, sig, body, t0.Add(time.Minute), channel.DefaultTolerance); err != nil {
		t.Errorf("a fresh signature: %v", err)
	}
	if err := channel.Verify(key, sig, body, t0.Add(10*time.Minute), channel.DefaultTolerance); err == nil {
		t.Error("a replay 10 minutes later was accepted")
	}
	if err := channel.Verify(key, sig, []byte(`{"id":"y"}`), t0, channel.DefaultTolerance); err == nil {
		t.Error("a tampered body was accepted")
	}
	// The time is signed too: moving it breaks the signature.
	moved := strings.Replace(sig, "t=", "t=1", 1)
	if err := channel.Verify(key, moved, body, time.Unix(0, 0), 1<<62); err == nil {
		t.Error("a moved time was accepted")
	}
}

func TestRetryRetriesTransientFailuresBounded(t *testing.T) {
	r := &receiver{key: []byte("k"), fail: []int{500, 503, 429}}
	srv := httptest.NewServer(r)
	defer srv.Close()
	w := &channel.Webhook{URL: srv.URL, Key: r.key}
	retry := channel.Retry{Attempts: 4, Base: time.Millisecond, Max: 5 * time.Millisecond}
	var retried []int
	m := channel.NewMessage(settled(), hitlv1.EventAsked, "id", t0, "")
	if err := retry.Do(context.Background(), func(ctx context.Context) error { return w.Send(ctx, m) }, func(n int, err error) {
		retried = append(retried, n)
	}); err != nil {
		t.Fatal(err)
	}
	if len(r.got) != 1 || len(retried) != 3 {
		t.Errorf("delivered %d after retries %v", len(r.got), retried)
	}

	// Always failing: given up after Attempts.
	r.fail = []int{500, 500, 500, 500, 500}
	err := retry.Do(context.Background(), func(ctx context.Context) error { return w.Send(ctx, m) }, nil)
	if err == nil || !strings.Contains(err.Error(), "giving up after 4 attempts") || len(r.fail) != 1 {
		t.Errorf("err %v, %d failures left", err, len(r.fail))
	}
}

func TestWebhookTimeoutIsTransient(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			time.Sleep(300 * time.Millisecond)
		}
	}))
	defer srv.Close()
	w := &channel.Webhook{URL: srv.URL, Key: []byte("k"), Client: channel.NewHTTPClient(100 * time.Millisecond)}
	m := channel.NewMessage(settled(), hitlv1.EventAsked, "id", t0, "")
	retry := channel.Retry{Attempts: 3, Base: time.Millisecond, Max: time.Millisecond}
	if err := retry.Do(context.Background(), func(ctx context.Context) error { return w.Send(ctx, m) }, nil); err != nil {
		t.Fatalf("a timeout then success: %v", err)
	}
	if calls.Load() != 2 {
		t.Errorf("%d calls", calls.Load())
	}
}

func TestWebhookDoesNotFollowRedirects(t *testing.T) {
	var followed atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed.Store(true) }))
	defer target.Close()
	srv := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	defer srv.Close()
	err := (&channel.Webhook{URL: srv.URL, Key: []byte("k")}).Send(context.Background(), channel.NewMessage(settled(), hitlv1.EventAsked, "id", t0, ""))
	if err == nil || channel.Transient(err) || followed.Load() {
		t.Errorf("err %v, followed %v", err, followed.Load())
	}
}
