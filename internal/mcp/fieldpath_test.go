package mcp

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestFieldPathNamesTheValueWithItsIndices(t *testing.T) {
	raw := json.RawMessage(`{"questions":[{"id":"a","options":["x"]},{"id":"b","options":"y,z"},{"id":"c","options":["x",1]}],"timeout":1}`)
	list, text, number := reflect.TypeOf([]string{}), reflect.TypeOf(""), reflect.TypeOf(0)
	for _, tc := range []struct {
		name, field, value string
		typ                reflect.Type
		want               string
	}{
		// Builds of encoding/json that name the indices, and those that do not.
		{"indices given", "questions.1.options", "string", list, "questions[1].options"},
		{"indices left out", "questions.options", "string", list, "questions[1].options"},
		{"an element of the wrong type", "questions.options", "number", text, "questions[2].options[1]"},
		{"no array on the way", "timeout", "number", text, "timeout"},
		{"nothing of that type there", "questions.options", "bool", number, "questions.options"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fieldPath(raw, &json.UnmarshalTypeError{Field: tc.field, Value: tc.value, Type: tc.typ}); got != tc.want {
				t.Fatalf("fieldPath(%s, %s) = %s, want %s", tc.field, tc.value, got, tc.want)
			}
		})
	}
}
