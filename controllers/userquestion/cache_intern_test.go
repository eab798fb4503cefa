package userquestion

import (
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func TestTrimForCacheDropsQuestionLabelsAndTheAuthorOfFinalReplies(t *testing.T) {
	q := &aQuestion().q
	q.Labels = map[string]string{hitlv1.AgentLabel: "bench"}
	out, _ := trimForCache(q)
	if l := out.(*hitlv1.UserQuestion).Labels; l != nil {
		t.Errorf("a cached question keeps its labels %v", l)
	}
	for _, outcome := range []hitlv1.ReplyOutcome{"", hitlv1.OutcomeQueued, hitlv1.OutcomeApplied, hitlv1.OutcomeRejected} {
		r := cachedReply(outcome)
		r.Spec.AnsweredBy = &hitlv1.UserInfo{Username: "alice", Groups: []string{"devs"}}
		out, _ := trimForCache(r)
		got := out.(*hitlv1.QuestionReply).Spec.AnsweredBy
		if final := finalOutcome(outcome); final != (got == nil) {
			t.Errorf("outcome %q: author %v kept: %v, want kept only while the outcome is not final", outcome, got, got != nil)
		}
	}
}

func TestTrimForCacheSharesRepeatedStringsAndChangesNoValue(t *testing.T) {
	mk := func() (*hitlv1.UserQuestion, *hitlv1.QuestionReply) {
		q := &aQuestion().q
		q.Namespace = string([]byte("agents")) // a fresh copy of the bytes, as a decoder makes
		q.Status.State = hitlv1.StateSettled
		q.Status.Answers = []hitlv1.AnswerItem{{ID: "color", Selected: []string{"red"}}}
		q.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Settled", Message: "Settled by reply r"}}
		q.Status.Settlement = &hitlv1.Settlement{Reply: "r", AnsweredBy: &hitlv1.UserInfo{Username: "alice", Groups: []string{"devs", "system:authenticated"}}}
		r := cachedReply("")
		r.Namespace = string([]byte("agents"))
		r.Labels = map[string]string{hitlv1.AgentLabel: "bench", hitlv1.QuestionLabel: "q"}
		r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "hitl.dev/v1alpha1", Kind: "UserQuestion", Name: "q", UID: "u"}}
		r.Spec.AnsweredBy = &hitlv1.UserInfo{Username: "alice", Groups: []string{"devs"}}
		return q, r
	}
	q1, r1 := mk()
	q2, r2 := mk()
	wantQ, wantR := q1.DeepCopy(), r1.DeepCopy()
	wantQ.Labels = nil
	// The digest of the whole spec, text included, taken before the text
	// goes.
	wantQ.Status.SpecDigest = hitlv1.SpecDigest(&q1.Spec)
	wantQ.Spec.Questions[0].Question = "" // the cache keeps no text (see dropText)
	wantR.ManagedFields = nil
	delete(wantR.Annotations, lastAppliedAnnotation)
	for _, o := range []any{q1, r1, q2, r2} {
		if _, err := trimForCache(o); err != nil {
			t.Fatal(err)
		}
	}
	if !equality.Semantic.DeepEqual(q1, wantQ) || !equality.Semantic.DeepEqual(r1, wantR) {
		t.Errorf("interning changed a value:\n%+v\n%+v", q1, r1)
	}
	same := func(what, a, b string) {
		t.Helper()
		if unsafe.StringData(a) != unsafe.StringData(b) {
			t.Errorf("%s: %q not shared between the cached objects", what, a)
		}
	}
	same("namespace", q1.Namespace, q2.Namespace)
	same("reply namespace", r1.Namespace, q2.Namespace)
	same("state", string(q1.Status.State), string(q2.Status.State))
	same("condition reason", q1.Status.Conditions[0].Reason, q2.Status.Conditions[0].Reason)
	same("settler", q1.Status.Settlement.AnsweredBy.Username, q2.Status.Settlement.AnsweredBy.Username)
	same("group", q1.Status.Settlement.AnsweredBy.Groups[1], q2.Status.Settlement.AnsweredBy.Groups[1])
	same("owner kind", r1.OwnerReferences[0].Kind, r2.OwnerReferences[0].Kind)
	same("agent label", r1.Labels[hitlv1.AgentLabel], r2.Labels[hitlv1.AgentLabel])
	same("author", r1.Spec.AnsweredBy.Username, r2.Spec.AnsweredBy.Username)
}
