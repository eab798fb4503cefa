package validation

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// The label alphabet of generated asks, and the strays that batches may use.
var (
	fuzzLabels      = []string{"a", "b", "c", "d"}
	fuzzStrayLabel  = "x"
	fuzzStrayID     = "zz"
	fuzzCustomTexts = []string{"", "", "other"}
)

// byteTape hands out the fuzz input one byte at a time, and zeros once it
// runs out, so every input decodes to exactly one scenario.
type byteTape struct {
	data []byte
	pos  int
}

func (t *byteTape) pick(n int) int {
	if t.pos >= len(t.data) {
		return 0
	}
	b := t.data[t.pos]
	t.pos++
	return int(b) % n
}

// decodeScenario turns fuzz bytes into a valid ask (1–4 questions, 0–4
// options each, sometimes a lone Approval question) and a batch for it (0–5
// items whose ids and labels may be wrong, repeated or missing).
func decodeScenario(data []byte) ([]hitlv1.Question, []hitlv1.AnswerItem) {
	tape := &byteTape{data: data}

	var qs []hitlv1.Question
	n := 1 + tape.pick(4)
	if n == 1 && tape.pick(4) == 0 {
		// An Approval question: approve, reject and maybe always, drawn
		// distinct from the alphabet by rotating it.
		rot := tape.pick(len(fuzzLabels))
		l := func(k int) string { return fuzzLabels[(rot+k)%len(fuzzLabels)] }
		always := ""
		if tape.pick(2) == 1 {
			always = l(2)
		}
		qs = append(qs, approvalQuestion("q0", l(0), l(1), always).obj())
	} else {
		for i := 0; i < n; i++ {
			b := question("q" + strconv.Itoa(i))
			mask := tape.pick(16)
			var opts []string
			for bit, label := range fuzzLabels {
				if mask&(1<<bit) != 0 {
					opts = append(opts, label)
				}
			}
			b.options(opts...)
			if tape.pick(2) == 1 {
				b.multi()
			}
			qs = append(qs, b.obj())
		}
	}

	ids := make([]string, 0, len(qs)+1)
	for _, q := range qs {
		ids = append(ids, q.ID)
	}
	ids = append(ids, fuzzStrayID)
	labels := append(append([]string(nil), fuzzLabels...), fuzzStrayLabel)

	var answers []hitlv1.AnswerItem
	items := tape.pick(6)
	for i := 0; i < items; i++ {
		a := answer(ids[tape.pick(len(ids))])
		for k := tape.pick(4); k > 0; k-- {
			a.sel(labels[tape.pick(len(labels))])
		}
		a.custom(fuzzCustomTexts[tape.pick(len(fuzzCustomTexts))])
		answers = append(answers, a.obj())
	}
	return qs, answers
}

// verdict is the oracle's reading of a batch.
type verdict struct {
	// offenders are the ids (question ids or stray ids) of items or
	// questions that break a rule.
	offenders map[string]bool
	// allSkipped: a non-empty batch in which every item is a skip.
	allSkipped bool
}

func (v verdict) valid() bool { return len(v.offenders) == 0 && !v.allSkipped }

// oracle judges a batch by SPEC §1 "Answer batches", independently of
// ValidateAnswers: it counts everything first, then evaluates each rule as
// its own boolean.
func oracle(qs []hitlv1.Question, answers []hitlv1.AnswerItem) verdict {
	v := verdict{offenders: map[string]bool{}}

	asked := map[string]hitlv1.Question{}
	for _, q := range qs {
		asked[q.ID] = q
	}
	named := map[string]int{}
	for _, a := range answers {
		named[a.ID]++
	}

	// Every question id of the ask exactly once ...
	for id := range asked {
		if named[id] != 1 {
			v.offenders[id] = true
		}
	}
	// ... and no other id.
	for id := range named {
		if _, ok := asked[id]; !ok {
			v.offenders[id] = true
		}
	}

	skips := 0
	for _, a := range answers {
		q, known := asked[a.ID]
		hasCustom := a.Custom != ""
		isSkip := len(a.Selected) == 0 && !hasCustom
		if isSkip {
			skips++
		}
		if !known {
			continue
		}

		optionSet := map[string]bool{}
		for _, o := range q.Options {
			optionSet[o.Label] = true
		}
		times := map[string]int{}
		for _, s := range a.Selected {
			times[s]++
		}

		labelsAreOptions := true
		labelsOnce := true
		for s, c := range times {
			labelsAreOptions = labelsAreOptions && optionSet[s]
			labelsOnce = labelsOnce && c == 1
		}
		isApproval := q.Intent != nil && q.Intent.Type == hitlv1.IntentApproval
		singleAtMostOne := q.MultiSelect || len(a.Selected) <= 1
		singleCustomReplaces := q.MultiSelect || !hasCustom || len(a.Selected) == 0
		noOptionsCustomOrSkip := len(q.Options) > 0 || len(a.Selected) == 0
		approvalExactlyOne := !isApproval || (len(a.Selected) == 1 && !hasCustom)

		rules := []bool{labelsAreOptions, labelsOnce, singleAtMostOne, singleCustomReplaces, noOptionsCustomOrSkip, approvalExactlyOne}
		for _, ok := range rules {
			if !ok {
				v.offenders[a.ID] = true
			}
		}
	}

	// Some questions may be skipped, not all of them.
	v.allSkipped = len(answers) > 0 && skips == len(answers)
	return v
}

