package v1alpha1_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func question(ns, name string, created int64, state hitlv1.QuestionState, settledAt int64) hitlv1.UserQuestion {
	q := hitlv1.UserQuestion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.Unix(created, 0)}}
	q.Status.State = state
	if settledAt != 0 {
		q.Status.Settlement = &hitlv1.Settlement{At: metav1.NewMicroTime(time.Unix(settledAt, 0))}
	}
	return q
}

func names(items []hitlv1.UserQuestion) string {
	var out []string
	for _, q := range items {
		out = append(out, q.Namespace+"/"+q.Name)
	}
	return strings.Join(out, " ")
}

func TestStateOfANewQuestionIsOpen(t *testing.T) {
	q := question("ns", "a", 1, "", 0)
	if q.State() != hitlv1.StateOpen || q.LeftOpen() || !q.Active() {
		t.Errorf("a question without a state: State() = %q, LeftOpen() = %v, Active() = %v; want Open, false, true", q.State(), q.LeftOpen(), q.Active())
	}
	for _, s := range []hitlv1.QuestionState{hitlv1.StateContinued, hitlv1.StateSettled, hitlv1.StateCancelled} {
		q.Status.State = s
		if q.State() != s || !q.LeftOpen() {
			t.Errorf("State() of a %s question = %q, LeftOpen() = %v", s, q.State(), q.LeftOpen())
		}
		if q.Active() != (s == hitlv1.StateContinued) {
			t.Errorf("Active() of a %s question = %v", s, q.Active())
		}
	}
}

func TestViews(t *testing.T) {
	items := []hitlv1.UserQuestion{
		question("b", "late", 30, hitlv1.StateSettled, 40),
		question("a", "x2", 20, "", 0),
		question("a", "cancelled", 5, hitlv1.StateCancelled, 0),
		question("a", "x1", 20, hitlv1.StateContinued, 0),
		question("a", "first", 10, hitlv1.StateOpen, 0),
		question("b", "x1", 20, hitlv1.StateOpen, 0),
		question("a", "early", 50, hitlv1.StateSettled, 35),
		question("a", "tie", 1, hitlv1.StateSettled, 40),
	}
	before := names(items)
	active, settled := hitlv1.Views(items)
	if got, want := names(active), "a/first a/x1 a/x2 b/x1"; got != want {
		t.Errorf("active (ask order) = %s, want %s", got, want)
	}
	if got, want := names(settled), "a/early a/tie b/late"; got != want {
		t.Errorf("settled (settlement order) = %s, want %s", got, want)
	}
	if names(items) != before {
		t.Errorf("Views reordered its input: %s", names(items))
	}
}

func TestReplyOrder(t *testing.T) {
	reply := func(name string, created int64) hitlv1.QuestionReply {
		return hitlv1.QuestionReply{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Unix(created, 0)}}
	}
	items := []hitlv1.QuestionReply{reply("c", 2), reply("b", 2), reply("z", 1), reply("a", 3)}
	hitlv1.SortReplyOrder(items)
	var got []string
	for _, r := range items {
		got = append(got, r.Name)
	}
	if want := []string{"z", "b", "c", "a"}; !slices.Equal(got, want) {
		t.Errorf("reply order = %v, want %v", got, want)
	}
}

func TestClaimLeaseBounds(t *testing.T) {
	for _, c := range []struct {
		in   *int32
		want time.Duration
	}{
		{nil, 5 * time.Second},
		{ptr.To[int32](-7), 5 * time.Second},
		{ptr.To[int32](0), 5 * time.Second},
		{ptr.To[int32](5), 5 * time.Second},
		{ptr.To[int32](42), 42 * time.Second},
		{ptr.To[int32](300), 300 * time.Second},
		{ptr.To[int32](301), 300 * time.Second},
		{ptr.To[int32](1 << 30), 300 * time.Second},
	} {
		claim := &hitlv1.QuestionClaim{Spec: hitlv1.QuestionClaimSpec{DurationSeconds: ptr.Deref(c.in, 0)}}
		if got := hitlv1.ClaimDuration(claim); got != c.want {
			t.Errorf("ClaimDuration(%v) = %v, want %v", ptr.Deref(c.in, -1), got, c.want)
		}
	}
}

