package validation

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// The palettes the decoder draws from. Option labels are "a".."d"; "z"
// labels no option.
var (
	askLabels = []string{"a", "b", "c", "d"}
	// askIDs are the ids a question may take instead of its position's, so
	// that ids repeat, and one is empty.
	askIDs = []string{"q0", "q1", "plan", ""}
	// askOrigins: Subagent is the only one ValidateAsk refuses; the others
	// that the CRD's enum refuses are not its business.
	askOrigins = []hitlv1.Origin{"", "", hitlv1.OriginRoot, hitlv1.OriginRoot, hitlv1.OriginSubagent, "subagent", "Delegated"}
	// askMaxTimeouts: zero means the default maximum (24h).
	askMaxTimeouts = []time.Duration{0, 0, time.Hour, time.Minute, 24 * time.Hour, 1500 * time.Microsecond, time.Millisecond}
	// askOddIntentTypes are intent types that are neither PlanReview nor Approval.
	askOddIntentTypes = []hitlv1.IntentType{"", "Poll", "approval", "planReview"}
)

// askSpecDefaultMax is SPEC §2's default maximum timeout, written here
// rather than read from DefaultMaxTimeout.
const askSpecDefaultMax = 24 * time.Hour

// decodeAskInput turns fuzz bytes into an ask and a maximum timeout. The
// tape is read in a fixed order (max, origin, shape, then the questions,
// then the timeout), and reads zeros once it runs out, so every input is
// exactly one ask.
func decodeAskInput(data []byte) (*hitlv1.UserQuestionSpec, time.Duration) {
	tape := &byteTape{data: data}
	maxTimeout := askMaxTimeouts[tape.pick(len(askMaxTimeouts))]
	spec := &hitlv1.UserQuestionSpec{Agent: "fuzz"}
	spec.Origin = askOrigins[tape.pick(len(askOrigins))]

	approvalAsk := false
	switch shape := tape.pick(8); {
	case shape == 0: // no questions: nil or an empty list
		if tape.pick(2) == 1 {
			spec.Questions = []hitlv1.Question{}
		}
	case shape == 1: // 1..17 questions, more than the CRD allows
		for i := range 1 + tape.pick(17) {
			spec.Questions = append(spec.Questions, decodeAskQuestion(tape, i))
		}
	case shape <= 3: // an Approval ask, sometimes with a second question
		approvalAsk = true
		spec.Questions = append(spec.Questions, decodeApprovalQuestion(tape, "q0"))
		if tape.pick(6) == 5 {
			spec.Questions = append(spec.Questions, decodeAskQuestion(tape, 1))
		}
	default: // 1..3 questions
		for i := range 1 + tape.pick(3) {
			spec.Questions = append(spec.Questions, decodeAskQuestion(tape, i))
		}
	}

	// An Approval ask is blocking, so timeouts are rarer there.
	if !approvalAsk || tape.pick(6) == 5 {
		spec.Timeout = decodeAskTimeout(tape, maxTimeout)
	}
	return spec, maxTimeout
}

