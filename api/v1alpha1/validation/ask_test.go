package validation

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func badIntent(question, fragment string) *failure {
	return &failure{code: hitlv1.CodeBadIntent, question: question, fragment: fragment}
}

func badTimeout(fragment string) *failure {
	return &failure{code: hitlv1.CodeBadTimeout, fragment: fragment}
}

// Distinctive fragments of the ask rules' messages.
const (
	fragEmpty         = "at least one question"
	fragDelegated     = "subagent may not ask a person directly"
	fragPlanMembers   = "PlanReview intent takes intent.planReview and no intent.approval"
	fragPlanDetail    = "PlanReview intent needs the plan in detail"
	fragPlanApprove   = "must name one of the options"
	fragApprMembers   = "Approval intent takes intent.approval and no intent.planReview"
	fragApprAsk       = "Approval ask has exactly one question and no spec.timeout"
	fragApprMulti     = "Approval question cannot be multiSelect"
	fragApprDistinct  = "approve, reject and always must be distinct labels"
	fragApprExact     = "approve, reject and always must be exactly the option labels"
	fragApprEn        = "localized text needs an en entry"
	fragUnknownIntent = "unknown intent type"
	fragPositive      = "must be positive"
	fragWholeMs       = "whole number of milliseconds"
	fragAboveMax      = "above the maximum"
)