func TestTruncateMessage(t *testing.T) {
	short := strings.Repeat("a", hitlv1.MaxMessageLength)
	if hitlv1.TruncateMessage(short) != short {
		t.Error("a message of exactly the limit was cut")
	}
	long := strings.Repeat("a", hitlv1.MaxMessageLength-1) + "é" + "tail"
	got := hitlv1.TruncateMessage(long)
	if len(got) > hitlv1.MaxMessageLength || !utf8.ValidString(got) || !strings.HasPrefix(long, got) {
		t.Errorf("TruncateMessage cut to %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
	if len(got) != hitlv1.MaxMessageLength-1 {
		t.Errorf("TruncateMessage kept %d bytes, want the %d before the split character", len(got), hitlv1.MaxMessageLength-1)
	}
}

// The CRD's markers cannot name Go constants; this keeps the generated
// schema's limit on a reply's status.message and MaxMessageLength one rule.
func TestReplyMessageLimitMatchesTheCRD(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "hitl.dev_questionreplies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Properties map[string]struct {
								MaxLength *int `json:"maxLength"`
							} `json:"properties"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) == 0 {
		t.Fatal("the CRD has no versions")
	}
	got := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["message"].MaxLength
	if got == nil || *got != hitlv1.MaxMessageLength {
		t.Errorf("status.message maxLength = %v, want %d", got, hitlv1.MaxMessageLength)
	}
}

func TestErrorCodes(t *testing.T) {
	codes := hitlv1.ErrorCodes()
	if len(codes) != 17 {
		t.Fatalf("ErrorCodes() has %d codes, want the 9 of the specification, ASK_ABORTED, and the 7 of its amendments (NOT_OWNER, SELF_APPROVAL, POLICY_WEAKENED, DUPLICATE_VOTE, QUESTION_CHANGED, BAD_NOTIFICATION, BAD_INPUT)", len(codes))
	}
	for _, c := range codes {
		if !c.Known() {
			t.Errorf("%s is not Known", c)
		}
	}
	if hitlv1.ErrorCode("BAD_ANSWERS").Known() || hitlv1.ErrorCode("").Known() {
		t.Error("an unknown code is Known")
	}
	for _, c := range []struct {
		msg, rest string
		code      hitlv1.ErrorCode
	}{
		{"BAD_ANSWER: question q1: x (spec.answers[0])", "question q1: x (spec.answers[0])", hitlv1.CodeBadAnswer},
		{`admission webhook "v.hitl.dev" denied the request: REPLY_QUEUED: reply r is queued`, "reply r is queued", hitlv1.CodeReplyQueued},
		{`spec.timeout: Invalid value: "0s": BAD_TIMEOUT: must be positive`, "must be positive", hitlv1.CodeBadTimeout},
		{"NOPE: BAD_ANSWER", "", ""},
		{"bad_answer: lower case", "", ""},
		{"the BAD_ANSWER: in the middle of a word", "", ""},
		{"", "", ""},
	} {
		code, rest, ok := hitlv1.CodeOfMessage(c.msg)
		if code != c.code || rest != c.rest || ok != (c.code != "") {
			t.Errorf("CodeOfMessage(%q) = %q, %q, %v; want %q, %q", c.msg, code, rest, ok, c.code, c.rest)
		}
	}
}

func TestFinishedAt(t *testing.T) {
	stalled := func(at int64, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: hitlv1.ConditionStalled, Status: status, LastTransitionTime: metav1.Unix(at, 0)}
	}
	for _, c := range []struct {
		name       string
		state      hitlv1.QuestionState
		settledAt  int64
		conditions []metav1.Condition
		want       int64
		ok         bool
	}{
		{name: "open", state: hitlv1.StateOpen},
		{name: "continued, with a Stalled condition", state: hitlv1.StateContinued, conditions: []metav1.Condition{stalled(5, metav1.ConditionTrue)}},
		{name: "settled", state: hitlv1.StateSettled, settledAt: 7, want: 7, ok: true},
		{name: "cancelled", state: hitlv1.StateCancelled, conditions: []metav1.Condition{stalled(9, metav1.ConditionTrue)}, want: 9, ok: true},
		{name: "cancelled, Stalled not True yet", state: hitlv1.StateCancelled, conditions: []metav1.Condition{stalled(9, metav1.ConditionFalse)}},
		{name: "cancelled, no condition yet", state: hitlv1.StateCancelled},
	} {
		q := question("ns", "a", 1, c.state, c.settledAt)
		q.Status.Conditions = c.conditions
		at, ok := q.FinishedAt()
		if ok != c.ok || (ok && !at.Equal(time.Unix(c.want, 0))) {
			t.Errorf("%s: FinishedAt() = %v, %v; want %v, %v", c.name, at, ok, time.Unix(c.want, 0), c.ok)
		}
		if sat, sok := q.Status.FinishedAt(); sok != ok || !sat.Equal(at) {
			t.Errorf("%s: the status's FinishedAt() = %v, %v; the question's %v, %v", c.name, sat, sok, at, ok)
		}
	}
}