// decodeAskQuestion builds question number i: options drawn from the
// labels (sometimes one twice), maybe multiSelect, and no intent, a
// PlanReview intent with a right or wrong approve label, an Approval intent
// (which breaks the ask's shape unless it is alone), or an odd intent type.
func decodeAskQuestion(tape *byteTape, i int) hitlv1.Question {
	q := hitlv1.Question{ID: "q" + strconv.Itoa(i), Question: "Question " + strconv.Itoa(i) + "?"}
	if tape.pick(5) == 4 {
		q.ID = askIDs[tape.pick(len(askIDs))]
	}
	kind := tape.pick(8)
	if kind == 6 {
		// An Approval question inside an ordinary ask.
		a := decodeApprovalQuestion(tape, q.ID)
		a.Question = q.Question
		return a
	}
	mask := tape.pick(16)
	for bit, l := range askLabels {
		if mask&(1<<bit) != 0 {
			q.Options = append(q.Options, hitlv1.QuestionOption{Label: l, Description: "about " + l})
		}
	}
	if repeat := tape.pick(8) == 7; repeat && len(q.Options) > 0 {
		q.Options = append(q.Options, q.Options[0]) // a repeated label
	}
	q.MultiSelect = tape.pick(4) == 3

	switch kind {
	case 4, 5: // PlanReview
		pr := &hitlv1.PlanReviewIntent{CallID: "call-" + strconv.Itoa(i)}
		switch choice, which := tape.pick(5), tape.pick(64); choice {
		case 0, 1:
			if len(q.Options) > 0 {
				pr.Approve = q.Options[which%len(q.Options)].Label
			} else {
				pr.Approve = "a"
			}
		case 2:
			pr.Approve = askLabels[which%len(askLabels)] // an option or not
		case 3:
			pr.Approve = "z"
		case 4:
			pr.Approve = ""
		}
		in := &hitlv1.QuestionIntent{Type: hitlv1.IntentPlanReview, PlanReview: pr}
		switch tape.pick(8) {
		case 6:
			in.PlanReview = nil
		case 7:
			in.Approval = &hitlv1.ApprovalIntent{Approve: "a", Reject: "b"}
		}
		q.Intent = in
		if tape.pick(4) != 3 {
			q.Detail = "# Plan\n1. do it"
		}
	case 7: // neither PlanReview nor Approval
		in := &hitlv1.QuestionIntent{Type: askOddIntentTypes[tape.pick(len(askOddIntentTypes))]}
		switch tape.pick(3) {
		case 1:
			in.PlanReview = &hitlv1.PlanReviewIntent{Approve: "a"}
		case 2:
			in.Approval = &hitlv1.ApprovalIntent{Approve: "a", Reject: "b"}
		}
		q.Intent = in
		if tape.pick(2) == 1 {
			q.Detail = "# Plan"
		}
	default:
		if tape.pick(3) == 0 {
			q.Detail = "more about it"
		}
	}
	return q
}

// decodeApprovalQuestion builds an Approval question: approve, reject and
// maybe always drawn distinct from the labels, the options exactly those,
// and then at most one of the ways to break it; also a subject and a
// display, with or without their en entries.
func decodeApprovalQuestion(tape *byteTape, id string) hitlv1.Question {
	q := hitlv1.Question{ID: id, Question: "Run kubectl delete?"}
	rot := tape.pick(len(askLabels))
	l := func(k int) string { return askLabels[(rot+k)%len(askLabels)] }
	a := &hitlv1.ApprovalIntent{Approve: l(0), Reject: l(1)}
	if tape.pick(2) == 1 {
		a.Always = l(2)
	}
	var opts []string
	for _, label := range []string{a.Approve, a.Reject, a.Always} {
		if label != "" {
			opts = append(opts, label)
		}
	}
	switch tape.pick(14) {
	case 1:
		a.Reject = a.Approve
	case 2:
		a.Always = a.Approve
	case 3:
		a.Always = a.Reject
	case 4:
		a.Approve = ""
	case 5:
		a.Reject = ""
	case 6:
		opts = append(opts, l(3)) // an option that is neither
	case 7:
		opts = opts[:len(opts)-1] // a label that is no option
	case 8:
		opts[0] = "z"
	case 9:
		opts = append(opts, opts[0]) // a repeated label
	case 10:
		a.Always = l(3) // always that is no option
	}
	// Any order of the options.
	for k := tape.pick(len(opts)); k > 0; k-- {
		opts = append(opts[1:], opts[0])
	}
	for _, label := range opts {
		q.Options = append(q.Options, hitlv1.QuestionOption{Label: label})
	}
	q.MultiSelect = tape.pick(6) == 5
	if tape.pick(2) == 1 {
		q.Detail = "kubectl delete pod x"
	}

	switch tape.pick(4) {
	case 1:
		a.Subject = &hitlv1.ApprovalSubject{Name: "kubectl", Icon: "https://example.com/k.png"}
	case 2:
		a.Subject = &hitlv1.ApprovalSubject{} // no name: the CRD's business
	}
	if tape.pick(3) != 0 {
		a.Display = &hitlv1.ApprovalDisplay{
			Question: decodeLocalized(tape, false),
			Detail:   decodeLocalized(tape, true),
			Approve:  decodeLocalized(tape, true),
		}
	}

	in := &hitlv1.QuestionIntent{Type: hitlv1.IntentApproval, Approval: a}
	switch tape.pick(10) {
	case 8:
		in.Approval = nil
	case 9:
		in.PlanReview = &hitlv1.PlanReviewIntent{Approve: l(0)}
	}
	q.Intent = in
	return q
}