func TestValidateAsk(t *testing.T) {
	color := question("color").options("red", "green")

	cases := []struct {
		name string
		spec *hitlv1.UserQuestionSpec
		max  time.Duration
		want *failure
	}{
		// EMPTY_QUESTIONS
		{"nil questions", ask().obj(), 0,
			&failure{code: hitlv1.CodeEmptyQuestions, fragment: fragEmpty, field: "spec.questions"}},
		{"empty questions", &hitlv1.UserQuestionSpec{Agent: "coder", Questions: []hitlv1.Question{}}, 0,
			&failure{code: hitlv1.CodeEmptyQuestions, fragment: fragEmpty}},
		{"one question", ask(color).obj(), 0, nil},
		{"sixteen questions", ask(manyQuestions(16)...).obj(), 0, nil},

		// DELEGATED_CALLER
		{"origin Subagent", ask(color).origin(hitlv1.OriginSubagent).obj(), 0,
			&failure{code: hitlv1.CodeDelegatedCaller, fragment: fragDelegated, field: "spec.origin"}},
		{"origin Root", ask(color).origin(hitlv1.OriginRoot).obj(), 0, nil},
		{"origin empty", ask(color).origin("").obj(), 0, nil},

		// PlanReview
		{"PlanReview correct", ask(planQuestion("plan", "Approve", "Revise")).obj(), 0, nil},
		{"PlanReview in a timed ask with other questions", ask(color, planQuestion("plan", "Go", "Stop")).timeout(time.Minute).obj(), 0, nil},
		{"PlanReview without planReview member",
			ask(question("plan").options("Approve").detail("plan").intent(&hitlv1.QuestionIntent{Type: hitlv1.IntentPlanReview})).obj(), 0,
			badIntent("plan", fragPlanMembers)},
		{"PlanReview with an approval member",
			ask(planQuestion("plan", "Approve", "Revise").with(func(q *hitlv1.Question) {
				q.Intent.Approval = &hitlv1.ApprovalIntent{Approve: "Approve", Reject: "Revise"}
			})).obj(), 0,
			badIntent("plan", fragPlanMembers)},
		{"PlanReview with empty detail", ask(planQuestion("plan", "Approve", "Revise").detail("")).obj(), 0,
			&failure{code: hitlv1.CodeBadIntent, question: "plan", fragment: fragPlanDetail, field: "spec.questions[0].detail"}},
		{"PlanReview approve names no option", ask(color, planQuestion("plan", "Approve", "Revise").planReview("Ship")).obj(), 0,
			&failure{code: hitlv1.CodeBadIntent, question: "plan", fragment: `"Ship" ` + fragPlanApprove, field: "spec.questions[1].intent.planReview.approve"}},
		{"PlanReview approve on a question without options",
			ask(question("plan").detail("plan").planReview("Approve")).obj(), 0,
			badIntent("plan", fragPlanApprove)},
		{"PlanReview empty approve", ask(planQuestion("plan", "Approve", "Revise").planReview("")).obj(), 0,
			badIntent("plan", fragPlanApprove)},

		// Approval
		{"Approval correct without always", ask(approvalQuestion("ok", "yes", "no", "")).obj(), 0, nil},
		{"Approval correct with always", ask(approvalQuestion("ok", "yes", "no", "always")).obj(), 0, nil},
		{"Approval options in another order", ask(approvalQuestion("ok", "yes", "no", "always").options("always", "no", "yes")).obj(), 0, nil},
		{"Approval with subject and display",
			ask(approvalQuestion("ok", "yes", "no", "always").with(func(q *hitlv1.Question) {
				q.Intent.Approval.Subject = &hitlv1.ApprovalSubject{Name: "kubectl", Icon: "https://example.com/k.png"}
			}).display(&hitlv1.ApprovalDisplay{
				Question: en("Run kubectl?", "de", "kubectl ausführen?"),
				Detail:   en("kubectl delete pod x"),
				Approve:  en("Allow once"),
			})).obj(), 0, nil},
		{"Approval display with question only", ask(approvalQuestion("ok", "yes", "no", "").display(&hitlv1.ApprovalDisplay{Question: en("Run it?")})).obj(), 0, nil},
		{"Approval with a second question", ask(approvalQuestion("ok", "yes", "no", ""), color).obj(), 0,
			badIntent("ok", fragApprAsk)},
		{"Approval as the second question", ask(color, approvalQuestion("ok", "yes", "no", "")).obj(), 0,
			badIntent("ok", fragApprAsk)},
		{"Approval with a timeout", ask(approvalQuestion("ok", "yes", "no", "")).timeout(time.Minute).obj(), 0,
			badIntent("ok", fragApprAsk)},
		{"Approval multiSelect", ask(approvalQuestion("ok", "yes", "no", "").multi()).obj(), 0,
			&failure{code: hitlv1.CodeBadIntent, question: "ok", fragment: fragApprMulti, field: "spec.questions[0].multiSelect"}},
		{"Approval without approval member",
			ask(question("ok").options("yes", "no").intent(&hitlv1.QuestionIntent{Type: hitlv1.IntentApproval})).obj(), 0,
			badIntent("ok", fragApprMembers)},
		{"Approval with a planReview member",
			ask(approvalQuestion("ok", "yes", "no", "").detail("plan").with(func(q *hitlv1.Question) {
				q.Intent.PlanReview = &hitlv1.PlanReviewIntent{Approve: "yes"}
			})).obj(), 0,
			badIntent("ok", fragApprMembers)},
		{"Approval approve equals reject", ask(question("ok").options("yes").approval("yes", "yes", "")).obj(), 0,
			badIntent("ok", fragApprDistinct)},
		{"Approval always equals approve", ask(question("ok").options("yes", "no").approval("yes", "no", "yes")).obj(), 0,
			badIntent("ok", fragApprDistinct)},
		{"Approval always equals reject", ask(question("ok").options("yes", "no").approval("yes", "no", "no")).obj(), 0,
			badIntent("ok", fragApprDistinct)},
		{"Approval empty approve", ask(question("ok").options("no").approval("", "no", "")).obj(), 0,
			badIntent("ok", fragApprDistinct)},
		{"Approval empty reject", ask(question("ok").options("yes").approval("yes", "", "")).obj(), 0,
			badIntent("ok", fragApprDistinct)},
		{"Approval extra option without always", ask(approvalQuestion("ok", "yes", "no", "").options("yes", "no", "maybe")).obj(), 0,
			&failure{code: hitlv1.CodeBadIntent, question: "ok", fragment: fragApprExact, field: "spec.questions[0].options"}},
		{"Approval extra option with always", ask(approvalQuestion("ok", "yes", "no", "always").options("yes", "no", "always", "maybe")).obj(), 0,
			badIntent("ok", fragApprExact)},
		{"Approval missing option without always", ask(approvalQuestion("ok", "yes", "no", "").options("yes")).obj(), 0,
			badIntent("ok", fragApprExact)},
		{"Approval missing always option", ask(approvalQuestion("ok", "yes", "no", "always").options("yes", "no")).obj(), 0,
			badIntent("ok", fragApprExact)},
		{"Approval without options", ask(approvalQuestion("ok", "yes", "no", "").options()).obj(), 0,
			badIntent("ok", fragApprExact)},
		{"Approval option that is neither", ask(approvalQuestion("ok", "yes", "no", "").options("yes", "nope")).obj(), 0,
			badIntent("ok", `exactly the option labels ("nope" is neither)`)},
		{"Approval always option but no always label", ask(approvalQuestion("ok", "yes", "no", "").options("yes", "no", "always")).obj(), 0,
			badIntent("ok", fragApprExact)},
		{"Approval display.question without en",
			ask(approvalQuestion("ok", "yes", "no", "").display(&hitlv1.ApprovalDisplay{Question: hitlv1.LocalizedText{"de": "Ausführen?"}})).obj(), 0,
			&failure{code: hitlv1.CodeBadIntent, question: "ok", fragment: fragApprEn, field: "spec.questions[0].intent.approval.display.question"}},
		{"Approval display.question with empty en",
			ask(approvalQuestion("ok", "yes", "no", "").display(&hitlv1.ApprovalDisplay{Question: en("")})).obj(), 0,
			badIntent("ok", fragApprEn)},
		{"Approval display without question",
			ask(approvalQuestion("ok", "yes", "no", "").display(&hitlv1.ApprovalDisplay{})).obj(), 0,
			badIntent("ok", fragApprEn)},
		{"Approval display.detail without en",
			ask(approvalQuestion("ok", "yes", "no", "").display(&hitlv1.ApprovalDisplay{Question: en("Run?"), Detail: hitlv1.LocalizedText{"fr": "Exécuter"}})).obj(), 0,
			&failure{code: hitlv1.CodeBadIntent, question: "ok", fragment: fragApprEn, field: "spec.questions[0].intent.approval.display.detail"}},

		// Unknown intent types
		{"intent type Poll", ask(question("poll").options("a").intent(&hitlv1.QuestionIntent{Type: "Poll"})).obj(), 0,
			&failure{code: hitlv1.CodeBadIntent, question: "poll", fragment: fragUnknownIntent + ` "Poll"`, field: "spec.questions[0].intent.type"}},
		{"empty intent type", ask(question("poll").options("a").intent(&hitlv1.QuestionIntent{})).obj(), 0,
			badIntent("poll", fragUnknownIntent)},

		// BAD_TIMEOUT through the ask
		{"blocking ask", ask(color).obj(), 0, nil},
		{"timed ask", ask(color).timeout(90 * time.Second).obj(), 0, nil},
		{"zero timeout", ask(color).timeout(0).obj(), 0, badTimeout(fragPositive)},
		{"fractional-ms timeout", ask(color).timeout(1500 * time.Microsecond).obj(), 0, badTimeout(fragWholeMs)},
		{"timeout above default max", ask(color).timeout(25 * time.Hour).obj(), 0, badTimeout(fragAboveMax)},
		{"timeout above custom max", ask(color).timeout(2 * time.Minute).obj(), time.Minute, badTimeout(fragAboveMax)},
		{"timeout at custom max", ask(color).timeout(time.Minute).obj(), time.Minute, nil},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, ValidateAsk(tc.spec, tc.max), tc.want)
		})
	}
}

