package userquestion

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/controllers/claimreads"
)

// apiCalls is an API server (the fake client) that counts the writes the
// controller sends it and answers its SubjectAccessReviews itself,
// allowing the users in allowed.
type apiCalls struct {
	mu      sync.Mutex
	writes  []string // "<verb> <kind>[/<subresource>] <name>"
	reviews int
	allowed map[string]bool
}

func (a *apiCalls) wrote(verb string, obj client.Object, sub string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	kind := fmt.Sprintf("%T", obj)
	if sub != "" {
		kind += "/" + sub
	}
	a.writes = append(a.writes, verb+" "+kind+" "+obj.GetName())
}

func (a *apiCalls) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writes, a.reviews = nil, 0
}

func (a *apiCalls) counts() ([]string, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.writes...), a.reviews
}

func (a *apiCalls) allow(user string, allowed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.allowed[user] = allowed
}

func (a *apiCalls) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				a.mu.Lock()
				defer a.mu.Unlock()
				a.reviews++
				sar.Status.Allowed = a.allowed[sar.Spec.User]
				return nil
			}
			a.wrote("create", obj, "")
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			a.wrote("update", obj, "")
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			a.wrote("patch", obj, "")
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			a.wrote("delete", obj, "")
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			a.wrote("update", obj, sub)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			a.wrote("patch", obj, sub)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

// refusalScene is a reconciler whose API server is a counting fake, with
// one open question, "q" of agent "bot", asked by "asker" at t0.
type refusalScene struct {
	r   *Reconciler
	api client.Client
	clk *clocktesting.FakeClock
	// calls is what the reconciler sends; api's own writes are not counted.
	calls *apiCalls
	q     *hitlv1.UserQuestion
}

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func newRefusalScene(t *testing.T, q *hitlv1.UserQuestion) *refusalScene {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := hitlv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(q).
		WithStatusSubresource(&hitlv1.UserQuestion{}, &hitlv1.QuestionReply{}).
		WithIndex(&hitlv1.QuestionReply{}, ReplyQuestionIndex, func(o client.Object) []string {
			return []string{o.(*hitlv1.QuestionReply).Spec.QuestionRef.Name}
		}).
		WithIndex(&hitlv1.QuestionClaim{}, claimQuestionIndex, func(o client.Object) []string {
			return []string{o.(*hitlv1.QuestionClaim).Spec.QuestionRef.Name}
		}).Build()
	calls := &apiCalls{allowed: map[string]bool{"alice": true, "asker": true}}
	counted := interceptor.NewClient(api, calls.funcs())
	clk := clocktesting.NewFakeClock(t0.Add(time.Second))
	s := &refusalScene{api: api, clk: clk, calls: calls, q: q,
		r: &Reconciler{Client: counted, APIReader: counted, Clock: clk, Recorder: fakeRecorder{events.NewFakeRecorder(100)},
			claims: newClaimTracker(), ClaimReads: claimreads.New(counted, clk), grants: newGrantCache(), own: newOwnWrites()}}
	// The question's first look writes its Open status.
	s.reconcile(t)
	if st := s.question(t).Status.State; st != hitlv1.StateOpen {
		t.Fatalf("the question is %q after its first look, want Open", st)
	}
	calls.reset()
	return s
}

func (s *refusalScene) reconcile(t *testing.T) {
	t.Helper()
	if _, err := s.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(s.q)}); err != nil {
		t.Fatal(err)
	}
}

func (s *refusalScene) question(t *testing.T) *hitlv1.UserQuestion {
	t.Helper()
	var q hitlv1.UserQuestion
	if err := s.api.Get(context.Background(), client.ObjectKeyFromObject(s.q), &q); err != nil {
		t.Fatal(err)
	}
	return &q
}

