package cli

import (
	"bufio"
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// The fuzz targets below turn what a person types (answer's flags, the
// interactive prompt) into answer batches, for asks decoded from the fuzz
// input. The label palette holds the labels that flags and prompts find
// hard: a comma, an equals sign, a number, spaces around a label.
var (
	fuzzOptionLabels = []string{"a", "b", "a,b", "x=y", "1", " sp "}
	fuzzCustomTexts  = []string{"", "ship it", "42", " padded ", "a,b", "two\nlines", "k=v"}
)

// fuzzTape hands out the fuzz bytes one at a time, and zeros once they run
// out, so that every input decodes to exactly one ask and one batch.
type fuzzTape struct {
	data []byte
	pos  int
}

func (t *fuzzTape) pick(n int) int {
	if t.pos >= len(t.data) {
		return 0
	}
	b := t.data[t.pos]
	t.pos++
	return int(b) % n
}

// decodeAsk builds a valid ask of 1-3 questions: single-select or
// multi-select with some of the palette's labels as options, free text, or
// (alone in its ask) an Approval question.
func decodeAsk(t *fuzzTape) *hitlv1.UserQuestion {
	q := &hitlv1.UserQuestion{}
	q.Name = "fuzz"
	n := 1 + t.pick(3)
	for i := range n {
		question := hitlv1.Question{ID: "q" + strconv.Itoa(i), Question: "Question " + strconv.Itoa(i) + "?"}
		kind := t.pick(4)
		switch {
		case kind == 3 && n == 1:
			rot := t.pick(len(fuzzOptionLabels))
			label := func(k int) string { return fuzzOptionLabels[(rot+k)%len(fuzzOptionLabels)] }
			approval := &hitlv1.ApprovalIntent{Approve: label(0), Reject: label(1)}
			if t.pick(2) == 1 {
				approval.Always = label(2)
			}
			for _, l := range []string{approval.Approve, approval.Reject, approval.Always} {
				if l != "" {
					question.Options = append(question.Options, hitlv1.QuestionOption{Label: l})
				}
			}
			question.Intent = &hitlv1.QuestionIntent{Type: hitlv1.IntentApproval, Approval: approval}
		case kind == 2:
			// Free text only.
		default:
			mask := t.pick(1 << len(fuzzOptionLabels))
			for bit, l := range fuzzOptionLabels {
				if mask&(1<<bit) != 0 {
					question.Options = append(question.Options, hitlv1.QuestionOption{Label: l})
				}
			}
			question.MultiSelect = kind == 1
		}
		q.Spec.Questions = append(q.Spec.Questions, question)
	}
	q.Spec.Agent = "fuzz"
	return q
}

// decodeBatch builds a batch of one item per question: a skip, a custom
// text, or labels picked by position (repeats included), with custom text
// for a multi-select question. It may break rules; callers that need a
// valid batch check it.
func decodeBatch(t *fuzzTape, qs []hitlv1.Question) []hitlv1.AnswerItem {
	answers := make([]hitlv1.AnswerItem, 0, len(qs))
	for _, q := range qs {
		item := hitlv1.AnswerItem{ID: q.ID}
		switch t.pick(3) {
		case 1:
			item.Custom = fuzzCustomTexts[t.pick(len(fuzzCustomTexts))]
		case 2:
			if len(q.Options) > 0 {
				for k := 1 + t.pick(3); k > 0; k-- {
					item.Selected = append(item.Selected, q.Options[t.pick(len(q.Options))].Label)
				}
			}
			if q.MultiSelect {
				item.Custom = fuzzCustomTexts[t.pick(len(fuzzCustomTexts))]
			}
		}
		answers = append(answers, item)
	}
	return answers
}

// lines splits a fuzz string into flag values, one a line; "" is no flag.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// flagsFor writes a batch as answer's flags: one --select per label, a
// --custom for custom text, and for a skipped question either nothing or
// --skip (the tape chooses).
func flagsFor(t *fuzzTape, answers []hitlv1.AnswerItem) (selects, customs, skips []string) {
	for _, a := range answers {
		for _, l := range a.Selected {
			selects = append(selects, a.ID+"="+l)
		}
		if a.Custom != "" {
			customs = append(customs, a.ID+"="+a.Custom)
		}
		if a.Skipped() && t.pick(2) == 1 {
			skips = append(skips, a.ID)
		}
	}
	return selects, customs, skips
}

// flagModel is what the flags of `answer` mean, read independently of
// batchFromFlags: per question id, the labels and the custom text named,
// and which flags are malformed, unknown or contradictory.
type flagModel struct {
	items     map[string]*hitlv1.AnswerItem
	skipped   map[string]bool
	customs   map[string]int
	malformed []string // the flags that do not have the id=value form
	offenders map[string]bool
}

func readFlags(qs []hitlv1.Question, selects, customs, skips []string) flagModel {
	m := flagModel{items: map[string]*hitlv1.AnswerItem{}, skipped: map[string]bool{}, customs: map[string]int{}, offenders: map[string]bool{}}
	asked := map[string]*hitlv1.Question{}
	for i := range qs {
		asked[qs[i].ID] = &qs[i]
	}
	item := func(id string) *hitlv1.AnswerItem {
		if asked[id] == nil {
			m.offenders[id] = true
			return &hitlv1.AnswerItem{}
		}
		if m.items[id] == nil {
			m.items[id] = &hitlv1.AnswerItem{ID: id}
		}
		return m.items[id]
	}
	for _, s := range selects {
		i := strings.Index(s, "=")
		if i < 0 || i == len(s)-1 {
			m.malformed = append(m.malformed, "--select "+strconv.Quote(s))
			continue
		}
		id, value := s[:i], s[i+1:]
		it := item(id)
		// A value that is exactly one of the question's labels is that
		// label, commas and all; otherwise it lists labels.
		if q := asked[id]; q != nil && hasLabel(q, value) {
			it.Selected = append(it.Selected, value)
		} else {
			it.Selected = append(it.Selected, strings.Split(value, ",")...)
		}
	}
	for _, s := range customs {
		i := strings.Index(s, "=")
		if i < 0 {
			m.malformed = append(m.malformed, "--custom "+strconv.Quote(s))
			continue
		}
		id := s[:i]
		item(id).Custom = s[i+1:]
		m.customs[id]++
	}
	for _, id := range skips {
		item(id)
		m.skipped[id] = true
	}
	for id := range asked {
		// A question both skipped and answered, or given two texts, is
		// refused rather than read one way or the other.
		if it := m.items[id]; it != nil && m.skipped[id] && (len(it.Selected) > 0 || m.customs[id] > 0) {
			m.offenders[id] = true
		}
		if m.customs[id] > 1 {
			m.offenders[id] = true
		}
	}
	return m
}

func hasLabel(q *hitlv1.Question, label string) bool {
	for _, o := range q.Options {
		if o.Label == label {
			return true
		}
	}
	return false
}

// checkRefusal asserts that err refuses a batch by the rules: BAD_ANSWER
// naming a question of the ask, or the all-skipped rule, which names none.
func checkRefusal(t *testing.T, qs []hitlv1.Question, answers []hitlv1.AnswerItem, err error) {
	t.Helper()
	var v *validation.Error
	if !errors.As(err, &v) || v.Code != hitlv1.CodeBadAnswer {
		t.Fatalf("refused without a BAD_ANSWER *validation.Error: %v", err)
	}
	if v.QuestionID == "" {
		for _, a := range answers {
			if !a.Skipped() {
				t.Fatalf("an error that names no question refuses a batch that does not skip everything: %v\nanswers: %q", err, answers)
			}
		}
		return
	}
	for _, q := range qs {
		if q.ID == v.QuestionID {
			return
		}
	}
	t.Fatalf("the error names %q, not a question of the ask: %v", v.QuestionID, err)
}

// FuzzAnswerFlags fuzzes `kubectl hitl answer NAME --select/--custom/--skip`.
// Properties: batchFromFlags never panics; it refuses exactly the flags
// that are malformed, name an unknown question or contradict each other,
// naming the question (BAD_ANSWER) or quoting the flag; what it accepts is
// exactly what the flags say, one item per question in ask order, and
// ValidateAnswers either accepts it or refuses it naming a question id;
// and every valid batch written as flags reads back as itself.
func FuzzAnswerFlags(f *testing.F) {
	type seed struct {
		shape                   []byte
		selects, customs, skips string
	}
	for _, s := range []seed{
		{[]byte{0, 0, 3}, "q0=a", "", ""},                                  // one single-select question: a, b
		{[]byte{0, 1, 7}, "q0=a,b", "q0=more", ""},                         // multi-select over a, b, "a,b": the label "a,b"
		{[]byte{0, 1, 3}, "q0=a,b", "", ""},                                // multi-select over a, b: two labels
		{[]byte{1, 0, 11, 2}, "q0=x=y", "q1=notes", ""},                    // "x=y" is a label; q1 free text
		{[]byte{1, 0, 3, 2}, "q0=a", "q1=one\nq1=two", ""},                 // two texts for q1
		{[]byte{1, 0, 3, 2}, "q0=a", "q1=text", "q1"},                      // q1 skipped and answered
		{[]byte{2, 2, 1, 63, 0, 3}, "q1=1\nq2=b", "", "q0"},                // three questions
		{[]byte{0, 3, 0, 1}, "q0=a", "", ""},                               // Approval
		{[]byte{0, 0, 3}, "nope=a", "", ""},                                // unknown id
		{[]byte{0, 0, 3}, "q0", "q0", ""},                                  // malformed
		{[]byte{0, 0, 3}, "q0=", "", "zz"},                                 // empty labels, unknown skip
		{[]byte{0, 1, 63, 2, 2, 1, 2, 3, 5}, "", "", ""},                   // round trip through " sp " and "1"
		{[]byte{1, 1, 7, 2, 2, 2, 2, 0, 1, 6, 1, 0}, "q0=a,b,a", "", "q1"}, // round trip through "a,b"
		{[]byte{0, 0, 12, 1, 4}, "q0= sp ", "", ""},                        // a label with spaces
	} {
		f.Add(s.shape, s.selects, s.customs, s.skips)
	}
	f.Fuzz(func(t *testing.T, shape []byte, selectText, customText, skipText string) {
		checkAnswerFlags(t, shape, selectText, customText, skipText)
	})
}

// checkAnswerFlags checks FuzzAnswerFlags's properties on one input, and
// reports whether the input reached the round trip.
func checkAnswerFlags(t *testing.T, shape []byte, selectText, customText, skipText string) bool {
	t.Helper()
	{
		tape := &fuzzTape{data: shape}
		q := decodeAsk(tape)
		qs := q.Spec.Questions
		if err := validation.ValidateAsk(&q.Spec, 0); err != nil {
			t.Fatalf("the decoder built an invalid ask: %v", err)
		}
		selects, customs, skips := lines(selectText), lines(customText), lines(skipText)

		got, err := batchFromFlags(q, selects, customs, skips)
		m := readFlags(qs, selects, customs, skips)
		refused := len(m.malformed) > 0 || len(m.offenders) > 0
		switch {
		case refused && err == nil:
			t.Fatalf("flags accepted that must be refused (malformed %q, offenders %v): %q", m.malformed, m.offenders, got)
		case !refused && err != nil:
			t.Fatalf("well-formed flags refused: %v", err)
		case err != nil:
			var v *validation.Error
			if errors.As(err, &v) {
				if v.Code != hitlv1.CodeBadAnswer || !m.offenders[v.QuestionID] {
					t.Fatalf("the error names %q (code %s), not an offending question %v: %v", v.QuestionID, v.Code, m.offenders, err)
				}
			} else if !containsAny(err.Error(), m.malformed) {
				t.Fatalf("a usage error that quotes none of the malformed flags %q: %v", m.malformed, err)
			}
		default:
			want := make([]hitlv1.AnswerItem, 0, len(qs))
			for _, question := range qs {
				if it := m.items[question.ID]; it != nil {
					want = append(want, *it)
				} else {
					want = append(want, hitlv1.AnswerItem{ID: question.ID})
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("the batch is not what the flags say:\n got %q\nwant %q", got, want)
			}
			if verr := validation.ValidateAnswers(qs, got); verr != nil {
				checkRefusal(t, qs, got, verr)
			}
		}

		// Round trip: a valid batch, written as flags, reads back as itself.
		batch := decodeBatch(tape, qs)
		if validation.ValidateAnswers(qs, batch) != nil {
			return false
		}
		selects, customs, skips = flagsFor(tape, batch)
		back, err := batchFromFlags(q, selects, customs, skips)
		if err != nil || !reflect.DeepEqual(back, batch) {
			t.Fatalf("round trip of %q through --select %q --custom %q --skip %q: got %q, %v", batch, selects, customs, skips, back, err)
		}
		return true
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// typed is what a person types at promptBatch's prompts to give a batch,
// and whether the batch can be typed at all: custom text is one trimmed,
// non-empty line, and the custom text of a single-select question with
// options is not a number (a number there picks an option).
func typed(qs []hitlv1.Question, answers []hitlv1.AnswerItem) (string, bool) {
	var b strings.Builder
	index := func(q *hitlv1.Question, label string) string {
		for i, o := range q.Options {
			if o.Label == label {
				return strconv.Itoa(i + 1)
			}
		}
		return "?"
	}
	text := func(s string) bool {
		return s == "" || (s == strings.TrimSpace(s) && !strings.ContainsAny(s, "\r\n"))
	}
	for i, a := range answers {
		q := &qs[i]
		if !text(a.Custom) {
			return "", false
		}
		switch {
		case len(q.Options) == 0:
			b.WriteString(a.Custom + "\n")
		case q.MultiSelect:
			var picked []string
			for _, l := range a.Selected {
				picked = append(picked, index(q, l))
			}
			b.WriteString(strings.Join(picked, ",") + "\n" + a.Custom + "\n")
		case len(a.Selected) == 1:
			b.WriteString(index(q, a.Selected[0]) + "\n")
		default:
			if _, err := strconv.Atoi(a.Custom); err == nil {
				return "", false
			}
			b.WriteString(a.Custom + "\n")
		}
	}
	return b.String(), true
}

// FuzzPromptBatch fuzzes the interactive prompt of `answer` and `inbox`.
// Properties: promptBatch never panics; a batch it returns is one item per
// question in ask order that ValidateAnswers accepts, whose labels are
// options and whose custom texts are lines the person typed; it fails only
// when the input ends, or with a BAD_ANSWER naming a question (or the
// all-skipped rule) after the last attempt; and every valid batch that can
// be typed, typed, reads back as itself on the first attempt.
func FuzzPromptBatch(f *testing.F) {
	for _, s := range []struct {
		shape []byte
		typed string
	}{
		{[]byte{0, 0, 3}, "1\n"},
		{[]byte{0, 0, 3}, "3\n\n2\n"},                      // out of range, skip (refused: all skipped), then b
		{[]byte{1, 1, 7, 2}, "1,3\nmore\nnotes\n"},         // multi-select with "a,b"; free text
		{[]byte{1, 1, 7, 2}, "1,1\n\n\n1\n\n\n\n\n"},       // a label twice: asked again
		{[]byte{0, 3, 0, 1}, "yes\n2\n"},                   // Approval takes a number only
		{[]byte{0, 0, 3}, "no newline at the end"},         // free text replacing the choice
		{[]byte{2, 2, 1, 63, 0, 3}, "\n1, 2 ,\n\n"},        // three questions; input ends
		{[]byte{0, 0, 63, 1, 4}, ""},                       // round trip: custom "42" cannot be typed
		{[]byte{1, 1, 63, 2, 2, 2, 1, 6, 1, 0, 1, 1}, "x"}, // round trip through the multi-select
		{[]byte{0, 2, 1, 3}, "\r\n"},                       // free text question, skipped
		{[]byte("1"), "\n0\r0"},                            // a carriage return inside a line is text
	} {
		f.Add(s.shape, s.typed)
	}
	f.Fuzz(func(t *testing.T, shape []byte, input string) {
		checkPromptBatch(t, shape, input)
	})
}

// checkPromptBatch checks FuzzPromptBatch's properties on one input, and
// reports whether the input reached the round trip.
func checkPromptBatch(t *testing.T, shape []byte, input string) bool {
	t.Helper()
	{
		tape := &fuzzTape{data: shape}
		q := decodeAsk(tape)
		qs := q.Spec.Questions
		var out bytes.Buffer
		got, err := promptBatch(bufio.NewReader(strings.NewReader(input)), &out, q)
		switch {
		case err != nil && strings.Contains(err.Error(), "the input ended"):
		case err != nil:
			checkRefusal(t, qs, nil, err)
		default:
			if verr := validation.ValidateAnswers(qs, got); verr != nil {
				t.Fatalf("the prompt returned a batch that breaks a rule: %v\n%q", verr, got)
			}
			for i, a := range got {
				if a.ID != qs[i].ID {
					t.Fatalf("item %d is %q, want question %q", i, a.ID, qs[i].ID)
				}
				if a.Custom != "" && (a.Custom != strings.TrimSpace(a.Custom) || !strings.Contains(input, a.Custom) || strings.Contains(a.Custom, "\n")) {
					t.Fatalf("custom text %q is not a trimmed line of the input %q", a.Custom, input)
				}
			}
		}

		batch := decodeBatch(tape, qs)
		if validation.ValidateAnswers(qs, batch) != nil {
			return false
		}
		in, ok := typed(qs, batch)
		if !ok {
			return false
		}
		out.Reset()
		back, err := promptBatch(bufio.NewReader(strings.NewReader(in)), &out, q)
		if err != nil || !reflect.DeepEqual(back, batch) {
			t.Fatalf("round trip of %q typed as %q: got %q, %v\n%s", batch, in, back, err, out.String())
		}
		if strings.Contains(out.String(), "try again") {
			t.Fatalf("a valid batch typed as %q was asked again:\n%s", in, out.String())
		}
		return true
	}
}

// A fixed pseudo-random sweep of both fuzz targets' properties, so that
// plain `go test` covers far more than the seeds, and checks that the
// round trips are reached.
func TestAnswerParsingSweep(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	bytesOf := func(n int) []byte {
		b := make([]byte, rng.IntN(n))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	// Flag values and typed lines built from the pieces people type.
	pieces := []string{"q0", "q1", "q2", "zz", "=", ",", "a", "b", "a,b", "x=y", "1", "2", "3", " sp ", "ship it", "\n", ""}
	text := func() string {
		var b strings.Builder
		for k := rng.IntN(8); k > 0; k-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	flagTrips, promptTrips := 0, 0
	const n = 3000
	for range n {
		if checkAnswerFlags(t, bytesOf(24), text(), text(), text()) {
			flagTrips++
		}
		if checkPromptBatch(t, bytesOf(24), text()) {
			promptTrips++
		}
	}
	if flagTrips < n/20 || promptTrips < n/20 {
		t.Fatalf("the sweep reached the round trips %d and %d times of %d; the decoder is lopsided", flagTrips, promptTrips, n)
	}
	t.Logf("round trips: flags %d, prompt %d of %d", flagTrips, promptTrips, n)
}
