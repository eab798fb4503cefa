package validation_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/test/oracle"
)

// inputs are rules of every type, with and without bounds.
var inputs = []*hitlv1.AnswerInput{
	nil,
	{Type: hitlv1.InputString},
	{Type: hitlv1.InputString, MinLength: ptr.To[int32](2), MaxLength: ptr.To[int32](5)},
	{Type: hitlv1.InputString, Pattern: `^T-[0-9]+$`},
	{Type: hitlv1.InputString, Pattern: `ab`},
	{Type: hitlv1.InputNumber},
	{Type: hitlv1.InputNumber, Minimum: ptr.To(intstr.FromString("-1.5")), Maximum: ptr.To(intstr.FromString("2.25"))},
	{Type: hitlv1.InputInteger},
	{Type: hitlv1.InputInteger, Minimum: ptr.To(intstr.FromInt32(1)), Maximum: ptr.To(intstr.FromInt32(10))},
	{Type: hitlv1.InputBoolean},
	{Type: hitlv1.InputDate},
	{Type: hitlv1.InputDateTime},
	{Type: hitlv1.InputEmail},
	{Type: hitlv1.InputEmail, MaxLength: ptr.To[int32](12)},
	{Type: hitlv1.InputURI},
	{Type: hitlv1.InputURI, MinLength: ptr.To[int32](12)},
}

// exact are the types whose oracle decides every string as the code must;
// for email and uri the oracle is exact on the values the fuzzer's seeds
// and mutations reach, and the fuzz target checks them too.
func TestCheckValueAgreesWithTheOracle(t *testing.T) {
	values := []string{
		"", "0", "-0", "00", "1", "10", "11", "-1.5", "-1.6", "2.25", "2.250", "2.26", "1e1", "1E-1", "1.", ".5", "+1", " 1", "1 ",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "1e400", "0x10", "١٢",
		"true", "false", "True", "1", "yes",
		"2026-12-24", "2026-02-29", "2024-02-29", "2026-13-01", "2026-12-32", "2026-1-1", "20261224", " 2026-12-24",
		"2026-12-24T18:00:00Z", "2026-12-24T18:00:00+01:00", "2026-12-24T18:00:00.123456789-05:30", "2026-12-24T24:00:00Z",
		"2026-12-24T18:00:00", "2026-12-24t18:00:00z", "2026-12-24 18:00:00Z", "2026-12-24T18:60:00Z", "2026-12-24T18:00:00+1:00",
		"2026-12-24T8:30:00+01:00", "2026-12-24T18:30:00+01:60", "2026-12-24T18:30:00+24:00", "2026-12-24T18:30:00+23:59",
		"2026-12-24T18:30:00,5Z", "2026-12-24T18:30:00.Z", "2026-12-24T18:30:00.25Z", "2026-12-24T18:30:00+01:00:00",
		"ops@example.com", "a.b+c@x.y", "a@b", "@b", "a@", "a@@b", "a b@c", "<a@b>", "Ops <ops@example.com>", "a..b@c", ".a@b",
		"a@b.", "a@[1.2.3.4]", "\"a b\"@c", "é@x.y",
		"https://example.com/x", "mailto:ops@example.com", "urn:isbn:0451450523", "http://", "http:", "example.com", "/x", "https://a b",
		"https://x/%zz", "https://x/%41", "ab", "xxabyy", "T-1", "T-", "xT-12",
		"https://tick:ts.example.com/T-1", "https://a:1:2/", "foo://a:1:2/", "https://a:80/x", "https://a:/x", "https://u:p@a:80/",
		"https://:ickets.example.com/", "urn:a:b:c",
		strings.Repeat("é", 5), strings.Repeat("é", 6),
	}
	for _, in := range inputs {
		for _, v := range values {
			if in != nil && (in.Type == hitlv1.InputEmail || in.Type == hitlv1.InputURI) && (strings.Contains(v, "[") || strings.HasPrefix(v, "https://x/%")) {
				// Checked below, against a fixed verdict.
				continue
			}
			got := validation.CheckValue(in, v) == ""
			if want := oracle.Fits(in, v); got != want {
				t.Errorf("%s %q: CheckValue fits=%v, oracle says %v (%s)", describe(in), v, got, want, validation.CheckValue(in, v))
			}
		}
	}
	uri := &hitlv1.AnswerInput{Type: hitlv1.InputURI}
	for v, want := range map[string]bool{"https://x/%41": true, "https://x/%zz": false, "https://[::1]/": true, "https://[::1/": false} {
		if got := validation.CheckValue(uri, v) == ""; got != want {
			t.Errorf("uri %q: fits=%v, want %v", v, got, want)
		}
	}
}