func (s *refusalScene) reply(t *testing.T, name string) *hitlv1.QuestionReply {
	t.Helper()
	var r hitlv1.QuestionReply
	if err := s.api.Get(context.Background(), types.NamespacedName{Namespace: s.q.Namespace, Name: name}, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// openQuestion is "q" of agent "bot", asked by "asker" at t0.
func openQuestion() *hitlv1.UserQuestion {
	return &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q", UID: "uid-q", CreationTimestamp: metav1.NewTime(t0)},
		Spec: hitlv1.UserQuestionSpec{Agent: "bot", AskedBy: &hitlv1.UserInfo{Username: "asker"},
			Questions: []hitlv1.Question{{ID: "go", Question: "Go?", Options: []hitlv1.QuestionOption{{Label: "yes"}, {Label: "no"}}}}},
	}
}

// shippedReply is a reply to q as admission and the SDKs write it:
// labelled with its agent and question, owned by q, its author stamped.
func shippedReply(q *hitlv1.UserQuestion, name, author string) *hitlv1.QuestionReply {
	r := &hitlv1.QuestionReply{
		ObjectMeta: metav1.ObjectMeta{Namespace: q.Namespace, Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(t0.Add(time.Second)),
			Labels:            map[string]string{hitlv1.AgentLabel: q.Spec.Agent, hitlv1.QuestionLabel: q.Name}},
		Spec: hitlv1.QuestionReplySpec{QuestionRef: hitlv1.QuestionReference{Name: q.Name},
			Answers:    []hitlv1.AnswerItem{{ID: "go", Selected: []string{"yes"}}},
			AnsweredBy: &hitlv1.UserInfo{Username: author}},
	}
	r.Adopt(q)
	return r
}

// A reply refused for what it is (its author, its question) costs one
// write, its own outcome: no fencing write of the question's status, which
// does not change. A flood of refused replies costs no more than that.
func TestARefusedReplyCostsOneWrite(t *testing.T) {
	cases := []struct {
		name   string
		q      func() *hitlv1.UserQuestion
		reply  func(q *hitlv1.UserQuestion) *hitlv1.QuestionReply
		reason hitlv1.ErrorCode
	}{
		{"an author without the grant: FORBIDDEN", openQuestion,
			func(q *hitlv1.UserQuestion) *hitlv1.QuestionReply { return shippedReply(q, "r", "mallory") }, hitlv1.CodeForbidden},
		{"no author: FORBIDDEN", openQuestion,
			func(q *hitlv1.UserQuestion) *hitlv1.QuestionReply {
				r := shippedReply(q, "r", "alice")
				r.Spec.AnsweredBy = nil
				return r
			}, hitlv1.CodeForbidden},
		{"another agent: AGENT_MISMATCH", openQuestion,
			func(q *hitlv1.UserQuestion) *hitlv1.QuestionReply {
				r := shippedReply(q, "r", "alice")
				r.Labels[hitlv1.AgentLabel] = "other-bot"
				return r
			}, hitlv1.CodeAgentMismatch},
		{"created before its question: NOT_ANSWERABLE", openQuestion,
			func(q *hitlv1.UserQuestion) *hitlv1.QuestionReply {
				r := shippedReply(q, "r", "alice")
				r.CreationTimestamp = metav1.NewTime(t0.Add(-time.Second))
				return r
			}, hitlv1.CodeNotAnswerable},
		{"another question's UID: NOT_ANSWERABLE", openQuestion,
			func(q *hitlv1.UserQuestion) *hitlv1.QuestionReply {
				r := shippedReply(q, "r", "alice")
				r.Spec.QuestionRef.UID = "uid-earlier"
				return r
			}, hitlv1.CodeNotAnswerable},
		{"the asker approving itself: SELF_APPROVAL",
			func() *hitlv1.UserQuestion {
				q := openQuestion()
				q.Spec.Questions[0].Intent = &hitlv1.QuestionIntent{Type: hitlv1.IntentApproval,
					Approval: &hitlv1.ApprovalIntent{Approve: "yes", Reject: "no"}}
				return q
			},
			func(q *hitlv1.UserQuestion) *hitlv1.QuestionReply { return shippedReply(q, "r", "asker") }, hitlv1.CodeSelfApproval},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newRefusalScene(t, tc.q())
			before := s.question(t)
			if err := s.api.Create(context.Background(), tc.reply(before)); err != nil {
				t.Fatal(err)
			}
			s.reconcile(t)
			writes, _ := s.calls.counts()
			if want := []string{"update *v1alpha1.QuestionReply/status r"}; fmt.Sprint(writes) != fmt.Sprint(want) {
				t.Errorf("writes = %q, want only %q", writes, want)
			}
			want := hitlv1.OutcomeRejected
			if tc.reason == hitlv1.CodeNotAnswerable {
				// Made for a question that is gone: final and healthy.
				want = hitlv1.OutcomeClosed
			}
			if st := s.reply(t, "r").Status; st.Outcome != want || st.Reason != tc.reason {
				t.Errorf("reply: %s/%s (%s), want %s/%s", st.Outcome, st.Reason, st.Message, want, tc.reason)
			}
			after := s.question(t)
			if after.ResourceVersion != before.ResourceVersion || after.Status.State != hitlv1.StateOpen {
				t.Errorf("the question was written (resourceVersion %s, then %s) or left Open (%s)", before.ResourceVersion, after.ResourceVersion, after.Status.State)
			}

			s.calls.reset()
			s.reconcile(t)
			if writes, _ := s.calls.counts(); len(writes) != 0 {
				t.Errorf("a second look at the refused reply wrote %q", writes)
			}
		})
	}

	t.Run("a flood of refused replies costs one write each", func(t *testing.T) {
		s := newRefusalScene(t, openQuestion())
		for i := range 20 {
			if err := s.api.Create(context.Background(), shippedReply(s.q, fmt.Sprintf("r%02d", i), "mallory")); err != nil {
				t.Fatal(err)
			}
		}
		s.reconcile(t)
		writes, reviews := s.calls.counts()
		if len(writes) != 20 || reviews != 1 {
			t.Errorf("20 refused replies cost %d writes and %d access reviews, want 20 and 1: %q", len(writes), reviews, writes)
		}
	})
}

