package browser

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/internal/inbox"
)

// valueCase is a free-text answer to check against an input rule.
type valueCase struct {
	Input *hitlv1.AnswerInput `json:"input"`
	Value string              `json:"value"`
}

// valueCases are answers of every input type: the forms people type,
// the mistakes they make, the corners of Go's parsers, and random
// strings of the characters that matter to each type.
func valueCases(r *rand.Rand) []valueCase {
	in := func(t hitlv1.InputType) *hitlv1.AnswerInput { return &hitlv1.AnswerInput{Type: t} }
	num := func(i int32) *intstr.IntOrString { v := intstr.FromInt32(i); return &v }
	str := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	random := func(alphabet string, n int) string {
		a := []rune(alphabet)
		var b strings.Builder
		for range r.IntN(n + 1) {
			b.WriteRune(a[r.IntN(len(a))])
		}
		return b.String()
	}
	// mutate changes, drops or adds a character of s, a few times.
	mutate := func(s, alphabet string) string {
		b, a := []rune(s), []rune(alphabet)
		for range 1 + r.IntN(2) {
			i := r.IntN(len(b) + 1)
			switch r.IntN(3) {
			case 0:
				if i < len(b) {
					b[i] = a[r.IntN(len(a))]
				}
			case 1:
				if i < len(b) {
					b = append(b[:i], b[i+1:]...)
				}
			default:
				b = append(b[:i], append([]rune{a[r.IntN(len(a))]}, b[i:]...)...)
			}
		}
		return string(b)
	}
	var cases []valueCase
	add := func(input *hitlv1.AnswerInput, values ...string) {
		for _, v := range values {
			cases = append(cases, valueCase{input, v})
		}
	}

	numbers := []string{"0", "-0", "42", "-7", "01", "1.", "1.5", "-1.5", ".5", "1e3", "1E+3", "2e-3", "1e400", "-1e400",
		"1e-400", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"1.0", "100", "100.5", "99.5", "0.5", "0.49", "abc", "", "+1", "1_000", " 1", "0x10", "Infinity", "NaN", "٣"}
	for _, t := range []hitlv1.InputType{hitlv1.InputNumber, hitlv1.InputInteger} {
		for _, b := range [][2]*intstr.IntOrString{{nil, nil}, {num(1), num(100)}, {str("0.5"), str("99.5")},
			{str("-1e3"), nil}, {nil, str("1E2")}, {num(-5), num(-5)}} {
			input := &hitlv1.AnswerInput{Type: t, Minimum: b[0], Maximum: b[1]}
			add(input, numbers...)
			for range 40 {
				add(input, random("0123456789-+.eE", 8))
			}
		}
	}

	add(in(hitlv1.InputBoolean), "true", "false", "True", "FALSE", "1", "", " true", "yes")

	date := in(hitlv1.InputDate)
	add(date, "2026-12-24", "2026-02-29", "2024-02-29", "1900-02-29", "2000-02-29", "0000-02-29", "2026-02-28",
		"2026-13-01", "2026-00-10", "2026-04-31", "2026-04-30", "2026-01-00", "2026-4-1", "20261-12-24", "2026-12-24T00:00",
		"2026/12/24", "24.12.2026", "", " 2026-12-24", "2026-12-24 ", "9999-12-31", "+2026-12-24", "２０２６-12-24")
	for range 150 {
		add(date, mutate("2024-02-29", "0123456789-/T "), random("0123456789-", 11))
	}

	dateTime := in(hitlv1.InputDateTime)
	add(dateTime, "2026-12-24T18:00:00Z", "2026-12-24T18:00:00+01:00", "2026-12-24T18:00:00.123456789-05:30",
		"2026-12-24T18:00:00,5Z", "2026-12-24T7:00:00+01:00", "2026-12-24T7:00:00Z", "2026-12-24T18:00:00+24:00",
		"2026-12-24T18:00:00+23:60", "2026-12-24T18:00:00+25:00", "2026-12-24T24:00:00Z", "2026-12-24T18:60:00Z",
		"2026-12-24T18:00:60Z", "2026-12-24T18:00Z", "2026-12-24T18:00:00", "2026-12-24t18:00:00Z", "2026-12-24T18:00:00z",
		"2026-12-24 18:00:00Z", "2026-02-30T18:00:00Z", "2026-12-24T18:00:00.Z", "2026-12-24T18:00:00+0100",
		"20261-12-24T18:00:00+01:00", "2026-12-24T18:00:00.5+01:00", "")
	for range 250 {
		add(dateTime, mutate("2024-02-29T23:59:59.5+01:00", "0123456789-+:.,TZtz "))
	}

	email := in(hitlv1.InputEmail)
	add(email, "ops@example.com", "first.last+tag@sub.example.co", "o'brien@example.ie", "ünï@bücher.de", "a@b",
		"ops@example.com.", "ops@.example.com", ".ops@example.com", "ops.@example.com", "o..ps@example.com",
		"ops@exa..mple.com", "ops", "@example.com", "ops@", "ops@@example.com", "ops@exa@mple.com", "Ops <ops@example.com>",
		"ops@example.com (Ops)", `"ops"@example.com`, "ops@[192.0.2.1]", "ops@[192.0.2.256]", "ops@[01.2.3.4]",
		"ops@[IPv6:2001:db8::1]", "ops@[IPv6:192.0.2.1]", "ops@[2001:db8::1]", "ops@[::ffff:192.0.2.1]",
		"ops@[IPv6:fe80::1%eth0]", "ops@[192.0.2.1]x", "ops@[192.0.2.1", "ops@ex ample.com", "ops@example.com\n",
		"a:b@example.com", "ops@exa:mple.com", "ops@exa[mple.com", "ops\\x@example.com", "ops@example.com;", "")
	for range 300 {
		add(email, mutate("first.o'k@[IPv6:::ffff:1.2.3.4]", "ab.@-_+[]:1IPv6\"<> ü(),;\\%!#"), random("ab.@[]:1IPv6ü%", 14))
	}

	uri := in(hitlv1.InputURI)
	add(uri, "https://example.com/x", "https://tickets.example.com/T-1?x=1#top", "mailto:ops@example.com", "urn:isbn:0451450523",
		"file:///etc/hosts", "http:///x", "http://", "x:", "http:", "HTTPS://EXAMPLE.COM", "example.com", "/relative/path",
		"//example.com/x", ":foo", "1http://x", "h2o://x", "a+b-c.d://x", "http://exa mple.com", "http://[::1]:8080/x",
		"http://[fe80::1%25en0]/", "http://[fe80::1%en0]/", "http://[192.0.2.1]/", "http://[::ffff:192.0.2.1]/", "http://x]:80",
		"http://a[b]", "http://host:port/", "http://host:8080:90/", "mongodb://h1:1,h2:2/db", "http://h:1:2", "http://u:p@h/",
		"http://u@p@h/", "http://u^@h/", "http://h/%zz", "http://h/%2", "http://h/#%zz", "http://h/?%zz", "http://%41/",
		"http://%C3%BC/", "http://h{}/", "http://h|/", "http://ü.example/", "http://h/ü", "x:?q", "x:#f", "x:/", "x:a?",
		"http://h/\x7f", "http://h/\u00a0", "")
	for range 300 {
		add(uri, mutate("https://u:p@[fe80::1%25en0]:80/a%20b?q=1#f", "ahtps:/[]@%25:#?.-_~!$&'()*+,;=<>\"{}|^`\\ü1f0"),
			random("a:/[]@%2:#?.1", 12)+random(":/@[]%", 3))
	}

	for _, p := range []struct {
		pattern string
		values  []string
	}{
		{`^T-[0-9]{2,5}$`, []string{"T-12", "T-1", "T-123456", "xT-12", "T-12\n", "t-12"}},
		{`[0-9]`, []string{"abc1", "abc", "", "٣"}},
		{`^\d+$`, []string{"123", "12a", "١٢٣", ""}},
		{`^\w+$`, []string{"abc_1", "ab-c", "ünï"}},
		{`^\s*$`, []string{"", "  ", "\t\n", "\v", "\u00a0", "\u2003"}},
		{`^a.c$`, []string{"abc", "a\nc", "a\rc", "a\u2028c", "a🚀c", "ac"}},
		{`(?s)^a.c$`, []string{"a\nc", "abc"}},
		{`(?i)^abc$`, []string{"ABC", "abc", "aBd"}},
		{`(?m)^b$`, []string{"a\nb\nc", "a\rb\rc", "b"}},
		{`\Aab\z`, []string{"ab", "ab\n", "xab"}},
		{`^[[:alpha:]]+$`, []string{"abc", "ab1", "ü"}},
		{`^[^[:digit:]]+$`, []string{"abc", "ab1"}},
		{`^\pL+$`, []string{"abc", "ünï", "ab1"}},
		{`^\p{Greek}+$`, []string{"αβγ", "abc"}},
		{`^\PN+$`, []string{"abc", "a1"}},
		{`^\Q1+1=2\E$`, []string{"1+1=2", "11=2"}},
		{`^a{2}$`, []string{"aa", "a"}},
		{`^a{,2}$`, []string{"a{,2}", "aa"}},
		{`^[]a]+$`, []string{"]a", "b"}},
		{`^[a\-z]+$`, []string{"a-z", "b"}},
		{`^\@\#\:$`, []string{"@#:", "x"}},
		{`^(?P<word>\w+)$`, []string{"abc", "a b"}},
		{`^\x41\x{1F680}$`, []string{"A🚀", "A"}},
		{`^\101$`, []string{"A", "B"}},
		{`^x]$`, []string{"x]", "x"}},
		{`^[a-c]$`, []string{"b", "d", "-"}},
		{`a(?i)b`, []string{"aB", "Ab"}},
	} {
		add(&hitlv1.AnswerInput{Type: hitlv1.InputString, Pattern: p.pattern}, p.values...)
	}
	lengths := &hitlv1.AnswerInput{Type: hitlv1.InputString, MinLength: ptr.To[int32](2), MaxLength: ptr.To[int32](4)}
	add(lengths, "", "a", "ab", "abcd", "abcde", "🚀🚀", "🚀🚀🚀🚀🚀", "ünïc", "e\u0301e\u0301")
	add(&hitlv1.AnswerInput{Type: hitlv1.InputEmail, MaxLength: ptr.To[int32](8)}, "a@b.c", "ops@example.com", "x")
	add(nil, "anything", "")
	add(in(hitlv1.InputString), "any text", "", strings.Repeat("long ", 30))
	return cases
}