// TestCheckValueAgreesOnTheAdmissionFuzz runs the admission tests' fuzzer
// (oracle.Mutations, seeded there by Ginkgo's random seed) over many
// seeds: every value it calls bad is refused, every one it calls good is
// taken.
func TestCheckValueAgreesOnTheAdmissionFuzz(t *testing.T) {
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 8))
		for _, s := range oracle.Seeds {
			bad, good := oracle.Mutations(r, s.In, s.Value, 3)
			if len(bad) != 3 {
				t.Fatalf("seed %d, %s: %d bad values, want 3", seed, s.In.Type, len(bad))
			}
			for _, v := range bad {
				if validation.CheckValue(s.In, v) == "" {
					t.Errorf("seed %d, %s %q: accepted, the oracle refuses it", seed, s.In.Type, v)
				}
			}
			if why := validation.CheckValue(s.In, good); why != "" {
				t.Errorf("seed %d, %s %q: refused (%s), the oracle takes it", seed, s.In.Type, good, why)
			}
		}
	}
}

// FuzzCheckValue checks CheckValue against the oracle on any string, for
// every rule of inputs, and that a refusal always says why.
func FuzzCheckValue(f *testing.F) {
	for i := range inputs {
		for _, v := range []string{"", "42", "-1.5", "2026-12-24", "2026-12-24T18:00:00Z", "ops@example.com", "https://x.y/z", "true", "T-7"} {
			f.Add(uint8(i), v)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, v string) {
		in := inputs[int(which)%len(inputs)]
		why := validation.CheckValue(in, v)
		if in != nil && (in.Type == hitlv1.InputEmail || in.Type == hitlv1.InputURI) {
			// Go's address and URL parsers are stricter than the oracle's
			// expressions in corners (host syntax, escapes): only an
			// acceptance the oracle refuses is a bug.
			if why == "" && !oracle.Fits(in, v) {
				t.Fatalf("%s %q: accepted, the oracle refuses it", describe(in), v)
			}
			return
		}
		if got, want := why == "", oracle.Fits(in, v); got != want {
			t.Fatalf("%s %q: fits=%v, oracle says %v (%s)", describe(in), v, got, want, why)
		}
	})
}

func describe(in *hitlv1.AnswerInput) string {
	if in == nil {
		return "no input"
	}
	s := string(in.Type)
	if in.Minimum != nil || in.Maximum != nil {
		s += "[" + in.Minimum.String() + "," + in.Maximum.String() + "]"
	}
	if in.Pattern != "" {
		s += "/" + in.Pattern + "/"
	}
	return s
}

func TestValidateAnswersTypedRules(t *testing.T) {
	qs := []hitlv1.Question{
		{ID: "replicas", Question: "How many?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputInteger, Minimum: ptr.To(intstr.FromInt32(1)), Maximum: ptr.To(intstr.FromInt32(10)), Required: true}},
		{ID: "env", Question: "Where?", Options: []hitlv1.QuestionOption{{Label: "Staging", Value: "stg"}}, Input: &hitlv1.AnswerInput{Type: hitlv1.InputString, Pattern: `^[a-z]+$`}},
		{ID: "token", Question: "API key?", Sensitive: true},
	}
	cases := []struct {
		name    string
		answers []hitlv1.AnswerItem
		want    string // "" when valid, else a fragment of the message
	}{
		{"all good", []hitlv1.AnswerItem{{ID: "replicas", Custom: "3"}, {ID: "env", Selected: []string{"Staging"}}, {ID: "token", Sealed: "c2VhbGVk"}}, ""},
		{"the option label is still what is selected", []hitlv1.AnswerItem{{ID: "replicas", Custom: "3"}, {ID: "env", Selected: []string{"stg"}}, {ID: "token"}}, `"stg" is not an option`},
		{"a skipped required question", []hitlv1.AnswerItem{{ID: "replicas"}, {ID: "env", Custom: "prod"}, {ID: "token"}}, "BAD_ANSWER: question replicas: the question is required (input.required): it may not be skipped (spec.answers[0])"},
		{"above the maximum", []hitlv1.AnswerItem{{ID: "replicas", Custom: "11"}, {ID: "env"}, {ID: "token"}}, "BAD_ANSWER: question replicas: 11 is above maximum 10 (input.type integer) (spec.answers[0].custom)"},
		{"not an integer", []hitlv1.AnswerItem{{ID: "replicas", Custom: "2.5"}, {ID: "env"}, {ID: "token"}}, `question replicas: "2.5" is not an integer`},
		{"other text off the pattern", []hitlv1.AnswerItem{{ID: "replicas", Custom: "1"}, {ID: "env", Custom: "Prod"}, {ID: "token"}}, `question env: the answer does not match pattern "^[a-z]+$"`},
		{"a plain answer to a sensitive question", []hitlv1.AnswerItem{{ID: "replicas", Custom: "1"}, {ID: "env"}, {ID: "token", Custom: "hunter2"}}, "question token: the question is sensitive"},
		{"a sealed answer to a plain question", []hitlv1.AnswerItem{{ID: "replicas", Sealed: "c2VhbGVk"}, {ID: "env"}, {ID: "token"}}, "question replicas: the question is not sensitive"},
	}
	for _, c := range cases {
		err := validation.ValidateAnswers(qs, c.answers)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !validation.IsCode(err, hitlv1.CodeBadAnswer)):
			t.Errorf("%s: got %v, want BAD_ANSWER with %q", c.name, err, c.want)
		}
	}
	if msg := validation.CheckValue(qs[0].Input, strings.Repeat("9", 500)); strings.Count(msg, "9") > 70 {
		t.Errorf("a refusal quotes a huge value whole: %s", msg)
	}
}