// Outcomes that follow from the question's status still fence it: the
// question's status is written (unchanged) before the reply's outcome, so
// that a decision on a stale read fails.
func TestAnOutcomeTheStatusDecidesIsStillFenced(t *testing.T) {
	s := newRefusalScene(t, openQuestion())
	r := shippedReply(s.q, "r", "alice")
	r.Spec.Answers[0].Selected = []string{"maybe"}
	if err := s.api.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	s.reconcile(t)
	writes, _ := s.calls.counts()
	if want := []string{"update *v1alpha1.UserQuestion/status q", "update *v1alpha1.QuestionReply/status r"}; fmt.Sprint(writes) != fmt.Sprint(want) {
		t.Errorf("a BAD_ANSWER cost writes %q, want %q", writes, want)
	}
}

func TestApplyFencesOnlyOutcomesTheStatusDecides(t *testing.T) {
	alone := ReplyChange{Name: "a", Outcome: hitlv1.OutcomeRejected, Reason: hitlv1.CodeForbidden, Alone: true}
	decided := ReplyChange{Name: "b", Outcome: hitlv1.OutcomeRejected, Reason: hitlv1.CodeNotAnswerable}
	for _, tc := range []struct {
		changes []ReplyChange
		want    bool
	}{
		{nil, false},
		{[]ReplyChange{alone}, false},
		{[]ReplyChange{alone, alone}, false},
		{[]ReplyChange{decided}, true},
		{[]ReplyChange{alone, decided}, true},
		{[]ReplyChange{decided, alone}, true},
	} {
		if got := fenced(tc.changes); got != tc.want {
			t.Errorf("fenced(%+v) = %v, want %v", tc.changes, got, tc.want)
		}
	}
}

