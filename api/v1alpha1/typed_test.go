package v1alpha1_test

import (
	"errors"
	"testing"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func TestTypedAccessors(t *testing.T) {
	item := func(s string) hitlv1.AnswerItem { return hitlv1.AnswerItem{ID: "q", Custom: s} }
	if v, err := item("-42").Int(); err != nil || v != -42 {
		t.Errorf("Int = %d, %v", v, err)
	}
	if _, err := item("4.2").Int(); err == nil {
		t.Error("Int read 4.2")
	}
	if v, err := item("2e3").Float(); err != nil || v != 2000 {
		t.Errorf("Float = %v, %v", v, err)
	}
	if v, err := item("false").Bool(); err != nil || v {
		t.Errorf("Bool = %v, %v", v, err)
	}
	if _, err := item("yes").Bool(); err == nil {
		t.Error("Bool read yes")
	}
	if v, err := item("2026-12-24").Time(); err != nil || !v.Equal(time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("Time(date) = %v, %v", v, err)
	}
	if v, err := item("2026-12-24T18:00:00+01:00").Time(); err != nil || !v.Equal(time.Date(2026, 12, 24, 17, 0, 0, 0, time.UTC)) {
		t.Errorf("Time(dateTime) = %v, %v", v, err)
	}
	skipped := hitlv1.AnswerItem{ID: "q"}
	for name, err := range map[string]error{
		"Int": second(skipped.Int()), "Float": second(skipped.Float()), "Bool": second(skipped.Bool()),
		"Time": second(skipped.Time()), "Text": second(skipped.Text()),
	} {
		if !errors.Is(err, hitlv1.ErrSkipped) {
			t.Errorf("%s of a skipped answer: %v, want ErrSkipped", name, err)
		}
	}
	if (hitlv1.AnswerItem{ID: "q", Sealed: "x"}).Skipped() {
		t.Error("a sealed answer counts as skipped")
	}
	q := hitlv1.Question{Options: []hitlv1.QuestionOption{{Label: "Staging", Value: "stg"}, {Label: "prod"}}}
	if got := q.ValuesOf(hitlv1.AnswerItem{Selected: []string{"prod", "Staging"}}); len(got) != 2 || got[0] != "prod" || got[1] != "stg" {
		t.Errorf("ValuesOf = %v", got)
	}
}

func second[T any](_ T, err error) error { return err }