func TestValidateAskInputRules(t *testing.T) {
	key := strings.Repeat("A", 87)
	good := "BA" + strings.Repeat("A", 85) // a 65-byte point that starts with 4
	cases := []struct {
		name string
		q    hitlv1.Question
		key  string
		want string
	}{
		{"bounds on a string", hitlv1.Question{ID: "a", Question: "?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputString, Minimum: ptr.To(intstr.FromInt32(1))}}, "", "BAD_INPUT: question a: minimum and maximum apply to a number or integer input (spec.questions[0].input)"},
		{"lengths on an integer", hitlv1.Question{ID: "a", Question: "?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputInteger, MaxLength: ptr.To[int32](3)}}, "", "minLength and maxLength apply to a string, email or uri input"},
		{"a pattern on a date", hitlv1.Question{ID: "a", Question: "?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputDate, Pattern: "x"}}, "", "pattern applies to a string input"},
		{"minimum above maximum", hitlv1.Question{ID: "a", Question: "?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputNumber, Minimum: ptr.To(intstr.FromString("2.5")), Maximum: ptr.To(intstr.FromInt32(2))}}, "", "minimum 2.5 is above maximum 2"},
		{"a bound that is no number", hitlv1.Question{ID: "a", Question: "?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputNumber, Minimum: ptr.To(intstr.FromString("one"))}}, "", `"one" is not a number (spec.questions[0].input.minimum)`},
		{"a broken pattern", hitlv1.Question{ID: "a", Question: "?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputString, Pattern: "("}}, "", "pattern is not a regular expression"},
		{"an unknown type", hitlv1.Question{ID: "a", Question: "?", Input: &hitlv1.AnswerInput{Type: "color"}}, "", `unknown input type "color"`},
		{"a sensitive choice", hitlv1.Question{ID: "a", Question: "?", Sensitive: true, Options: []hitlv1.QuestionOption{{Label: "x"}}}, good, "a sensitive question takes free text only"},
		{"a sensitive ask without a key", hitlv1.Question{ID: "a", Question: "?", Sensitive: true}, "", "BAD_INPUT: a sensitive question needs spec.sealingKey"},
		{"a sensitive ask whose key is no point", hitlv1.Question{ID: "a", Question: "?", Sensitive: true}, key, "needs spec.sealingKey"},
		{"a sensitive ask with a key", hitlv1.Question{ID: "a", Question: "?", Sensitive: true}, good, ""},
		{"a typed question", hitlv1.Question{ID: "a", Question: "?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputNumber, Minimum: ptr.To(intstr.FromString("-0.5")), Maximum: ptr.To(intstr.FromInt32(3)), Required: true}}, "", ""},
	}
	for _, c := range cases {
		err := validation.ValidateAsk(&hitlv1.UserQuestionSpec{Agent: "bot", Questions: []hitlv1.Question{c.q}, SealingKey: c.key}, 0)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !validation.IsCode(err, hitlv1.CodeBadInput)):
			t.Errorf("%s: got %v, want BAD_INPUT with %q", c.name, err, c.want)
		}
	}
}