// decodeLocalized is a localized text: mostly a good one (with an en
// entry; or absent, when absence is fine), else absent, without en, with
// an empty en, or empty.
func decodeLocalized(tape *byteTape, mayBeAbsent bool) hitlv1.LocalizedText {
	switch tape.pick(10) {
	case 1:
		return hitlv1.LocalizedText{"en": "Run it?", "de": "Ausführen?"}
	case 2, 3:
		if mayBeAbsent {
			return nil
		}
	case 6:
		return nil
	case 7:
		return hitlv1.LocalizedText{"de": "Ausführen?"}
	case 8:
		return hitlv1.LocalizedText{"en": ""}
	case 9:
		return hitlv1.LocalizedText{}
	}
	return hitlv1.LocalizedText{"en": "Run it?"}
}

// decodeAskTimeout is absent a third of the time, else one of the values
// around the rules: non-positive, sub-millisecond, fractional milliseconds,
// whole milliseconds, at and around the maximum, and the extremes.
func decodeAskTimeout(tape *byteTape, maxTimeout time.Duration) *metav1.Duration {
	eff := maxTimeout
	if eff == 0 {
		eff = askSpecDefaultMax
	}
	values := []time.Duration{
		0, -time.Millisecond, -1, math.MinInt64,
		1, 999 * time.Microsecond, 1500 * time.Microsecond, 2500 * time.Microsecond, time.Second + 1,
		time.Millisecond, time.Second, 90 * time.Second, time.Hour, 24 * time.Hour,
		eff - time.Millisecond, eff, eff + 1, eff + time.Millisecond, eff - 1,
		24*time.Hour + time.Millisecond, math.MaxInt64,
	}
	// 0..10 is absent (the tape's zeros too), 11.. a value.
	const absent = 11
	k := tape.pick(absent + len(values))
	if k < absent {
		return nil
	}
	return &metav1.Duration{Duration: values[k-absent]}
}

// askJudgement is the oracle's reading of an ask: which rules it breaks.
type askJudgement struct {
	empty     bool
	delegated bool
	// intentBad: indexes of questions whose intent breaks a rule of the
	// question itself.
	intentBad map[int]bool
	// shapeBad: indexes of Approval questions in an ask that is not one
	// question without a timeout.
	shapeBad   map[int]bool
	badTimeout bool
}

// code is the code ValidateAsk must report: the first broken rule in the
// order its contract lists them (EMPTY_QUESTIONS, DELEGATED_CALLER,
// BAD_INTENT, BAD_TIMEOUT), or "" for a valid ask.
func (j askJudgement) code() hitlv1.ErrorCode {
	switch {
	case j.empty:
		return hitlv1.CodeEmptyQuestions
	case j.delegated:
		return hitlv1.CodeDelegatedCaller
	case len(j.intentBad) > 0 || len(j.shapeBad) > 0:
		return hitlv1.CodeBadIntent
	case j.badTimeout:
		return hitlv1.CodeBadTimeout
	}
	return ""
}

// askOracle judges an ask by SPEC §1 "Presentation intents" and §2's
// spec.origin, spec.questions and spec.timeout.
func askOracle(spec *hitlv1.UserQuestionSpec, maxTimeout time.Duration) askJudgement {
	j := askJudgement{intentBad: map[int]bool{}, shapeBad: map[int]bool{}}

	// "None: EMPTY_QUESTIONS."
	j.empty = len(spec.Questions) == 0
	// "A subagent may not ask a person directly: DELEGATED_CALLER."
	j.delegated = spec.Origin == hitlv1.OriginSubagent

	for i := range spec.Questions {
		q := &spec.Questions[i]
		if q.Intent == nil {
			continue
		}
		if !intentFollowsSpec(q) {
			j.intentBad[i] = true
		}
		// "Approval: ... The ask has exactly one question, no
		// multiSelect, no spec.timeout."
		if q.Intent.Type == hitlv1.IntentApproval && (len(spec.Questions) > 1 || spec.Timeout != nil) {
			j.shapeBad[i] = true
		}
	}

	// "Must be positive, a whole number of milliseconds, and at most the
	// controller's maximum (flag, default 24h)."
	if spec.Timeout != nil {
		limit := maxTimeout
		if limit == 0 {
			limit = askSpecDefaultMax
		}
		ns := spec.Timeout.Nanoseconds()
		positive := ns > 0
		wholeMillis := ns%1_000_000 == 0
		withinMax := ns <= limit.Nanoseconds()
		j.badTimeout = !(positive && wholeMillis && withinMax)
	}
	return j
}

