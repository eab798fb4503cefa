package validation

import (
	"encoding/base64"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/intstr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// The texts of a number and an integer, as JSON writes them.
var (
	numberText  = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)
	integerText = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
	boundText   = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)
)

// ValidateInput checks one question's input rule and sensitive flag (the
// rules the CRD's CEL repeats) and returns the first broken one as a
// BAD_INPUT *Error. field is the question's path, e.g. "spec.questions[0]".
func ValidateInput(q *hitlv1.Question, field string) error {
	bad := func(sub, format string, args ...any) error {
		return newError(hitlv1.CodeBadInput, q.ID, field+sub, format, args...)
	}
	if q.Sensitive && (len(q.Options) > 0 || q.Intent != nil) {
		return bad(".sensitive", "a sensitive question takes free text only: no options and no intent")
	}
	in := q.Input
	if in == nil {
		return nil
	}
	if isApproval(q) {
		return bad(".input", "an Approval question takes no free text, so no input")
	}
	switch in.Type {
	case hitlv1.InputString, hitlv1.InputNumber, hitlv1.InputInteger, hitlv1.InputBoolean,
		hitlv1.InputDate, hitlv1.InputDateTime, hitlv1.InputEmail, hitlv1.InputURI:
	default:
		return bad(".input.type", "unknown input type %q", in.Type)
	}
	numeric := in.Type == hitlv1.InputNumber || in.Type == hitlv1.InputInteger
	textual := in.Type == hitlv1.InputString || in.Type == hitlv1.InputEmail || in.Type == hitlv1.InputURI
	if (in.Minimum != nil || in.Maximum != nil) && !numeric {
		return bad(".input", "minimum and maximum apply to a number or integer input")
	}
	if (in.MinLength != nil || in.MaxLength != nil) && !textual {
		return bad(".input", "minLength and maxLength apply to a string, email or uri input")
	}
	if in.Pattern != "" && in.Type != hitlv1.InputString {
		return bad(".input.pattern", "pattern applies to a string input")
	}
	lo, hasLo, err := Bound(in.Minimum)
	if err != nil {
		return bad(".input.minimum", "%v", err)
	}
	hi, hasHi, err := Bound(in.Maximum)
	if err != nil {
		return bad(".input.maximum", "%v", err)
	}
	if hasLo && hasHi && lo > hi {
		return bad(".input", "minimum %s is above maximum %s", in.Minimum.String(), in.Maximum.String())
	}
	if in.MinLength != nil && in.MaxLength != nil && *in.MinLength > *in.MaxLength {
		return bad(".input", "minLength %d is above maxLength %d", *in.MinLength, *in.MaxLength)
	}
	if in.Pattern != "" {
		if _, err := regexp.Compile(in.Pattern); err != nil {
			return bad(".input.pattern", "pattern is not a regular expression: %v", err)
		}
	}
	return nil
}

