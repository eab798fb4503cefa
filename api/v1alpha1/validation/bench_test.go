package validation_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// BenchmarkValidateAnswers measures the batch check the controller and the
// webhook run for every reply: a plain batch (choices and free text, no
// input rules: what every reply paid before typed answers) and a typed
// one.
func BenchmarkValidateAnswers(b *testing.B) {
	plain := []hitlv1.Question{
		{ID: "env", Question: "Where?", Options: []hitlv1.QuestionOption{{Label: "staging"}, {Label: "prod"}}},
		{ID: "notes", Question: "Anything else?"},
	}
	plainAnswers := []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}, {ID: "notes", Custom: "ship it"}}
	typed := []hitlv1.Question{
		{ID: "env", Question: "Where?", Options: []hitlv1.QuestionOption{{Label: "staging"}, {Label: "prod"}}},
		{ID: "replicas", Question: "How many?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputInteger, Minimum: ptr.To(intstr.FromInt32(1)), Maximum: ptr.To(intstr.FromInt32(40))}},
		{ID: "ticket", Question: "Ticket?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputString, Pattern: `^CHG-[0-9]+$`}},
		{ID: "when", Question: "When?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputDateTime}},
	}
	typedAnswers := []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}, {ID: "replicas", Custom: "12"},
		{ID: "ticket", Custom: "CHG-1234"}, {ID: "when", Custom: "2026-12-24T18:00:00+01:00"}}
	for _, c := range []struct {
		name      string
		questions []hitlv1.Question
		answers   []hitlv1.AnswerItem
	}{{"plain", plain, plainAnswers}, {"typed", typed, typedAnswers}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := validation.ValidateAnswers(c.questions, c.answers); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