// intentFollowsSpec: the rules of §1 that one question can tell about its
// own intent. The intent is a discriminated union: the member its type
// names is set and the other is not.
func intentFollowsSpec(q *hitlv1.Question) bool {
	in := q.Intent
	labels := make([]string, 0, len(q.Options))
	for _, o := range q.Options {
		labels = append(labels, o.Label)
	}
	switch in.Type {
	case hitlv1.IntentPlanReview:
		// "detail holds the plan (markdown) and is required; approve names
		// the option label that approves."
		return in.PlanReview != nil && in.Approval == nil &&
			q.Detail != "" &&
			slices.Contains(labels, in.PlanReview.Approve)
	case hitlv1.IntentApproval:
		a := in.Approval
		if a == nil || in.PlanReview != nil || q.MultiSelect {
			return false
		}
		// "approve, reject and the optional always are distinct labels and
		// together are exactly the question's option labels": the option
		// labels, sorted, are the intent's labels, sorted.
		intentLabels := []string{a.Approve, a.Reject}
		if a.Always != "" {
			intentLabels = append(intentLabels, a.Always)
		}
		if a.Approve == "" || a.Reject == "" {
			return false
		}
		distinct := slices.Clone(intentLabels)
		slices.Sort(distinct)
		if len(slices.Compact(distinct)) != len(intentLabels) {
			return false
		}
		sortedOptions := slices.Clone(labels)
		slices.Sort(sortedOptions)
		if !slices.Equal(distinct, sortedOptions) {
			return false
		}
		// "optional display holds localized texts keyed by locale (en
		// required)": the question text always, the others when given.
		if d := a.Display; d != nil {
			if d.Question["en"] == "" {
				return false
			}
			for _, text := range []hitlv1.LocalizedText{d.Detail, d.Approve} {
				if text != nil && text["en"] == "" {
					return false
				}
			}
		}
		// The subject is for recognition only: nothing to check.
		return true
	default:
		// The intent types are PlanReview and Approval.
		return false
	}
}

// checkAskAgainstOracle runs ValidateAsk on the ask the bytes decode to and
// compares it with the oracle. It returns the oracle's code.
func checkAskAgainstOracle(t *testing.T, data []byte) hitlv1.ErrorCode {
	t.Helper()
	spec, maxTimeout := decodeAskInput(data)
	before := spec.DeepCopy()

	err := ValidateAsk(spec, maxTimeout)
	j := askOracle(before, maxTimeout)
	want := j.code()

	if !reflect.DeepEqual(spec, before) {
		t.Fatalf("ValidateAsk modified the ask\nbefore: %+v\nafter:  %+v", before, spec)
	}
	describe := func() string {
		return fmt.Sprintf("max %s, ask:\n%s", maxTimeout, dumpAsk(before))
	}
	if want == "" {
		if err != nil {
			t.Fatalf("the oracle accepts, ValidateAsk refuses: %v\n%s", err, describe())
		}
		return want
	}
	if err == nil {
		t.Fatalf("the oracle refuses with %s (%+v), ValidateAsk accepts\n%s", want, j, describe())
	}
	var e *Error
	if !errors.As(err, &e) || err != error(e) {
		t.Fatalf("the refusal %T (%v) is not a *validation.Error", err, err)
	}
	msg := err.Error()
	if e.Code != want {
		t.Fatalf("code %s, the oracle says %s (%+v): %v\n%s", e.Code, want, j, err, describe())
	}
	if !strings.HasPrefix(msg, string(want)+": ") {
		t.Fatalf("message %q does not start with %q", msg, want+": ")
	}

	// The message names the field, and for BAD_INTENT the question id.
	fieldOf := map[hitlv1.ErrorCode]string{
		hitlv1.CodeEmptyQuestions:  "spec.questions",
		hitlv1.CodeDelegatedCaller: "spec.origin",
		hitlv1.CodeBadTimeout:      "spec.timeout",
	}
	if field, ok := fieldOf[want]; ok {
		if e.Field != field || !strings.Contains(msg, field) {
			t.Fatalf("a %s refusal names field %q (message %q), want %q", want, e.Field, msg, field)
		}
		if e.QuestionID != "" {
			t.Fatalf("a %s refusal names question %q", want, e.QuestionID)
		}
		return want
	}
	if e.QuestionID != "" && !strings.Contains(msg, "question "+e.QuestionID+": ") {
		t.Fatalf("message %q does not name question %q", msg, e.QuestionID)
	}
	if e.Field == "" || !strings.Contains(msg, e.Field) {
		t.Fatalf("message %q does not name its field %q", msg, e.Field)
	}
	// The field is either one question's (spec.questions[i] or below it),
	// and that question breaks an intent rule, or the ask's
	// (spec.questions), and the id is an Approval question that breaks the
	// ask's shape.
	if rest, ok := strings.CutPrefix(e.Field, "spec.questions["); ok {
		end := strings.Index(rest, "]")
		i, convErr := strconv.Atoi(rest[:max(end, 0)])
		if end < 0 || convErr != nil || i < 0 || i >= len(before.Questions) {
			t.Fatalf("field %q names no question of the ask", e.Field)
		}
		if tail := rest[end+1:]; tail != "" && !strings.HasPrefix(tail, ".") {
			t.Fatalf("field %q is malformed", e.Field)
		}
		if before.Questions[i].ID != e.QuestionID {
			t.Fatalf("field %q is question %q, the error names %q", e.Field, before.Questions[i].ID, e.QuestionID)
		}
		if !j.intentBad[i] {
			t.Fatalf("the error blames question %d (%q), whose intent the oracle finds fine (%+v): %v\n%s", i, e.QuestionID, j, err, describe())
		}
		return want
	}
	if e.Field != "spec.questions" {
		t.Fatalf("a BAD_INTENT refusal names field %q", e.Field)
	}
	for i := range j.shapeBad {
		if before.Questions[i].ID == e.QuestionID {
			return want
		}
	}
	t.Fatalf("an ask-wide BAD_INTENT names question %q, not an Approval question in a bad ask (%+v): %v\n%s", e.QuestionID, j, err, describe())
	return want
}