// A reply deleted and re-created under the name of the reply that settled
// the question is another reply: its author is checked afresh, and it is
// refused, not reported Applied.
func TestAReplyReCreatedUnderTheSettlingReplysNameIsCheckedAfresh(t *testing.T) {
	s := newRefusalScene(t, openQuestion())
	ctx := context.Background()
	if err := s.api.Create(ctx, shippedReply(s.q, "r1", "alice")); err != nil {
		t.Fatal(err)
	}
	s.reconcile(t)
	settled := s.question(t)
	if settled.Status.State != hitlv1.StateSettled || settled.Status.Settlement.ReplyUID != "uid-r1" {
		t.Fatalf("question: %s, settlement %+v; want Settled by r1's UID", settled.Status.State, settled.Status.Settlement)
	}
	if err := s.api.Delete(ctx, s.reply(t, "r1")); err != nil {
		t.Fatal(err)
	}
	again := shippedReply(s.q, "r1", "mallory")
	again.UID = "uid-r1-again"
	again.Spec.Answers[0].Selected = []string{"no"}
	if err := s.api.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	s.calls.reset()
	s.reconcile(t)
	if st := s.reply(t, "r1").Status; st.Outcome != hitlv1.OutcomeRejected || st.Reason != hitlv1.CodeForbidden {
		t.Errorf("the re-created r1: %s/%s (%s), want Rejected/FORBIDDEN", st.Outcome, st.Reason, st.Message)
	}
	if _, reviews := s.calls.counts(); reviews != 1 {
		t.Errorf("%d access reviews for the re-created reply's author, want 1", reviews)
	}
	if after := s.question(t); after.ResourceVersion != settled.ResourceVersion {
		t.Errorf("the settled question's status was written: %+v", after.Status)
	}
}

// One author's refused replies cost one SubjectAccessReview per denialTTL,
// across reconciles and questions of one agent; a grant given meanwhile
// takes effect within denialTTL.
func TestRefusalsAskTheAuthorizerOncePerDenialTTL(t *testing.T) {
	s := newRefusalScene(t, openQuestion())
	ctx := context.Background()
	other := openQuestion()
	other.Name, other.UID = "q2", "uid-q2"
	refuse := func(q *hitlv1.UserQuestion, name string) bool {
		t.Helper()
		refused, err := s.r.refusals(ctx, q, []hitlv1.QuestionReply{*shippedReply(q, name, "mallory")})
		if err != nil {
			t.Fatal(err)
		}
		return refused[name].Code == hitlv1.CodeForbidden
	}
	const n = 30
	for i := range n {
		q := s.q
		if i%2 == 1 {
			q = other
		}
		if !refuse(q, fmt.Sprintf("r%02d", i)) {
			t.Fatalf("reply %d by mallory was not refused", i)
		}
		s.clk.Step(denialTTL / n)
	}
	if _, reviews := s.calls.counts(); reviews != 1 {
		t.Errorf("%d refused replies by one author within %s cost %d access reviews, want 1", n, denialTTL, reviews)
	}

	s.calls.allow("mallory", true)
	s.calls.reset()
	s.clk.Step(denialTTL / n) // past denialTTL since the review
	if refuse(s.q, "granted") {
		t.Errorf("a grant given within denialTTL took no effect after it")
	}
	if _, reviews := s.calls.counts(); reviews != 1 {
		t.Errorf("%d access reviews once the denial expired, want 1", reviews)
	}

	t.Run("another author is asked about on its own", func(t *testing.T) {
		s.calls.reset()
		refused, err := s.r.refusals(ctx, s.q, []hitlv1.QuestionReply{*shippedReply(s.q, "eve-1", "eve")})
		if err != nil {
			t.Fatal(err)
		}
		if _, reviews := s.calls.counts(); reviews != 1 || refused["eve-1"].Code != hitlv1.CodeForbidden {
			t.Errorf("eve: %d reviews, refusal %+v; want 1 review and FORBIDDEN", reviews, refused["eve-1"])
		}
	})
}

