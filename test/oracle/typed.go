// Package oracle decides, independently of api/v1alpha1/validation, which
// free-text answers fit a question's input rule, so that tests can check
// the validation code (and the admission paths that use it) against a
// second opinion. It is written differently on purpose: by regular
// expressions and calendar arithmetic where the code under test uses
// parsers, so that one's mistake is not the other's.
package oracle

import (
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/intstr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

var (
	number   = regexp.MustCompile(`^-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?$`)
	integer  = regexp.MustCompile(`^-?(0|[1-9]\d*)$`)
	date     = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})$`)
	dateTime = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|([-+])(\d{2}):(\d{2}))$`)
	// email is the dot-atom form of RFC 5322: what hitl accepts.
	atom  = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
	email = regexp.MustCompile(`^` + atom + `(\.` + atom + `)*@` + atom + `(\.` + atom + `)*$`)
	uri   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:[^\s\x00-\x1f\x7f]+$`)
)

// Fits reports whether value fits in (a question without input takes any
// value).
func Fits(in *hitlv1.AnswerInput, value string) bool {
	if in == nil {
		return true
	}
	switch in.Type {
	case hitlv1.InputNumber, hitlv1.InputInteger:
		return fitsNumber(in, value)
	case hitlv1.InputBoolean:
		return value == "true" || value == "false"
	case hitlv1.InputDate:
		m := date.FindStringSubmatch(value)
		return m != nil && validDay(m[1], m[2], m[3])
	case hitlv1.InputDateTime:
		m := dateTime.FindStringSubmatch(value)
		if m == nil || !validDay(m[1], m[2], m[3]) || atoi(m[4]) > 23 || atoi(m[5]) > 59 || atoi(m[6]) > 59 {
			return false
		}
		return m[8] == "Z" || (atoi(m[10]) <= 23 && atoi(m[11]) <= 59)
	case hitlv1.InputEmail:
		if !email.MatchString(value) {
			return false
		}
	case hitlv1.InputURI:
		_, rest, _ := strings.Cut(value, ":")
		if !uri.MatchString(value) || rest == "//" || strings.Contains(value, "%") && !validEscapes(value) || !validPort(rest) {
			return false
		}
	}
	n := utf8.RuneCountInString(value)
	if in.MinLength != nil && n < int(*in.MinLength) || in.MaxLength != nil && n > int(*in.MaxLength) {
		return false
	}
	if in.Pattern != "" {
		return regexp.MustCompile(in.Pattern).MatchString(value)
	}
	return true
}

// fitsNumber compares exactly, with big rationals: no float rounding.
func fitsNumber(in *hitlv1.AnswerInput, value string) bool {
	re := number
	if in.Type == hitlv1.InputInteger {
		re = integer
	}
	if !re.MatchString(value) {
		return false
	}
	if in.Type == hitlv1.InputInteger {
		if _, err := strconv.ParseInt(value, 10, 64); err != nil {
			return false
		}
	} else if f, err := strconv.ParseFloat(value, 64); err != nil || math.IsInf(f, 0) {
		return false
	}
	v, ok := new(big.Rat).SetString(value)
	if !ok {
		return false
	}
	if lo := rat(in.Minimum); lo != nil && v.Cmp(lo) < 0 {
		return false
	}
	if hi := rat(in.Maximum); hi != nil && v.Cmp(hi) > 0 {
		return false
	}
	return true
}

func rat(b *intstr.IntOrString) *big.Rat {
	if b == nil {
		return nil
	}
	r, ok := new(big.Rat).SetString(b.String())
	if !ok {
		return nil
	}
	return r
}

func validDay(y, m, d string) bool {
	year, month, day := atoi(y), atoi(m), atoi(d)
	if month < 1 || month > 12 || day < 1 {
		return false
	}
	days := [...]int{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[month-1]
	if month == 2 && (year%4 == 0 && year%100 != 0 || year%400 == 0) {
		days = 29
	}
	return day <= days
}

// validPort checks the port of a URI's authority (after "scheme:"): the
// host name takes no colon, so what follows the first colon of a host that
// is no [IP literal] is digits, or nothing.
func validPort(rest string) bool {
	authority, ok := strings.CutPrefix(rest, "//")
	if !ok {
		return true
	}
	if end := strings.IndexAny(authority, "/?#"); end >= 0 {
		authority = authority[:end]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		authority = authority[at+1:]
	}
	if strings.HasPrefix(authority, "[") {
		return true
	}
	_, port, _ := strings.Cut(authority, ":")
	return port == "" || strings.Trim(port, "0123456789") == ""
}

func validEscapes(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