// dumpAsk prints an ask for a failure message.
func dumpAsk(s *hitlv1.UserQuestionSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  origin %q, timeout %v, %d questions (nil: %v)\n", s.Origin, s.Timeout, len(s.Questions), s.Questions == nil)
	for i, q := range s.Questions {
		fmt.Fprintf(&b, "  [%d] id %q detail %q multi %v options %v", i, q.ID, q.Detail, q.MultiSelect, q.Options)
		if in := q.Intent; in != nil {
			fmt.Fprintf(&b, " intent %q planReview %+v", in.Type, in.PlanReview)
			if a := in.Approval; a != nil {
				fmt.Fprintf(&b, " approval {approve %q reject %q always %q subject %+v display %+v}", a.Approve, a.Reject, a.Always, a.Subject, a.Display)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// The seed corpus is written with these pieces, in decodeAskInput's byte
// order: max timeout, origin, shape, then the questions, then the timeout.
var (
	// seedPlain is a question kept at its position's id, without intent,
	// with options a and b, single-select.
	seedPlain = []byte{0, 0, 3, 0, 0, 0}
	// seedPlan is a PlanReview question with options a and b, approving with
	// a, with its plan in detail; seedPlanWith changes one of its bytes.
	seedPlan = []byte{0, 4, 3, 0, 0, 0, 0, 0, 0}
	// seedApproval is an Approval question approving with a and rejecting
	// with b, its options exactly those, without subject or display, up to
	// its last byte: the display's three texts when it has a display, then
	// its members (0: approval, 8: none, 9: a planReview member too).
	seedApproval = []byte{0, 0, 0, 0, 0, 0, 0, 0}
)

// Offsets of the bytes the seeds change.
const (
	planApprove = 5 // 0: an option (by the next byte), 2: a label (by the next byte), 3: "z", 4: ""
	planMembers = 7 // 6: no planReview, 7: an approval member too
	planDetail  = 8 // 3: no detail

	apprAlways  = 1 // 1: with always
	apprBreak   = 2 // 1..10: one way to break it
	apprOrder   = 3
	apprMulti   = 4 // 5: multiSelect
	apprSubject = 6 // 1: with a subject, 2: with an empty one
	apprDisplay = 7 // nonzero: a display, whose three texts follow
)

// seedAsk joins the pieces of an input.
func seedAsk(pieces ...[]byte) []byte { return slices.Concat(pieces...) }

// with returns a copy of b with the bytes at the given offsets set.
func with(b []byte, offsetValue ...int) []byte {
	out := slices.Clone(b)
	for i := 0; i+1 < len(offsetValue); i += 2 {
		out[offsetValue[i]] = byte(offsetValue[i+1])
	}
	return out
}

// timeoutAt is the timeout byte for decodeAskTimeout's value i.
func timeoutAt(i int) []byte { return []byte{byte(11 + i)} }

// askSeeds are the seed corpus: inputs that break each rule and inputs that
// follow them, with the code the oracle gives them.
var askSeeds = []struct {
	name string
	data []byte
	want hitlv1.ErrorCode
}{
	{"nil questions", []byte{}, hitlv1.CodeEmptyQuestions},
	{"empty questions list", []byte{0, 0, 0, 1}, hitlv1.CodeEmptyQuestions},
	{"no questions from a subagent", []byte{0, 4, 0}, hitlv1.CodeEmptyQuestions},

	{"one plain question", seedAsk([]byte{0, 0, 4, 0}, seedPlain), ""},
	{"from Root", seedAsk([]byte{0, 2, 4, 0}, seedPlain), ""},
	{"from a subagent", seedAsk([]byte{0, 4, 4, 0}, seedPlain), hitlv1.CodeDelegatedCaller},
	{"origin outside the enum (the CRD's business)", seedAsk([]byte{0, 6, 4, 0}, seedPlain), ""},

	{"zero timeout", seedAsk([]byte{0, 0, 4, 0}, seedPlain, timeoutAt(0)), hitlv1.CodeBadTimeout},
	{"-1ms", seedAsk([]byte{0, 0, 4, 0}, seedPlain, timeoutAt(1)), hitlv1.CodeBadTimeout},
	{"smallest duration", seedAsk([]byte{0, 0, 4, 0}, seedPlain, timeoutAt(3)), hitlv1.CodeBadTimeout},
	{"1ns", seedAsk([]byte{0, 0, 4, 0}, seedPlain, timeoutAt(4)), hitlv1.CodeBadTimeout},
	{"1500µs", seedAsk([]byte{0, 0, 4, 0}, seedPlain, timeoutAt(6)), hitlv1.CodeBadTimeout},
	{"1s and 1ns", seedAsk([]byte{0, 0, 4, 0}, seedPlain, timeoutAt(8)), hitlv1.CodeBadTimeout},
	{"1ms", seedAsk([]byte{0, 0, 4, 0}, seedPlain, timeoutAt(9)), ""},
	{"90s", seedAsk([]byte{0, 0, 4, 0}, seedPlain, timeoutAt(11)), ""},
	{"default max: 24h", seedAsk([]byte{0, 0, 4, 0}, seedPlain, timeoutAt(15)), ""},
	{"default max: 24h and 1ns", seedAsk([]byte{0, 0, 4, 0}, seedPlain, timeoutAt(16)), hitlv1.CodeBadTimeout},
	{"default max: 24h and 1ms", seedAsk([]byte{0, 0, 4, 0}, seedPlain, timeoutAt(19)), hitlv1.CodeBadTimeout},
	{"max 1h: 1h", seedAsk([]byte{2, 0, 4, 0}, seedPlain, timeoutAt(15)), ""},
	{"max 1h: 1h less 1ms", seedAsk([]byte{2, 0, 4, 0}, seedPlain, timeoutAt(14)), ""},
	{"max 1h: 1h and 1ms", seedAsk([]byte{2, 0, 4, 0}, seedPlain, timeoutAt(17)), hitlv1.CodeBadTimeout},
	{"max 1h: 24h", seedAsk([]byte{2, 0, 4, 0}, seedPlain, timeoutAt(13)), hitlv1.CodeBadTimeout},
	{"max 1.5ms: 1.5ms, fractional", seedAsk([]byte{5, 0, 4, 0}, seedPlain, timeoutAt(15)), hitlv1.CodeBadTimeout},
	{"max 1.5ms: 1ms", seedAsk([]byte{5, 0, 4, 0}, seedPlain, timeoutAt(9)), ""},
	{"max 1ms: 1ms", seedAsk([]byte{6, 0, 4, 0}, seedPlain, timeoutAt(15)), ""},
	{"largest duration", seedAsk([]byte{0, 0, 4, 0}, seedPlain, timeoutAt(20)), hitlv1.CodeBadTimeout},
	{"subagent with a bad timeout", seedAsk([]byte{0, 4, 4, 0}, seedPlain, timeoutAt(0)), hitlv1.CodeDelegatedCaller},

	{"PlanReview", seedAsk([]byte{0, 0, 4, 0}, seedPlan), ""},
	{"PlanReview, timed, beside another question", seedAsk([]byte{0, 0, 4, 1}, seedPlain, seedPlan, timeoutAt(11)), ""},
	{"PlanReview approving with no option", seedAsk([]byte{0, 0, 4, 0}, with(seedPlan, planApprove, 3)), hitlv1.CodeBadIntent},
	{"PlanReview approving with an empty label", seedAsk([]byte{0, 0, 4, 0}, with(seedPlan, planApprove, 4)), hitlv1.CodeBadIntent},
	{"PlanReview approving with a label of another question", seedAsk([]byte{0, 0, 4, 0}, with(seedPlan, planApprove, 2, planApprove+1, 2)), hitlv1.CodeBadIntent},
	{"PlanReview without options", seedAsk([]byte{0, 0, 4, 0}, with(seedPlan, 2, 0)), hitlv1.CodeBadIntent},
	{"PlanReview without detail", seedAsk([]byte{0, 0, 4, 0}, with(seedPlan, planDetail, 3)), hitlv1.CodeBadIntent},
	{"PlanReview without planReview", seedAsk([]byte{0, 0, 4, 0}, with(seedPlan, planMembers, 6)), hitlv1.CodeBadIntent},
	{"PlanReview with an approval member", seedAsk([]byte{0, 0, 4, 0}, with(seedPlan, planMembers, 7)), hitlv1.CodeBadIntent},
	{"PlanReview with an empty id, broken", seedAsk([]byte{0, 0, 4, 0}, []byte{4, 3}, with(seedPlan, planApprove, 3)[1:]), hitlv1.CodeBadIntent},
	{"broken PlanReview and a bad timeout", seedAsk([]byte{0, 0, 4, 0}, with(seedPlan, planApprove, 3), timeoutAt(0)), hitlv1.CodeBadIntent},
	{"intent type Poll", seedAsk([]byte{0, 0, 4, 0}, []byte{0, 7, 3, 0, 0, 1, 0, 0}), hitlv1.CodeBadIntent},
	{"empty intent type", seedAsk([]byte{0, 0, 4, 0}, []byte{0, 7, 3, 0, 0, 0, 0, 0}), hitlv1.CodeBadIntent},

	{"Approval", seedAsk([]byte{0, 0, 2}, seedApproval, []byte{0}), ""},
	{"Approval with always, subject and display", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprAlways, 1, apprOrder, 2, apprSubject, 1, apprDisplay, 1),
		[]byte{0, 1, 0}, []byte{0}), ""},
	{"Approval with a subject without name (the CRD's business)", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprSubject, 2)), ""},
	{"Approval approve equals reject", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprBreak, 1)), hitlv1.CodeBadIntent},
	{"Approval always equals approve", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprBreak, 2)), hitlv1.CodeBadIntent},
	{"Approval always equals reject", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprBreak, 3)), hitlv1.CodeBadIntent},
	{"Approval empty approve", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprBreak, 4)), hitlv1.CodeBadIntent},
	{"Approval empty reject", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprBreak, 5)), hitlv1.CodeBadIntent},
	{"Approval extra option", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprBreak, 6)), hitlv1.CodeBadIntent},
	{"Approval label that is no option", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprBreak, 7)), hitlv1.CodeBadIntent},
	{"Approval option that is no label", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprBreak, 8)), hitlv1.CodeBadIntent},
	{"Approval repeated option", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprBreak, 9)), hitlv1.CodeBadIntent},
	{"Approval always that is no option", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprBreak, 10)), hitlv1.CodeBadIntent},
	{"Approval multiSelect", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprMulti, 5)), hitlv1.CodeBadIntent},
	{"Approval display.question without en", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprDisplay, 1), []byte{7, 0, 0}), hitlv1.CodeBadIntent},
	{"Approval display.question with empty en", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprDisplay, 1), []byte{8, 0, 0}), hitlv1.CodeBadIntent},
	{"Approval display without question", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprDisplay, 1), []byte{6, 0, 0}), hitlv1.CodeBadIntent},
	{"Approval display.detail with empty en", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprDisplay, 1), []byte{0, 8, 0}), hitlv1.CodeBadIntent},
	{"Approval display.approve empty", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprDisplay, 1), []byte{0, 0, 9}), hitlv1.CodeBadIntent},
	{"Approval display with question only", seedAsk([]byte{0, 0, 2}, with(seedApproval, apprDisplay, 1), []byte{0, 2, 3}), ""},
	{"Approval without approval member", seedAsk([]byte{0, 0, 2}, seedApproval, []byte{8}), hitlv1.CodeBadIntent},
	{"Approval with a planReview member", seedAsk([]byte{0, 0, 2}, seedApproval, []byte{9}), hitlv1.CodeBadIntent},
	{"Approval with a timeout", seedAsk([]byte{0, 0, 2}, seedApproval, []byte{0, 0, 5}, timeoutAt(10)), hitlv1.CodeBadIntent},
	{"Approval with a second question", seedAsk([]byte{0, 0, 2}, seedApproval, []byte{0, 5}, seedPlain), hitlv1.CodeBadIntent},
	{"Approval as the second question", seedAsk([]byte{0, 0, 4, 1}, seedPlain, []byte{0, 6}, seedApproval, []byte{0}), hitlv1.CodeBadIntent},
	{"Approval from a subagent", seedAsk([]byte{0, 4, 2}, seedApproval), hitlv1.CodeDelegatedCaller},

	// ValidateAsk leaves the number of questions and their ids' uniqueness
	// to the CRD.
	{"17 questions", []byte{0, 0, 1, 16}, ""},
	{"17 questions, timed", seedAsk([]byte{0, 0, 1, 16}, bytes17(seedPlain), timeoutAt(11)), ""},
	{"repeated ids", seedAsk([]byte{0, 0, 4, 2}, []byte{4, 0}, seedPlain[1:], []byte{4, 0}, seedPlain[1:], []byte{4, 0}, seedPlain[1:]), ""},
}

