package validation

import (
	"reflect"
	"testing"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func badAnswer(question, fragment string) *failure {
	return &failure{code: hitlv1.CodeBadAnswer, question: question, fragment: fragment}
}

// Distinctive fragments of the batch rules' messages.
const (
	fragMissing    = "not answered"
	fragUnknown    = "not a question of the ask"
	fragDuplicate  = "answered more than once"
	fragNotOption  = "is not an option of the question"
	fragTwice      = "is selected more than once"
	fragSingleMany = "single-select: select at most one label"
	fragSingleBoth = "custom text replaces the choice"
	fragNoOptions  = "has no options"
	fragApproval   = "Approval question takes exactly one selected label and no custom"
	fragAllSkipped = "may skip some questions, not all of them"
)

func TestValidateAnswers(t *testing.T) {
	single := question("color").options("red", "green", "blue")
	multi := question("tags").options("a", "b", "c").multi()
	free := question("notes")
	freeMulti := question("notes").multi()
	gate := approvalQuestion("ok", "approve", "reject", "always")

	cases := []struct {
		name    string
		qs      []hitlv1.Question
		answers []hitlv1.AnswerItem
		want    *failure
	}{
		// Every question id exactly once, and no other id.
		{
			name:    "every question answered once",
			qs:      questions(single, multi, free),
			answers: batch(answer("color").sel("red"), answer("tags").sel("a"), answer("notes").custom("hi")),
		},
		{
			name:    "batch order need not follow ask order",
			qs:      questions(single, multi),
			answers: batch(answer("tags").sel("b"), answer("color").sel("green")),
		},
		{
			name:    "missing id",
			qs:      questions(single, multi),
			answers: batch(answer("color").sel("red")),
			want:    badAnswer("tags", fragMissing),
		},
		{
			name:    "unknown id",
			qs:      questions(single),
			answers: batch(answer("color").sel("red"), answer("shape").sel("round")),
			want:    badAnswer("shape", fragUnknown),
		},
		{
			name:    "unknown id instead of a question id",
			qs:      questions(single),
			answers: batch(answer("colour").sel("red")),
			want:    badAnswer("colour", fragUnknown),
		},
		{
			name:    "duplicate id",
			qs:      questions(single, multi),
			answers: batch(answer("color").sel("red"), answer("tags").sel("a"), answer("color").sel("blue")),
			want:    badAnswer("color", fragDuplicate),
		},
		{
			name:    "duplicate id, both skips",
			qs:      questions(single, multi),
			answers: batch(answer("tags").sel("a"), answer("color"), answer("color")),
			want:    badAnswer("color", fragDuplicate),
		},
		{
			name:    "nil batch for a non-empty ask",
			qs:      questions(single, multi),
			answers: nil,
			want:    badAnswer("color", fragMissing),
		},
		{
			name:    "empty batch for a non-empty ask",
			qs:      questions(single),
			answers: []hitlv1.AnswerItem{},
			want:    badAnswer("color", fragMissing),
		},

		// Selected labels are options of the question, each at most once.
		{
			name:    "label not an option",
			qs:      questions(single),
			answers: batch(answer("color").sel("purple")),
			want:    badAnswer("color", `"purple" `+fragNotOption),
		},
		{
			name:    "labels are case-sensitive",
			qs:      questions(single),
			answers: batch(answer("color").sel("Red")),
			want:    badAnswer("color", `"Red" `+fragNotOption),
		},
		{
			name:    "multi-select, one good label and one unknown",
			qs:      questions(multi),
			answers: batch(answer("tags").sel("a", "z")),
			want:    badAnswer("tags", `"z" `+fragNotOption),
		},
		{
			name:    "label of another question",
			qs:      questions(single, multi),
			answers: batch(answer("color").sel("a"), answer("tags").sel("a")),
			want:    badAnswer("color", `"a" `+fragNotOption),
		},
		{
			name:    "multi-select, label selected twice",
			qs:      questions(multi),
			answers: batch(answer("tags").sel("a", "b", "a")),
			want:    badAnswer("tags", `"a" `+fragTwice),
		},
		{
			name:    "single-select, label selected twice",
			qs:      questions(single),
			answers: batch(answer("color").sel("red", "red")),
			want:    badAnswer("color", `"red" `+fragTwice),
		},

		// Single-select: at most one label; custom replaces the choice.
		{
			name:    "single-select, 0 labels (skip) among answered",
			qs:      questions(single, multi),
			answers: batch(answer("color"), answer("tags").sel("a")),
		},
		{
			name:    "single-select, 1 label",
			qs:      questions(single),
			answers: batch(answer("color").sel("blue")),
		},
		{
			name:    "single-select, 2 labels",
			qs:      questions(single),
			answers: batch(answer("color").sel("red", "green")),
			want:    badAnswer("color", fragSingleMany),
		},
		{
			name:    "single-select, every label",
			qs:      questions(single),
			answers: batch(answer("color").sel("red", "green", "blue")),
			want:    badAnswer("color", fragSingleMany),
		},
		{
			name:    "single-select, custom alone",
			qs:      questions(single),
			answers: batch(answer("color").custom("teal")),
		},
		{
			name:    "single-select, custom with a label",
			qs:      questions(single),
			answers: batch(answer("color").sel("red").custom("teal")),
			want:    badAnswer("color", fragSingleBoth),
		},

		// Multi-select: custom may accompany any number of labels.
		{
			name:    "multi-select, 2 labels",
			qs:      questions(multi),
			answers: batch(answer("tags").sel("c", "a")),
		},
		{
			name:    "multi-select, all labels",
			qs:      questions(multi),
			answers: batch(answer("tags").sel("a", "b", "c")),
		},
		{
			name:    "multi-select, custom alone",
			qs:      questions(multi),
			answers: batch(answer("tags").custom("d")),
		},
		{
			name:    "multi-select, custom with one label",
			qs:      questions(multi),
			answers: batch(answer("tags").sel("b").custom("d")),
		},
		{
			name:    "multi-select, custom with all labels",
			qs:      questions(multi),
			answers: batch(answer("tags").sel("a", "b", "c").custom("d")),
		},

		// A question without options takes custom or a skip.
		{
			name:    "no options, custom",
			qs:      questions(free),
			answers: batch(answer("notes").custom("ship it")),
		},
		{
			name:    "no options, skip among answered",
			qs:      questions(free, single),
			answers: batch(answer("notes"), answer("color").sel("red")),
		},
		{
			name:    "no options, a selected label",
			qs:      questions(free),
			answers: batch(answer("notes").sel("yes")),
			want:    badAnswer("notes", fragNoOptions),
		},
		{
			name:    "no options, a selected label with custom",
			qs:      questions(free),
			answers: batch(answer("notes").sel("yes").custom("ship it")),
			want:    badAnswer("notes", fragNoOptions),
		},
		{
			name:    "no options multi-select, a selected label",
			qs:      questions(freeMulti),
			answers: batch(answer("notes").sel("x", "y")),
			want:    badAnswer("notes", fragNoOptions),
		},

		// An Approval question takes exactly one selected label and no custom.
		{
			name:    "approval, approve",
			qs:      questions(gate),
			answers: batch(answer("ok").sel("approve")),
		},
		{
			name:    "approval, reject",
			qs:      questions(gate),
			answers: batch(answer("ok").sel("reject")),
		},
		{
			name:    "approval, always",
			qs:      questions(gate),
			answers: batch(answer("ok").sel("always")),
		},
		{
			name:    "approval, zero labels",
			qs:      questions(gate),
			answers: batch(answer("ok")),
			want:    badAnswer("ok", fragApproval),
		},
		{
			name:    "approval, two labels",
			qs:      questions(gate),
			answers: batch(answer("ok").sel("approve", "reject")),
			want:    badAnswer("ok", fragApproval),
		},
		{
			name:    "approval, custom alone",
			qs:      questions(gate),
			answers: batch(answer("ok").custom("only on Fridays")),
			want:    badAnswer("ok", fragApproval),
		},
		{
			name:    "approval, one label with custom",
			qs:      questions(gate),
			answers: batch(answer("ok").sel("approve").custom("but log it")),
			want:    badAnswer("ok", fragApproval),
		},
		{
			name:    "approval, one label that is not an option",
			qs:      questions(gate),
			answers: batch(answer("ok").sel("maybe")),
			want:    badAnswer("ok", `"maybe" `+fragNotOption),
		},

		// A batch may skip some questions, not all of them.
		{
			name:    "skip some",
			qs:      questions(single, multi, free),
			answers: batch(answer("color"), answer("tags").sel("a"), answer("notes")),
		},
		{
			name:    "skip all but the custom one",
			qs:      questions(single, multi, free),
			answers: batch(answer("color"), answer("tags"), answer("notes").custom("later")),
		},
		{
			name:    "skip all",
			qs:      questions(single, multi, free),
			answers: batch(answer("color"), answer("tags"), answer("notes")),
			want:    badAnswer("", fragAllSkipped),
		},
		{
			name:    "skip the only question",
			qs:      questions(single),
			answers: batch(answer("color")),
			want:    badAnswer("", fragAllSkipped),
		},
		{
			name:    "skip the only free-text question",
			qs:      questions(free),
			answers: batch(answer("notes")),
			want:    badAnswer("", fragAllSkipped),
		},
		{
			name:    "empty selected slice is a skip",
			qs:      questions(multi),
			answers: []hitlv1.AnswerItem{{ID: "tags", Selected: []string{}}},
			want:    badAnswer("", fragAllSkipped),
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, ValidateAnswers(tc.qs, tc.answers), tc.want)
		})
	}
}