// serverOnly are the patterns the page cannot say in JavaScript the way
// RE2 means them (flags inside the pattern): it leaves them to the
// server, which refuses what does not match.
var serverOnly = map[string]bool{`a(?i)b`: true}

// The page's value checks (static/values.js) and CheckValue of
// api/v1alpha1/validation judge the same answers alike, to the message:
// the page refuses what the server refuses and nothing else, but the
// patterns it leaves to the server.
func TestThePagesValueChecksAreCheckValue(t *testing.T) {
	e := newEnv(t)
	_, url := e.inbox(inbox.Options{})
	tab := e.tab("", false)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`[data-empty]`)))

	cases := valueCases(rand.New(rand.NewPCG(12, 2026)))
	want := make([]string, len(cases))
	refused, kept := map[hitlv1.InputType]int{}, map[hitlv1.InputType]int{}
	serverRefused := 0
	for i, c := range cases {
		in := c.Input
		if in == nil {
			continue
		}
		if serverOnly[in.Pattern] {
			if validation.CheckValue(in, c.Value) != "" {
				serverRefused++
			}
			in = in.DeepCopy()
			in.Pattern = ""
		}
		if want[i] = validation.CheckValue(in, c.Value); want[i] != "" {
			refused[in.Type]++
		} else {
			kept[in.Type]++
		}
	}
	e.g.Expect(serverRefused).To(BeNumerically(">", 0), "the server refuses what the page leaves to it")
	var buf bytes.Buffer
	e.g.Expect(json.NewEncoder(&buf).Encode(cases)).To(Succeed())
	got := eval[[]string](e, tab, `(`+strings.TrimSpace(buf.String())+`).map(c => window.hitlValues.checkValue(c.input, c.value))`)
	e.g.Expect(got).To(HaveLen(len(want)))
	for i := range want {
		e.g.Expect(got[i]).To(Equal(want[i]), "case %d: %q for %+v", i, cases[i].Value, cases[i].Input)
	}
	for _, t := range []hitlv1.InputType{hitlv1.InputNumber, hitlv1.InputInteger, hitlv1.InputBoolean, hitlv1.InputDate,
		hitlv1.InputDateTime, hitlv1.InputEmail, hitlv1.InputURI, hitlv1.InputString} {
		e.g.Expect(refused[t]).To(BeNumerically(">=", 2), "cases of %s break its rule", t)
		e.g.Expect(kept[t]).To(BeNumerically(">=", 2), "cases of %s keep it", t)
	}

	// A sensitive answer's value is checked by the page alone: its
	// message never shows it.
	secret := eval[string](e, tab, `window.hitlValues.checkValue({type: 'integer', maximum: 9}, 'hunter2', true) + ' / ' +
		window.hitlValues.checkValue({type: 'integer', maximum: 9}, '12', true)`)
	e.g.Expect(secret).To(Equal("the answer is not an integer (decimal digits, e.g. 42) / the answer is above maximum 9"))
}