// validateSealing checks that an ask with a sensitive question carries a
// sealing key that is a P-256 point.
func validateSealing(spec *hitlv1.UserQuestionSpec) error {
	sensitive := false
	for _, q := range spec.Questions {
		sensitive = sensitive || q.Sensitive
	}
	if !sensitive {
		return nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(spec.SealingKey)
	if spec.SealingKey == "" || err != nil || len(raw) != 65 || raw[0] != 4 {
		return newError(hitlv1.CodeBadInput, "", "spec.sealingKey",
			"a sensitive question needs spec.sealingKey, the asking agent's P-256 public key (65 bytes, unpadded base64url) its answer is sealed to")
	}
	return nil
}

// Bound reads a minimum or maximum: an integer, or a decimal as a string.
// ok is false when b is nil.
func Bound(b *intstr.IntOrString) (v float64, ok bool, err error) {
	if b == nil {
		return 0, false, nil
	}
	if b.Type == intstr.Int {
		return float64(b.IntVal), true, nil
	}
	if !boundText.MatchString(b.StrVal) {
		return 0, false, fmt.Errorf("%q is not a number", b.StrVal)
	}
	v, err = strconv.ParseFloat(b.StrVal, 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false, fmt.Errorf("%q is not a finite number", b.StrVal)
	}
	return v, true, nil
}

// CheckValue checks a free-text answer against a question's input rule and
// returns the broken rule in words, or "" when the value fits. A question
// without input takes any text.
func CheckValue(in *hitlv1.AnswerInput, value string) string {
	if in == nil {
		return ""
	}
	switch in.Type {
	case hitlv1.InputNumber, hitlv1.InputInteger:
		return checkNumber(in, value)
	case hitlv1.InputBoolean:
		if value != "true" && value != "false" {
			return fmt.Sprintf("%s is not a boolean: answer true or false", quote(value))
		}
	case hitlv1.InputDate:
		if _, err := time.Parse(time.DateOnly, value); err != nil {
			return fmt.Sprintf("%s is not a date (YYYY-MM-DD, e.g. 2026-12-24)", quote(value))
		}
	case hitlv1.InputDateTime:
		if _, err := ParseDateTime(value); err != nil {
			return fmt.Sprintf("%s is not a date and time with an offset (RFC 3339, e.g. 2026-12-24T18:00:00Z)", quote(value))
		}
	case hitlv1.InputEmail:
		if !isEmail(value) {
			return fmt.Sprintf("%s is not an email address (name@example.com, no display name)", quote(value))
		}
	case hitlv1.InputURI:
		if !isURI(value) {
			return fmt.Sprintf("%s is not an absolute URI (with a scheme, e.g. https://example.com/x)", quote(value))
		}
	}
	return checkText(in, value)
}

// checkText checks the length and pattern rules of a textual answer.
func checkText(in *hitlv1.AnswerInput, value string) string {
	n := utf8.RuneCountInString(value)
	if in.MinLength != nil && n < int(*in.MinLength) {
		return fmt.Sprintf("the answer has %d characters, fewer than minLength %d", n, *in.MinLength)
	}
	if in.MaxLength != nil && n > int(*in.MaxLength) {
		return fmt.Sprintf("the answer has %d characters, more than maxLength %d", n, *in.MaxLength)
	}
	if in.Pattern != "" {
		re, err := compiled(in.Pattern)
		if err != nil {
			return fmt.Sprintf("the question's pattern %q is not a regular expression", in.Pattern)
		}
		if !re.MatchString(value) {
			return fmt.Sprintf("the answer does not match pattern %q", in.Pattern)
		}
	}
	return ""
}

func checkNumber(in *hitlv1.AnswerInput, value string) string {
	if in.Type == hitlv1.InputInteger {
		if !integerText.MatchString(value) {
			return fmt.Sprintf("%s is not an integer (decimal digits, e.g. 42)", quote(value))
		}
	} else if !numberText.MatchString(value) {
		return fmt.Sprintf("%s is not a number (e.g. 42, -1.5, 2e3)", quote(value))
	}
	v, err := strconv.ParseFloat(value, 64)
	if err != nil || math.IsInf(v, 0) {
		return fmt.Sprintf("%s is out of range", quote(value))
	}
	if in.Type == hitlv1.InputInteger {
		if _, err := strconv.ParseInt(value, 10, 64); err != nil {
			return fmt.Sprintf("%s is out of the range of a 64-bit integer", quote(value))
		}
	}
	if lo, ok, _ := Bound(in.Minimum); ok && v < lo {
		return fmt.Sprintf("%s is below minimum %s", value, in.Minimum.String())
	}
	if hi, ok, _ := Bound(in.Maximum); ok && v > hi {
		return fmt.Sprintf("%s is above maximum %s", value, in.Maximum.String())
	}
	return ""
}

// patterns caches compiled patterns: every reply to a question checks its
// pattern, and compiling costs far more than matching. It is cleared when
// it reaches maxPatterns, so hostile questions cannot grow it.
var patterns = struct {
	sync.Mutex
	m map[string]*regexp.Regexp
}{m: map[string]*regexp.Regexp{}}

const maxPatterns = 1024

func compiled(pattern string) (*regexp.Regexp, error) {
	patterns.Lock()
	re, ok := patterns.m[pattern]
	patterns.Unlock()
	if ok {
		return re, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	patterns.Lock()
	if len(patterns.m) >= maxPatterns {
		clear(patterns.m)
	}
	patterns.m[pattern] = re
	patterns.Unlock()
	return re, nil
}

// ParseDateTime reads an RFC 3339 date and time with an offset.
func ParseDateTime(value string) (time.Time, error) {
	// time.Parse accepts forms RFC 3339 does not (a lowercase t or z, a
	// one-digit hour, a comma before the fraction, an offset of 24:60): the
	// answer is first checked to be written as RFC 3339, each field its
	// full width at its place.
	if !isRFC3339(value) {
		return time.Time{}, fmt.Errorf("not RFC 3339")
	}
	return time.Parse(time.RFC3339Nano, value)
}

// isRFC3339 checks the form of an RFC 3339 date-time (the fields' ranges
// but the offset's are left to time.Parse).
func isRFC3339(v string) bool {
	const layout = "dddd-dd-ddTdd:dd:dd"
	if !fits(v, layout) {
		return false
	}
	rest := v[len(layout):]
	if len(rest) > 0 && rest[0] == '.' {
		n := 1
		for n < len(rest) && '0' <= rest[n] && rest[n] <= '9' {
			n++
		}
		if n == 1 {
			return false
		}
		rest = rest[n:]
	}
	if rest == "Z" {
		return true
	}
	return len(rest) == len("+dd:dd") && (rest[0] == '+' || rest[0] == '-') && fits(rest[1:], "dd:dd") &&
		rest[1:3] <= "23" && rest[4:6] <= "59"
}

// fits reports whether v starts with layout, where d in layout is any
// decimal digit and every other byte stands for itself.
func fits(v, layout string) bool {
	if len(v) < len(layout) {
		return false
	}
	for i := range len(layout) {
		if c := v[i]; layout[i] == 'd' && (c < '0' || c > '9') || layout[i] != 'd' && c != layout[i] {
			return false
		}
	}
	return true
}

func isEmail(value string) bool {
	// Only the dot-atom form: no quoted local part, no domain literal, no
	// display name, ASCII only.
	if value == "" || strings.ContainsFunc(value, func(r rune) bool { return r > unicode.MaxASCII || unicode.IsSpace(r) }) ||
		strings.ContainsAny(value, "<>\"(),;[]\\:") {
		return false
	}
	a, err := mail.ParseAddress(value)
	if err != nil || a.Address != value || a.Name != "" {
		return false
	}
	local, domain, ok := strings.Cut(value, "@")
	return ok && local != "" && domain != "" && !strings.HasPrefix(domain, ".") && !strings.HasSuffix(domain, ".")
}

func isURI(value string) bool {
	if value == "" || strings.ContainsFunc(value, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return false
	}
	// A scheme, and something after it other than an empty authority
	// ("https://" names nothing).
	u, err := url.Parse(value)
	if err != nil || u.Scheme == "" {
		return false
	}
	rest := value[len(u.Scheme)+1:]
	if rest == "" || rest == "//" {
		return false
	}
	// url.Parse takes the last colon of a host as its port's; RFC 3986
	// allows no colon in a host name, so "a:1:2" names no host.
	if !strings.HasPrefix(u.Host, "[") && strings.Count(u.Host, ":") > 1 {
		return false
	}
	// url.Parse leaves an opaque part's escapes unchecked.
	for i := strings.IndexByte(value, '%'); i >= 0; i = strings.IndexByte(value, '%') {
		if i+2 >= len(value) || !isHex(value[i+1]) || !isHex(value[i+2]) {
			return false
		}
		value = value[i+3:]
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// quote shows a value in a message, cut to 64 characters.
func quote(v string) string {
	if utf8.RuneCountInString(v) > 64 {
		r := []rune(v)
		return strconv.Quote(string(r[:64])) + "…"
	}
	return strconv.Quote(v)
}
