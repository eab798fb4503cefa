package answerer

import (
	"fmt"
	"strconv"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/sealed"
)

// The items of a batch, typed: each writes its value as the question's
// input type stores it (see hitlv1.AnswerInput), so that a reader's typed
// accessor (AnswerItem.Int, .Float, .Bool, .Time) reads it back.

// Choose answers question id with option labels.
func Choose(id string, labels ...string) hitlv1.AnswerItem {
	return hitlv1.AnswerItem{ID: id, Selected: labels}
}

// Text answers question id with free text. The text of a sensitive
// question is sealed by Create before the reply leaves the process (see
// Sensitive).
func Text(id, text string) hitlv1.AnswerItem { return hitlv1.AnswerItem{ID: id, Custom: text} }

// Int answers an integer (or number) question.
func Int(id string, v int64) hitlv1.AnswerItem { return Text(id, strconv.FormatInt(v, 10)) }

// Float answers a number question ("1.5", "2e+06"). A NaN or an infinity
// is no number: the batch is refused (BAD_ANSWER).
func Float(id string, v float64) hitlv1.AnswerItem {
	return Text(id, strconv.FormatFloat(v, 'g', -1, 64))
}

// Bool answers a boolean question ("true" or "false").
func Bool(id string, v bool) hitlv1.AnswerItem { return Text(id, strconv.FormatBool(v)) }

// Date answers a date question with t's date, in t's location
// ("2026-12-24").
func Date(id string, t time.Time) hitlv1.AnswerItem { return Text(id, t.Format(time.DateOnly)) }

// DateTime answers a date-and-time question with t, in RFC 3339 with its
// offset ("2026-12-24T18:00:00+01:00").
func DateTime(id string, t time.Time) hitlv1.AnswerItem { return Text(id, t.Format(time.RFC3339Nano)) }

// Skip skips question id.
func Skip(id string) hitlv1.AnswerItem { return hitlv1.AnswerItem{ID: id} }

// Sensitive is the answer to a sensitive question (Question.Sensitive): the
// value as free text, which Create seals to the question's key before
// anything is sent, so that the reply carries only the sealed value
// (AnswerItem.Sealed). It is Text by another name: Create seals the free
// text of every sensitive question, and sends the free text of a question
// that is not sensitive as it is. To be sure a value is never sent in
// the clear, seal it with Seal, which refuses a question that is not
// sensitive.
func Sensitive(id, value string) hitlv1.AnswerItem { return Text(id, value) }

// Seal returns the answer to the sensitive question id of q: value,
// checked against the question's input rule and sealed (package
// pkg/sealed) to q's spec.sealingKey for q (its namespace, name and uid)
// and id, so that only the asking agent can open it. The item holds no
// trace of value but the sealed text. A question that is not q's or not
// sensitive, an empty value (a skip: use Skip), and a value that breaks
// the input rule are BAD_ANSWER; no error message holds the value.
//
// q is the question as read from the API server: its uid is part of what
// the value is sealed for, so a reply bound to another question (one
// replaced under the same name) does not open. Create seals the free text
// of sensitive questions itself, with the question it reads; Seal is for
// a reply prepared another way.
func Seal(q *hitlv1.UserQuestion, id, value string) (hitlv1.AnswerItem, error) {
	var question *hitlv1.Question
	for i := range q.Spec.Questions {
		if q.Spec.Questions[i].ID == id {
			question = &q.Spec.Questions[i]
		}
	}
	bad := func(format string, args ...any) error {
		return &validation.Error{Code: hitlv1.CodeBadAnswer, QuestionID: id, Rule: fmt.Sprintf(format, args...)}
	}
	switch {
	case question == nil:
		return hitlv1.AnswerItem{}, bad("not a question of %s", q.Name)
	case !question.Sensitive:
		return hitlv1.AnswerItem{}, bad("the question is not sensitive: its answer is not sealed, but given as free text")
	case value == "":
		return hitlv1.AnswerItem{}, bad("an empty answer is a skip: skip the question instead of sealing nothing")
	case q.Spec.SealingKey == "":
		return hitlv1.AnswerItem{}, bad("question %s has no spec.sealingKey to seal the answer to", q.Name)
	}
	if why := validation.CheckValue(question.Input, value); why != "" {
		// CheckValue's words may quote the value: say the rule instead.
		return hitlv1.AnswerItem{}, bad("the answer is not %s (input.type %s; the value is not shown: the question is sensitive)",
			DescribeInput(question.Input), question.Input.Type)
	}
	box, err := sealed.Seal(q.Spec.SealingKey, sealed.Binding{Namespace: q.Namespace, Question: q.Name, UID: string(q.UID), ID: id}, value)
	if err != nil {
		return hitlv1.AnswerItem{}, bad("sealing the answer: %v", err)
	}
	return hitlv1.AnswerItem{ID: id, Sealed: box}, nil
}