// checkAgainstOracle runs ValidateAnswers on the scenario the bytes decode to
// and compares it with the oracle.
func checkAgainstOracle(t *testing.T, data []byte) {
	t.Helper()
	qs, answers := decodeScenario(data)
	if err := ValidateAsk(&hitlv1.UserQuestionSpec{Agent: "fuzz", Questions: qs}, 0); err != nil {
		t.Fatalf("the generator built an invalid ask: %v", err)
	}

	err := ValidateAnswers(qs, answers)
	v := oracle(qs, answers)

	if v.valid() {
		if err != nil {
			t.Fatalf("oracle accepts, ValidateAnswers rejects: %v\nquestions: %+v\nanswers: %+v", err, qs, answers)
		}
		return
	}
	if err == nil {
		t.Fatalf("oracle rejects (offenders %v, all skipped %v), ValidateAnswers accepts\nquestions: %+v\nanswers: %+v",
			v.offenders, v.allSkipped, qs, answers)
	}
	if CodeOf(err) != hitlv1.CodeBadAnswer {
		t.Fatalf("code %q, want BAD_ANSWER: %v", CodeOf(err), err)
	}
	if !strings.HasPrefix(err.Error(), "BAD_ANSWER: ") {
		t.Fatalf("message %q does not start with BAD_ANSWER: ", err.Error())
	}
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("err %T is not an *Error", err)
	}
	switch {
	case e.QuestionID == "" && !v.allSkipped:
		t.Fatalf("error names no question, but the batch does not skip everything: %v\nanswers: %+v", err, answers)
	case e.QuestionID != "" && !v.offenders[e.QuestionID]:
		t.Fatalf("error names %q, which the oracle finds fine (offenders %v): %v\nquestions: %+v\nanswers: %+v",
			e.QuestionID, v.offenders, err, qs, answers)
	}
}

func FuzzValidateAnswers(f *testing.F) {
	seeds := [][]byte{
		{},                       // a lone Approval question, empty batch
		{0, 0, 0, 0, 1, 1, 0, 0}, // Approval, answered with its approve label
		{0, 0, 1, 1, 2, 0, 2, 1}, // Approval, two labels
		{1, 3, 1, 5, 0, 2, 0, 0, 1, 1, 1, 2, 1, 2, 2}, // two questions, both answered
		{3, 15, 1, 15, 0, 0, 1, 0, 1, 5, 3, 4, 0, 1, 2, 0, 4, 0, 0, 2, 4, 3, 2, 1, 0, 0, 0},
		{2, 0, 0, 7, 1, 9, 0, 3, 0, 0, 2, 1, 0, 1, 0, 2, 0, 2, 3, 0, 1, 4, 0, 0}, // question without options, stray id
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAgainstOracle(t, data)
	})
}

// A fixed pseudo-random sweep of the same property, so that plain `go test`
// covers far more than the fuzz seeds.
func TestValidateAnswersAgainstOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	valid := 0
	for i := 0; i < 50000; i++ {
		data := make([]byte, rng.IntN(40))
		for j := range data {
			data[j] = byte(rng.UintN(256))
		}
		checkAgainstOracle(t, data)
		if qs, answers := decodeScenario(data); oracle(qs, answers).valid() {
			valid++
		}
	}
	// Both sides of the property must actually be exercised.
	if valid < 100 || valid > 49900 {
		t.Fatalf("the sweep produced %d valid batches out of 50000; the generator is lopsided", valid)
	}
	t.Logf("%d of 50000 generated batches are valid", valid)
}
