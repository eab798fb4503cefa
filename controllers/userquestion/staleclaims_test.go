package userquestion

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/controllers/claimreads"
)

// staleClaims is a cache that missed every QuestionClaim change after it
// was made: its watch broke (an API server restart) or lags.
type staleClaims struct {
	client.Client
	claims hitlv1.QuestionClaimList
}

func (s *staleClaims) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*hitlv1.QuestionClaimList); ok {
		s.claims.DeepCopyInto(l)
		return nil
	}
	return s.Client.List(ctx, list, opts...)
}

// A chaos run closed a window while its claim was live: the API server had
// restarted, the manager's cache had not seen the last renewals, and it
// judged the claim expired. Before it closes the window of a claimed
// question the controller reads the claims from the API server, and a
// renewal its cache missed keeps the window open.
func TestWindowStaysOpenForARenewalTheCacheMissed(t *testing.T) {
	for _, sawClaim := range []bool{true, false} {
		t.Run(map[bool]string{true: "renewals missed", false: "claim never seen"}[sawClaim], func(t *testing.T) {
			testWindowStaysOpen(t, sawClaim)
		})
	}
}

func testWindowStaysOpen(t *testing.T, sawClaim bool) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	asked := metav1.NewMicroTime(clk.Now())
	q := &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q", Labels: map[string]string{hitlv1.AgentLabel: "bot"}},
		Spec: hitlv1.UserQuestionSpec{Agent: "bot", AskedAt: &asked, Timeout: &metav1.Duration{Duration: 5 * time.Second},
			Questions: []hitlv1.Question{{ID: "go", Question: "Go?", Options: []hitlv1.QuestionOption{{Label: "yes"}, {Label: "no"}}}}},
	}
	claim := &hitlv1.QuestionClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q-claim-1"},
		Spec: hitlv1.QuestionClaimSpec{QuestionRef: hitlv1.QuestionReference{Name: "q"}, Agent: "bot",
			Holder: &hitlv1.UserInfo{Username: "alice"}, DurationSeconds: 6, RenewTime: &asked},
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := hitlv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	api := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(q, claim).WithStatusSubresource(&hitlv1.UserQuestion{}, &hitlv1.QuestionReply{}).
		WithIndex(&hitlv1.QuestionReply{}, ReplyQuestionIndex, func(o client.Object) []string {
			return []string{o.(*hitlv1.QuestionReply).Spec.QuestionRef.Name}
		}).Build()
	cache := &staleClaims{Client: api}
	if sawClaim {
		if err := api.List(ctx, &cache.claims); err != nil {
			t.Fatal(err)
		}
	}
	r := &Reconciler{Client: cache, APIReader: api, Clock: clk, Recorder: fakeRecorder{events.NewFakeRecorder(100)},
		claims: newClaimTracker(), ClaimReads: claimreads.New(api, clk), grants: newGrantCache(), own: newOwnWrites()}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "q"}}
	reconcile := func() hitlv1.QuestionState {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		var got hitlv1.UserQuestion
		if err := api.Get(ctx, req.NamespacedName, &got); err != nil {
			t.Fatal(err)
		}
		return got.Status.State
	}
	if s := reconcile(); s != hitlv1.StateOpen {
		t.Fatalf("a claimed question is %s at first", s)
	}
	// The answerer renews every 2 s; the cache sees none of it.
	for range 4 {
		clk.Step(2 * time.Second)
		var c hitlv1.QuestionClaim
		if err := api.Get(ctx, client.ObjectKeyFromObject(claim), &c); err != nil {
			t.Fatal(err)
		}
		c.Spec.RenewTime = ptr.To(metav1.NewMicroTime(clk.Now()))
		if err := api.Update(ctx, &c); err != nil {
			t.Fatal(err)
		}
	}
	// 8 s in: past the deadline (5 s) and past the claim's expiry as the
	// cache knows it (6 s), but renewed 0 s ago.
	if s := reconcile(); s != hitlv1.StateOpen {
		t.Fatalf("the window closed (%s) while its claim was renewed, because the cache missed the renewals", s)
	}
	// The cache catches up (its watch resumes); once the claim really
	// expires, unrenewed, the window closes.
	if err := api.List(ctx, &cache.claims); err != nil {
		t.Fatal(err)
	}
	clk.Step(7 * time.Second)
	if s := reconcile(); s != hitlv1.StateContinued {
		t.Fatalf("the window did not close after the claim expired: %s", s)
	}
}