// sealAnswers returns answers with the free text of each item of a
// sensitive question of q sealed (Seal); the other items are unchanged.
// answers itself is not changed.
func sealAnswers(q *hitlv1.UserQuestion, answers []hitlv1.AnswerItem) ([]hitlv1.AnswerItem, error) {
	sensitive := map[string]bool{}
	for _, question := range q.Spec.Questions {
		sensitive[question.ID] = question.Sensitive
	}
	out := make([]hitlv1.AnswerItem, len(answers))
	for i, a := range answers {
		out[i] = a
		if !sensitive[a.ID] || a.Custom == "" || a.Sealed != "" || len(a.Selected) > 0 {
			continue // nothing to seal, or a batch ValidateAnswers refuses
		}
		item, err := Seal(q, a.ID, a.Custom)
		if err != nil {
			return nil, err
		}
		out[i] = item
	}
	return out, nil
}

// DescribeInput says in words what a free-text answer of input in must be,
// for a prompt or a hint beside a text field: "an integer from 1 to 10",
// "a date YYYY-MM-DD", "text of at most 40 characters matching pattern
// "^[a-z]+$"". Whether the question may be skipped (in.Required) is not
// part of it. A question without input takes any text: "text".
func DescribeInput(in *hitlv1.AnswerInput) string {
	if in == nil {
		return "text"
	}
	switch in.Type {
	case hitlv1.InputInteger:
		return "an integer" + bounds(in)
	case hitlv1.InputNumber:
		return "a number" + bounds(in)
	case hitlv1.InputBoolean:
		return "true or false"
	case hitlv1.InputDate:
		return "a date YYYY-MM-DD"
	case hitlv1.InputDateTime:
		return "a date and time with an offset, RFC 3339 (e.g. 2026-12-24T18:00:00Z)"
	case hitlv1.InputEmail:
		return "an email address" + lengths(in)
	case hitlv1.InputURI:
		return "an absolute URI (e.g. https://example.com/x)" + lengths(in)
	}
	s := "text" + lengths(in)
	if in.Pattern != "" {
		s += " matching pattern " + strconv.Quote(in.Pattern)
	}
	return s
}

// bounds is " from 1 to 10", " of at least 1", " of at most 10" or "".
func bounds(in *hitlv1.AnswerInput) string {
	switch lo, hi := in.Minimum, in.Maximum; {
	case lo != nil && hi != nil:
		return " from " + lo.String() + " to " + hi.String()
	case lo != nil:
		return " of at least " + lo.String()
	case hi != nil:
		return " of at most " + hi.String()
	}
	return ""
}

// lengths is " of 3 to 40 characters", " of at least 3 characters", " of
// at most 40 characters", " of exactly 6 characters" or "".
func lengths(in *hitlv1.AnswerInput) string {
	switch lo, hi := in.MinLength, in.MaxLength; {
	case lo != nil && hi != nil && *lo == *hi:
		return fmt.Sprintf(" of exactly %d characters", *lo)
	case lo != nil && hi != nil:
		return fmt.Sprintf(" of %d to %d characters", *lo, *hi)
	case lo != nil:
		return fmt.Sprintf(" of at least %d characters", *lo)
	case hi != nil:
		return fmt.Sprintf(" of at most %d characters", *hi)
	}
	return ""
}