// The votes of three approvers whose grants lapsed together are judged
// with their three access reviews asked at once, not one after another.
func TestRefusalsAskDistinctAuthorsAtOnce(t *testing.T) {
	q := openQuestion()
	var inFlight, most atomic.Int32
	allowed := map[string]bool{"alice": true, "bob": true}
	all := make(chan struct{})
	var once sync.Once
	api := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			sar, ok := obj.(*authorizationv1.SubjectAccessReview)
			if !ok {
				return fmt.Errorf("unexpected create of a %T", obj)
			}
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if n == 3 {
				once.Do(func() { close(all) })
			}
			select { // each review waits, a while, for the others
			case <-all:
			case <-time.After(2 * time.Second):
			}
			sar.Status.Allowed = allowed[sar.Spec.User]
			return nil
		},
	})
	r := &Reconciler{Client: api, Clock: clocktesting.NewFakeClock(t0), grants: newGrantCache()}
	replies := []hitlv1.QuestionReply{*shippedReply(q, "a", "alice"), *shippedReply(q, "b", "bob"), *shippedReply(q, "m", "mallory"),
		*shippedReply(q, "a2", "alice")}
	refused, err := r.refusals(context.Background(), q, replies)
	if err != nil {
		t.Fatal(err)
	}
	if got := most.Load(); got != 3 {
		t.Errorf("at most %d access reviews in flight at once, want the 3 authors' together", got)
	}
	if len(refused) != 1 || refused["m"].Code != hitlv1.CodeForbidden {
		t.Errorf("refused %+v, want mallory's reply alone, FORBIDDEN", refused)
	}
}

// A grant past grantRefreshAfter still lets its author's reply through at
// once, and is asked about again in the background: renewed, the author
// never waits for a review while answering question after question;
// revoked, the next reply is refused, before grantTTL.
func TestAGrantIsRefreshedAheadOfItsTTLOffTheReplysPath(t *testing.T) {
	s := newRefusalScene(t, openQuestion())
	ctx := context.Background()
	s.calls.allow("alice", true)
	judge := func(name string) bool {
		t.Helper()
		refused, err := s.r.refusals(ctx, s.q, []hitlv1.QuestionReply{*shippedReply(s.q, name, "alice")})
		if err != nil {
			t.Fatal(err)
		}
		return refused[name].Code == ""
	}
	reviews := func() int { _, n := s.calls.counts(); return n }
	if !judge("r0") || reviews() != 1 {
		t.Fatalf("alice's first reply: %d reviews, want 1 and allowed", reviews())
	}
	s.clk.Step(grantRefreshAfter - time.Millisecond)
	if !judge("r1") || reviews() != 1 {
		t.Fatalf("before grantRefreshAfter: %d reviews, want still 1", reviews())
	}
	s.clk.Step(time.Millisecond)
	// The authorizer now says no; the reply in hand was judged by the grant
	// remembered, the refresh learns of the revocation.
	s.calls.allow("alice", false)
	if !judge("r2") {
		t.Fatal("the reply that started the refresh waited for it, or was refused by it")
	}
	deadline := time.Now().Add(10 * time.Second)
	for reviews() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no refresh was asked: %d reviews", reviews())
		}
		time.Sleep(time.Millisecond)
	}
	for !s.r.grants.denied(grantKey(&hitlv1.UserInfo{Username: "alice"}, s.q.Namespace, s.q.Spec.Agent), s.clk.Now()) {
		if time.Now().After(deadline) {
			t.Fatal("the refresh's denial was not recorded")
		}
		time.Sleep(time.Millisecond)
	}
	if judge("r3") {
		t.Error("alice's reply after the refresh found her grant revoked was let through")
	}
	if n := reviews(); n != 2 {
		t.Errorf("%d reviews, want 2: the refusal reused the refresh's denial", n)
	}
}