// The page's batch checker keeps to ValidateAnswers with typed, required
// and sensitive questions too, to the message.
func TestThePagesCheckerKnowsTypedAndSensitiveQuestions(t *testing.T) {
	e := newEnv(t)
	_, url := e.inbox(inbox.Options{})
	tab := e.tab("", false)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`[data-empty]`)))

	r := rand.New(rand.NewPCG(7, 2026))
	inputs := []*hitlv1.AnswerInput{nil,
		{Type: hitlv1.InputInteger, Minimum: ptr.To(intstr.FromInt32(1)), Maximum: ptr.To(intstr.FromInt32(9)), Required: true},
		{Type: hitlv1.InputDate}, {Type: hitlv1.InputBoolean, Required: true},
		{Type: hitlv1.InputString, Pattern: `^T-[0-9]+$`}, {Type: hitlv1.InputString, MinLength: ptr.To[int32](3), Required: true}}
	texts := []string{"", "", "5", "12", "2026-12-24", "2026-02-30", "true", "false", "T-1", "x", "abcd"}
	type jsCase struct {
		Questions []map[string]any    `json:"questions"`
		Answers   []hitlv1.AnswerItem `json:"answers"`
	}
	var cases []jsCase
	var want []string
	for range 600 {
		var qs []hitlv1.Question
		var specs []map[string]any
		for i := range 1 + r.IntN(3) {
			q := hitlv1.Question{ID: []string{"q1", "q2", "q3"}[i], Input: inputs[r.IntN(len(inputs))]}
			if r.IntN(3) == 0 {
				q.Sensitive, q.Input = true, nil
			} else if r.IntN(3) == 0 {
				q.Options = []hitlv1.QuestionOption{{Label: "a", Value: "A"}, {Label: "b"}}
			}
			labels := []string{}
			for _, o := range q.Options {
				labels = append(labels, o.Label)
			}
			qs = append(qs, q)
			specs = append(specs, map[string]any{"id": q.ID, "options": labels, "multiSelect": false, "approval": false,
				"input": q.Input, "sensitive": q.Sensitive})
		}
		var answers []hitlv1.AnswerItem
		for _, q := range qs {
			a := hitlv1.AnswerItem{ID: q.ID}
			switch r.IntN(4) {
			case 0:
				a.Custom = texts[r.IntN(len(texts))]
			case 1:
				a.Sealed = []string{"", "AQxyz"}[r.IntN(2)]
			case 2:
				if len(q.Options) > 0 {
					a.Selected = []string{"a"}
				}
			}
			answers = append(answers, a)
		}
		msg := ""
		if err := validation.ValidateAnswers(qs, answers); err != nil {
			msg = err.Error()
		}
		cases, want = append(cases, jsCase{specs, answers}), append(want, msg)
	}
	refused := sameVerdicts(e, tab, cases, want)
	for _, rule := range []string{"the question is sensitive", "the question is not sensitive", "the question is required",
		"is not a date", "is above maximum", "does not match pattern"} {
		e.g.Expect(strings.Join(want, "\n")).To(ContainSubstring(rule), "some cases break %q", rule)
	}
	e.g.Expect(len(want)-refused).To(BeNumerically(">", 20), "and some keep every rule")
}
