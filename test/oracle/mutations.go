package oracle

import (
	"math/rand/v2"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Seeds are a rule of each input type, with the bounds it takes, and a
// value that fits each: what Mutations starts from.
var Seeds = []struct {
	In    *hitlv1.AnswerInput
	Value string
}{
	{&hitlv1.AnswerInput{Type: hitlv1.InputString, MinLength: ptr.To[int32](3), MaxLength: ptr.To[int32](8), Pattern: `^T-[0-9]+$`}, "T-1234"},
	{&hitlv1.AnswerInput{Type: hitlv1.InputNumber, Minimum: ptr.To(intstr.FromString("-2.5")), Maximum: ptr.To(intstr.FromString("99.75"))}, "12.5"},
	{&hitlv1.AnswerInput{Type: hitlv1.InputInteger, Minimum: ptr.To(intstr.FromInt32(1)), Maximum: ptr.To(intstr.FromInt32(12))}, "7"},
	{&hitlv1.AnswerInput{Type: hitlv1.InputBoolean}, "true"},
	{&hitlv1.AnswerInput{Type: hitlv1.InputDate}, "2026-02-28"},
	{&hitlv1.AnswerInput{Type: hitlv1.InputDateTime}, "2026-12-24T18:30:00+01:00"},
	{&hitlv1.AnswerInput{Type: hitlv1.InputEmail, MaxLength: ptr.To[int32](24)}, "ops.team@example.com"},
	{&hitlv1.AnswerInput{Type: hitlv1.InputURI, MinLength: ptr.To[int32](10)}, "https://tickets.example.com/T-1"},
}

// mutate changes value by one of a few edits, with characters that matter
// to the types: digits, signs, separators, letters.
func mutate(r *rand.Rand, value string) string {
	const alphabet = "0123456789-+.:eETZ@/ xa"
	b := []rune(value)
	at := r.IntN(len(b) + 1)
	c := rune(alphabet[r.IntN(len(alphabet))])
	switch r.IntN(4) {
	case 0: // insert
		b = append(b[:at], append([]rune{c}, b[at:]...)...)
	case 1: // delete
		if at < len(b) {
			b = append(b[:at], b[at+1:]...)
		}
	case 2: // replace
		if at < len(b) {
			b[at] = c
		}
	default: // repeat a stretch, to cross a length bound
		b = append(b, b[at:]...)
	}
	return string(b)
}

// Mutations are n mutations of seed that do not fit in, by the oracle, and
// one that does (seed itself when no mutation fits).
func Mutations(r *rand.Rand, in *hitlv1.AnswerInput, seed string, n int) (bad []string, good string) {
	good = seed
	for tries := 0; len(bad) < n && tries < 10000; tries++ {
		v := mutate(r, seed)
		switch {
		case v == "" || strings.Contains(v, " ") && in.Type == hitlv1.InputURI:
			// An empty text is a skip; a space in a uri is refused by both, but
			// makes a poor case.
		case !Fits(in, v):
			bad = append(bad, v)
		case good == seed && v != seed:
			good = v
		}
	}
	return bad, good
}