// bytes17 is seventeen copies of a question's bytes.
func bytes17(q []byte) []byte {
	var out []byte
	for range 17 {
		out = append(out, q...)
	}
	return out
}

// FuzzValidateAsk decodes fuzz bytes into an ask (UserQuestionSpec) and the
// controller's maximum timeout, and checks ValidateAsk against askOracle, a
// reading of SPEC §1 "Presentation intents" and §2/§3 written from the
// SPEC's text, not from ValidateAsk's code; only the choice of code when an
// ask breaks several rules follows ValidateAsk's documented order.
//
// ValidateAsk owns EMPTY_QUESTIONS, DELEGATED_CALLER, BAD_INTENT (the
// PlanReview and Approval rules, and an Approval ask's shape) and
// BAD_TIMEOUT. The bounds that only the CRD enforces (at most 16 questions,
// unique question ids and option labels, the origin enum, string lengths,
// a subject's required name) are not its rules: the generator breaks them
// too, and the oracle ignores them.
//
// Properties: ValidateAsk never panics and does not modify the ask; it
// accepts exactly the asks the oracle accepts; every refusal is a
// *validation.Error whose code is the oracle's, whose message starts with
// the code and names the field (and, for BAD_INTENT, the question id), and
// which blames a question that really breaks a rule.
func FuzzValidateAsk(f *testing.F) {
	for _, s := range askSeeds {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAskAgainstOracle(t, data)
	})
}

