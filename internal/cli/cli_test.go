package cli

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/test/builders"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (run go test ./internal/cli -update to create it): %v", path, err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update if the change is intended):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func at(q *hitlv1.UserQuestion, created time.Time) *hitlv1.UserQuestion {
	q.CreationTimestamp = metav1.NewTime(created)
	return q
}

func timedOpen() *hitlv1.UserQuestion {
	q := at(builders.Question("deploy", "agents").Agent("release-bot").
		Ask("env", "Where should I deploy?", "staging", "prod").Ask("notes", "Anything for the notes?").
		Timeout(90*time.Second).Obj(), t0)
	q.Spec.Questions[0].Header = "Target"
	q.Spec.Questions[0].Options[1].Description = "customers see it at once"
	deadline := metav1.NewMicroTime(t0.Add(90 * time.Second))
	q.Status = hitlv1.UserQuestionStatus{State: hitlv1.StateOpen, Deadline: &deadline,
		Claims: []hitlv1.ClaimHolder{{Name: "deploy-claim-x", Holder: "alice"}}}
	return q
}

func settledLate() *hitlv1.UserQuestion {
	q := at(builders.Question("lunch", "agents").Agent("office-bot").Ask("food", "What for lunch?", "pizza", "sushi").Multi().
		Timeout(3*time.Second).Obj(), t0.Add(-time.Hour))
	q.Status = hitlv1.UserQuestionStatus{State: hitlv1.StateSettled,
		Answers:    []hitlv1.AnswerItem{{ID: "food", Selected: []string{"pizza"}, Custom: "and lemonade"}},
		Settlement: &hitlv1.Settlement{Reply: "lunch-bob", Late: true, At: metav1.NewMicroTime(t0.Add(-30 * time.Minute)), AnsweredBy: &hitlv1.UserInfo{Username: "bob"}}}
	return q
}

func continuedQueued() *hitlv1.UserQuestion {
	q := at(builders.Question("access", "agents").Agent("release-bot").Ask("a", "May I read the secrets?", "Allow", "Deny").
		Approval("Allow", "Deny", "").Obj(), t0.Add(-2*time.Minute))
	q.Status = hitlv1.UserQuestionStatus{State: hitlv1.StateContinued,
		QueuedReply: &hitlv1.QueuedReply{Name: "access-carol", Answers: []hitlv1.AnswerItem{{ID: "a", Selected: []string{"Deny"}}},
			AnsweredBy: &hitlv1.UserInfo{Username: "carol"}, QueuedAt: metav1.NewMicroTime(t0.Add(-time.Minute))}}
	return q
}

func TestPrintCard(t *testing.T) {
	for name, q := range map[string]*hitlv1.UserQuestion{
		"card-timed-open.golden":       timedOpen(),
		"card-settled-late.golden":     settledLate(),
		"card-continued-queued.golden": continuedQueued(),
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			printCard(&out, q, t0.Add(30*time.Second))
			golden(t, name, out.String())
		})
	}
}

func TestWriteList(t *testing.T) {
	early := at(builders.Question("first", "agents").Agent("bot").Ask("q", "Q?").Obj(), t0.Add(-time.Hour))
	items := []hitlv1.UserQuestion{*settledLate(), *timedOpen(), *continuedQueued(), *early}
	var out bytes.Buffer
	writeList(&out, items, tableStyle{allNamespaces: true}, "", t0.Add(30*time.Second))
	golden(t, "list-all.golden", out.String())
}

func TestBatchFromFlags(t *testing.T) {
	q := timedOpen()
	got, err := batchFromFlags(q, []string{"env=prod"}, nil, nil)
	want := []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}, {ID: "notes"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("an unnamed question is skipped: got %v, %v", got, err)
	}
	got, err = batchFromFlags(q, []string{"env=staging"}, []string{"notes=ship it"}, nil)
	want = []hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}, {ID: "notes", Custom: "ship it"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("select and custom: got %v, %v", got, err)
	}
	if _, err := batchFromFlags(q, []string{"nope=x"}, nil, nil); !strings.HasPrefix(err.Error(), "BAD_ANSWER: question nope") {
		t.Errorf("an unknown id is BAD_ANSWER naming it, got %v", err)
	}
	if _, err := batchFromFlags(q, []string{"env"}, nil, nil); err == nil {
		t.Error("--select without labels must fail")
	}
}

func TestDecision(t *testing.T) {
	approval := continuedQueued()
	plan := builders.Question("plan", "ns").Ask("p", "Run it?", "Revise", "Ship it").Detail("1. go").PlanReview("Ship it").Ask("why", "Why?").Obj()
	cases := []struct {
		name    string
		q       *hitlv1.UserQuestion
		approve bool
		option  string
		want    []hitlv1.AnswerItem
	}{
		{"approve an approval", approval, true, "", []hitlv1.AnswerItem{{ID: "a", Selected: []string{"Allow"}}}},
		{"deny an approval", approval, false, "", []hitlv1.AnswerItem{{ID: "a", Selected: []string{"Deny"}}}},
		{"approve a plan, skipping the rest", plan, true, "", []hitlv1.AnswerItem{{ID: "p", Selected: []string{"Ship it"}}, {ID: "why"}}},
		{"deny a plan with its first declining option", plan, false, "", []hitlv1.AnswerItem{{ID: "p", Selected: []string{"Revise"}}, {ID: "why"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decision(c.q, c.approve, false, c.option)
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
			if err := validation.ValidateAnswers(c.q.Spec.Questions, got); err != nil {
				t.Errorf("the decision must be a valid batch: %v", err)
			}
		})
	}
	if _, err := decision(timedOpen(), true, false, ""); err == nil {
		t.Error("a question without an intent cannot be approved")
	}
	if _, err := decision(approval, true, true, ""); err == nil {
		t.Error("always without an always label must fail")
	}
}

func TestPromptBatch(t *testing.T) {
	q := timedOpen()
	// "9" is out of range and asked again; then option 2, then free text.
	in := bufio.NewReader(strings.NewReader("9\n2\nship it on Friday\n"))
	var out bytes.Buffer
	got, err := promptBatch(in, &out, q)
	want := []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}, {ID: "notes", Custom: "ship it on Friday"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	golden(t, "prompt.golden", out.String())

	// Skipping everything breaks a rule; the person is asked again.
	in = bufio.NewReader(strings.NewReader("\n\n1\n\n"))
	out.Reset()
	got, err = promptBatch(in, &out, q)
	if err != nil || got[0].Selected[0] != "staging" || !got[1].Skipped() {
		t.Fatalf("got %v, %v", got, err)
	}
	if !strings.Contains(out.String(), "BAD_ANSWER: a batch may skip some questions, not all of them") {
		t.Errorf("the rule must be shown:\n%s", out.String())
	}

	if _, err := promptBatch(bufio.NewReader(strings.NewReader("")), &out, q); err == nil {
		t.Error("the end of the input must end the prompt with an error")
	}
}