// manyQuestions returns n plain single-select questions q0..q(n-1).
func manyQuestions(n int) []*qb {
	out := make([]*qb, n)
	for i := range out {
		out[i] = question("q"+string(rune('a'+i))).options("x", "y")
	}
	return out
}

// ValidateIntent on its own: the intent rules of one question, with the
// field path the caller gives.
func TestValidateIntent(t *testing.T) {
	cases := []struct {
		name string
		q    *qb
		want *failure
	}{
		{"no intent", question("q").options("a"), nil},
		{"no intent, no options", question("q"), nil},
		{"PlanReview correct", planQuestion("q", "Go"), nil},
		{"PlanReview missing member", question("q").options("Go").detail("p").intent(&hitlv1.QuestionIntent{Type: hitlv1.IntentPlanReview}),
			&failure{code: hitlv1.CodeBadIntent, question: "q", fragment: fragPlanMembers, field: "spec.questions[3].intent"}},
		{"PlanReview empty detail", planQuestion("q", "Go").detail(""), badIntent("q", fragPlanDetail)},
		{"PlanReview approve names no option", planQuestion("q", "Go", "Stop").planReview("go"), badIntent("q", fragPlanApprove)},
		{"Approval correct", approvalQuestion("q", "yes", "no", "always"), nil},
		// The one-question and no-timeout rules are rules of the ask, not of
		// the question: ValidateIntent alone accepts the question.
		{"Approval multiSelect", approvalQuestion("q", "yes", "no", "").multi(), badIntent("q", fragApprMulti)},
		{"Approval non-distinct", question("q").options("yes", "no").approval("yes", "no", "no"), badIntent("q", fragApprDistinct)},
		{"Approval extra option", approvalQuestion("q", "yes", "no", "").options("yes", "no", "later"), badIntent("q", fragApprExact)},
		{"Approval missing option", approvalQuestion("q", "yes", "no", "later").options("yes", "later"), badIntent("q", fragApprExact)},
		{"Approval display without en", approvalQuestion("q", "yes", "no", "").display(&hitlv1.ApprovalDisplay{Question: hitlv1.LocalizedText{}}), badIntent("q", fragApprEn)},
		{"Approval display.approve without en",
			approvalQuestion("q", "yes", "no", "").display(&hitlv1.ApprovalDisplay{Question: en("Ok?"), Approve: hitlv1.LocalizedText{"de": "Einmal"}}),
			&failure{code: hitlv1.CodeBadIntent, question: "q", fragment: fragApprEn, field: "spec.questions[3].intent.approval.display.approve"}},
		{"unknown type", question("q").options("a").intent(&hitlv1.QuestionIntent{Type: "Survey"}), badIntent("q", fragUnknownIntent)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q.obj()
			checkErr(t, ValidateIntent(&q, "spec.questions[3]"), tc.want)
		})
	}
}