// The batch rules name the offending item's path in Field.
func TestValidateAnswersField(t *testing.T) {
	qs := questions(question("color").options("red", "green"), question("tags").options("a", "b").multi())
	cases := []struct {
		name    string
		answers []hitlv1.AnswerItem
		field   string
	}{
		{"unknown id", batch(answer("tags").sel("a"), answer("zz")), "spec.answers[1].id"},
		{"not an option", batch(answer("color").sel("red"), answer("tags").sel("a", "q")), "spec.answers[1].selected[1]"},
		{"missing", batch(answer("tags").sel("a")), "spec.answers"},
		{"all skipped", batch(answer("color"), answer("tags")), "spec.answers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateAnswers(qs, tc.answers)
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("want *Error, got %T (%v)", err, err)
			}
			if e.Field != tc.field {
				t.Errorf("Field = %q, want %q", e.Field, tc.field)
			}
		})
	}
}

// ValidateAnswers only reads its arguments.
func TestValidateAnswersDoesNotModify(t *testing.T) {
	qs := questions(question("tags").options("a", "b").multi(), approvalQuestion("ok", "y", "n", ""))
	answers := batch(answer("tags").sel("b", "a").custom("c"), answer("ok").sel("y"))
	before := batch(answer("tags").sel("b", "a").custom("c"), answer("ok").sel("y"))
	if err := ValidateAnswers(qs, answers); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(answers, before) {
		t.Fatalf("answers changed: %+v, want %+v", answers, before)
	}
}