// countingReader counts the lists of claims it passes on.
type countingReader struct {
	client.Reader
	claimLists int
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*hitlv1.QuestionClaimList); ok {
		c.claimLists++
	}
	return c.Reader.List(ctx, list, opts...)
}

// Windows sharing a deadline share one read of the claims, sent after the
// deadline; a claim the cache missed still holds its window, and a window
// closes at the time the read it used was sent.
func TestWindowsSharingADeadlineShareOneReadOfTheClaims(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	asked := metav1.NewMicroTime(clk.Now())
	question := func(name string) *hitlv1.UserQuestion {
		return &hitlv1.UserQuestion{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{hitlv1.AgentLabel: "bot"}},
			Spec: hitlv1.UserQuestionSpec{Agent: "bot", AskedAt: &asked, Timeout: &metav1.Duration{Duration: 5 * time.Second},
				Questions: []hitlv1.Question{{ID: "go", Question: "Go?", Options: []hitlv1.QuestionOption{{Label: "yes"}, {Label: "no"}}}}},
		}
	}
	claim := &hitlv1.QuestionClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claimed-claim-1"},
		Spec: hitlv1.QuestionClaimSpec{QuestionRef: hitlv1.QuestionReference{Name: "claimed"}, Agent: "bot",
			Holder: &hitlv1.UserInfo{Username: "alice"}, DurationSeconds: 30},
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := hitlv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	api := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(question("a"), question("b"), question("claimed"), claim).
		WithStatusSubresource(&hitlv1.UserQuestion{}, &hitlv1.QuestionReply{}).
		WithIndex(&hitlv1.QuestionReply{}, ReplyQuestionIndex, func(o client.Object) []string {
			return []string{o.(*hitlv1.QuestionReply).Spec.QuestionRef.Name}
		}).Build()
	reader := &countingReader{Reader: api}
	r := &Reconciler{Client: &staleClaims{Client: api}, APIReader: reader, Clock: clk, Recorder: fakeRecorder{events.NewFakeRecorder(100)},
		claims: newClaimTracker(), ClaimReads: claimreads.New(reader, clk), grants: newGrantCache(), own: newOwnWrites()}
	reconcile := func(name string) *hitlv1.UserQuestion {
		t.Helper()
		req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		var got hitlv1.UserQuestion
		if err := api.Get(ctx, req.NamespacedName, &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}

	clk.Step(5*time.Second + 10*time.Millisecond) // just past the shared deadline
	readAt := clk.Now()
	if q := reconcile("a"); q.Status.State != hitlv1.StateContinued || !q.Status.ContinuedAt.Time.Equal(readAt) {
		t.Fatalf("a: %s, continued at %v, want Continued at %v", q.Status.State, q.Status.ContinuedAt, readAt)
	}
	clk.Step(300 * time.Millisecond)
	if q := reconcile("b"); q.Status.State != hitlv1.StateContinued || !q.Status.ContinuedAt.Time.Equal(readAt) {
		t.Fatalf("b: %s, continued at %v, want Continued at %v, the time of the read it shared", q.Status.State, q.Status.ContinuedAt, readAt)
	}
	if reader.claimLists != 1 {
		t.Fatalf("%d reads of the claims for two windows sharing a deadline, want 1", reader.claimLists)
	}
	// The cache never saw this one's claim: the shared read has it, and a
	// read sent now confirms it.
	if q := reconcile("claimed"); q.Status.State != hitlv1.StateOpen || q.Status.ClaimCount != 1 {
		t.Fatalf("claimed: %s with %d claims, want Open, held by the claim the cache missed", q.Status.State, q.Status.ClaimCount)
	}
	if reader.claimLists != 2 {
		t.Errorf("%d reads of the claims, want a second one, sent once the shared one showed a claim", reader.claimLists)
	}
}

// fakeRecorder records Events in memory and holds none back.
type fakeRecorder struct{ *events.FakeRecorder }

func (fakeRecorder) Pending(types.UID) bool { return false }
func (fakeRecorder) Wake()                  {}
