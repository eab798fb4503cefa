package v1alpha1

import (
	"fmt"
	"strconv"
	"time"
)

// The typed accessors read an answer's free text (custom) as its
// question's input type stores it. Admission and the controller checked it
// against the question's input rule, so for a question with that input
// type they fail only on a skipped question (ErrSkipped).

// ErrSkipped is returned by the typed accessors of a skipped answer.
var ErrSkipped = fmt.Errorf("the question was skipped: it has no value")

// Text is the answer's free text; ErrSkipped when it has none.
func (a AnswerItem) Text() (string, error) {
	if a.Custom == "" {
		return "", ErrSkipped
	}
	return a.Custom, nil
}

// Int reads an integer answer.
func (a AnswerItem) Int() (int64, error) {
	s, err := a.Text()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("question %s: %q is not an integer", a.ID, s)
	}
	return v, nil
}

// Float reads a number (or integer) answer.
func (a AnswerItem) Float() (float64, error) {
	s, err := a.Text()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("question %s: %q is not a number", a.ID, s)
	}
	return v, nil
}

// Bool reads a boolean answer ("true" or "false").
func (a AnswerItem) Bool() (bool, error) {
	s, err := a.Text()
	if err != nil {
		return false, err
	}
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("question %s: %q is not a boolean", a.ID, s)
}

// Time reads a date (midnight UTC of that day) or a date and time (RFC
// 3339, with its offset) answer.
func (a AnswerItem) Time() (time.Time, error) {
	s, err := a.Text()
	if err != nil {
		return time.Time{}, err
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("question %s: %q is not a date or an RFC 3339 date and time", a.ID, s)
	}
	return t, nil
}

// ValuesOf maps the labels an answer selected to their options' values
// (QuestionOption.Value, or the label when it has none), in order.
func (q *Question) ValuesOf(a AnswerItem) []string {
	values := make([]string, 0, len(a.Selected))
	for _, label := range a.Selected {
		v := label
		for _, o := range q.Options {
			if o.Label == label && o.Value != "" {
				v = o.Value
				break
			}
		}
		values = append(values, v)
	}
	return values
}