func TestValidateTimeout(t *testing.T) {
	if DefaultMaxTimeout != 24*time.Hour {
		t.Fatalf("DefaultMaxTimeout = %s, want 24h", DefaultMaxTimeout)
	}
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	cases := []struct {
		name    string
		timeout *metav1.Duration
		max     time.Duration
		want    *failure
	}{
		{"nil (blocking)", nil, 0, nil},
		{"nil with a custom max", nil, time.Second, nil},
		{"zero", d(0), 0, badTimeout(fragPositive)},
		{"negative", d(-time.Second), 0, badTimeout(fragPositive)},
		{"minus one nanosecond", d(-1), 0, badTimeout(fragPositive)},
		{"one nanosecond", d(1), 0, badTimeout(fragWholeMs)},
		{"1500µs", d(1500 * time.Microsecond), 0, badTimeout(fragWholeMs)},
		{"999µs", d(999 * time.Microsecond), 0, badTimeout(fragWholeMs)},
		{"1s and 1ns", d(time.Second + 1), 0, badTimeout(fragWholeMs)},
		{"1ms", d(time.Millisecond), 0, nil},
		{"1500ms", d(1500 * time.Millisecond), 0, nil},
		{"24h with the default max", d(24 * time.Hour), 0, nil},
		{"24h+1ms with the default max", d(24*time.Hour + time.Millisecond), 0, badTimeout(fragAboveMax + " of 24h0m0s")},
		{"custom max 1h, 1h", d(time.Hour), time.Hour, nil},
		{"custom max 1h, 1h+1ms", d(time.Hour + time.Millisecond), time.Hour, badTimeout(fragAboveMax + " of 1h0m0s")},
		{"custom max 1h, 24h", d(24 * time.Hour), time.Hour, badTimeout(fragAboveMax)},
		{"custom max 48h, 36h", d(36 * time.Hour), 48 * time.Hour, nil},
		{"custom max 48h, 48h+1ms", d(48*time.Hour + time.Millisecond), 48 * time.Hour, badTimeout(fragAboveMax)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateTimeout(tc.timeout, tc.max)
			if tc.want != nil {
				tc.want.field = "spec.timeout"
			}
			checkErr(t, err, tc.want)
		})
	}
}