// Each seed decodes to the ask its name says, so the corpus keeps covering
// every rule when the decoder changes.
func TestValidateAskSeeds(t *testing.T) {
	for _, s := range askSeeds {
		t.Run(s.name, func(t *testing.T) {
			if got := checkAskAgainstOracle(t, s.data); got != s.want {
				spec, maxTimeout := decodeAskInput(s.data)
				t.Fatalf("the seed's ask is judged %q, want %q; max %s, ask:\n%s", got, s.want, maxTimeout, dumpAsk(spec))
			}
		})
	}
}

// A fixed pseudo-random sweep of FuzzValidateAsk's property, so that plain
// `go test` checks it on thousands of asks, and checks that the generator
// reaches every outcome.
func TestValidateAskSweep(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	const n = 5000
	seen := map[hitlv1.ErrorCode]int{}
	for range n {
		data := make([]byte, rng.IntN(48))
		for j := range data {
			data[j] = byte(rng.UintN(256))
		}
		seen[checkAskAgainstOracle(t, data)]++
	}
	for _, code := range []hitlv1.ErrorCode{"", hitlv1.CodeEmptyQuestions, hitlv1.CodeDelegatedCaller, hitlv1.CodeBadIntent, hitlv1.CodeBadTimeout} {
		if seen[code] < n/50 {
			t.Fatalf("the sweep judged only %d of %d asks %q (%v); the generator is lopsided", seen[code], n, code, seen)
		}
	}
	t.Logf("outcomes of %d asks: %v", n, seen)
}
