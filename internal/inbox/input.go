package inbox

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// entryView is the control a person types a question's free-text answer
// (its custom text) in, as the question's input asks for it.
//
// The controls carry no minlength, maxlength or pattern attribute: a
// browser counts a length in UTF-16 code units and cuts what is pasted
// beyond maxlength without a word, and anchors a pattern, while the rule
// (validation.CheckValue) counts characters and matches anywhere. The
// page checks the rule itself (static/values.js), and Hint says it.
type entryView struct {
	// Control is the HTML input type ("number", "date", "datetime-local",
	// "email", "url", "text", "password"), or "textarea", "boolean" (true
	// and false radio buttons) or "select" (true or false in an Other
	// field, beside the question's options).
	Control string
	// Min, Max and Step are a number field's attributes.
	Min, Max, Step string
	// Hint says the rule in words; empty when there is none.
	Hint string
}

// newEntry is the control of a question's free text; inline: it is the
// Other field of a question with options.
func newEntry(q *hitlv1.Question, inline bool) entryView {
	e := entryView{Control: "textarea", Hint: hint(q)}
	if inline {
		e.Control = "text"
	}
	if q.Sensitive {
		e.Control = "password"
		return e
	}
	in := q.Input
	if in == nil {
		return e
	}
	switch in.Type {
	case hitlv1.InputNumber:
		e.Control, e.Step = "number", "any"
		e.Min, e.Max = boundText(in.Minimum), boundText(in.Maximum)
	case hitlv1.InputInteger:
		// The step counts from min: an integer's bounds are the integers
		// within its rule's, so that the arrows step from whole numbers.
		e.Control, e.Step = "number", "1"
		if lo, ok, _ := validation.Bound(in.Minimum); ok {
			e.Min = strconv.FormatFloat(math.Ceil(lo), 'f', -1, 64)
		}
		if hi, ok, _ := validation.Bound(in.Maximum); ok {
			e.Max = strconv.FormatFloat(math.Floor(hi), 'f', -1, 64)
		}
	case hitlv1.InputBoolean:
		e.Control = "boolean"
		if inline {
			e.Control = "select"
		}
	case hitlv1.InputDate:
		e.Control = "date"
	case hitlv1.InputDateTime:
		e.Control = "datetime-local"
	case hitlv1.InputEmail:
		e.Control = "email"
	case hitlv1.InputURI:
		e.Control = "url"
	}
	return e
}

// boundText is a minimum or maximum as its rule writes it; "" when unset.
func boundText(b *intstr.IntOrString) string {
	if b == nil {
		return ""
	}
	return b.String()
}

// hint says a question's input rule in words, as the card shows it under
// the control: "Required. A whole number from 1 to 10."
func hint(q *hitlv1.Question) string {
	var parts []string
	in := q.Input
	if in != nil && in.Required {
		parts = append(parts, "Required.")
	}
	if in != nil {
		switch in.Type {
		case hitlv1.InputNumber:
			parts = append(parts, "A number"+rangeText(in)+".")
		case hitlv1.InputInteger:
			parts = append(parts, "A whole number"+rangeText(in)+".")
		case hitlv1.InputDate:
			parts = append(parts, "A date.")
		case hitlv1.InputDateTime:
			parts = append(parts, "A date and time, sent with this browser's offset from UTC.")
		case hitlv1.InputEmail:
			parts = append(parts, "An email address"+lengthText(in)+".")
		case hitlv1.InputURI:
			parts = append(parts, "An absolute URI, e.g. https://example.com/x"+lengthText(in)+".")
		case hitlv1.InputString:
			if t := lengthText(in); t != "" {
				parts = append(parts, "Text"+t+".")
			}
		}
	}
	if q.Sensitive {
		parts = append(parts, "Sensitive: your browser seals the answer so that only the asking agent can read it; "+
			"it is never sent or stored in the clear.")
	}
	return strings.Join(parts, " ")
}

// rangeText is a number's bounds: " from 1 to 10", " of at least 1".
func rangeText(in *hitlv1.AnswerInput) string {
	lo, hi := boundText(in.Minimum), boundText(in.Maximum)
	switch {
	case lo != "" && hi != "":
		return " from " + lo + " to " + hi
	case lo != "":
		return " of at least " + lo
	case hi != "":
		return " of at most " + hi
	}
	return ""
}

// lengthText is a text's length and pattern rules: ", 3 to 20 characters,
// matching the pattern ^[a-z]+$".
func lengthText(in *hitlv1.AnswerInput) string {
	var s string
	switch {
	case in.MinLength != nil && in.MaxLength != nil:
		s = fmt.Sprintf(", %d to %d characters", *in.MinLength, *in.MaxLength)
	case in.MinLength != nil:
		s = fmt.Sprintf(", at least %d characters", *in.MinLength)
	case in.MaxLength != nil:
		s = fmt.Sprintf(", at most %d characters", *in.MaxLength)
	}
	if in.Pattern != "" {
		s += ", matching the pattern " + in.Pattern
	}
	return s
}
