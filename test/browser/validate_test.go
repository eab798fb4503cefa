package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/internal/inbox"
)

// The page's checker and api/v1alpha1/validation judge the same random batches
// alike, to the message: the page never sends what the server refuses,
// nor refuses what it accepts.
func TestThePagesCheckerIsPkgValidation(t *testing.T) {
	e := newEnv(t)
	_, url := e.inbox(inbox.Options{})
	tab := e.tab("", false)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`[data-empty]`)))

	labels := []string{"a", "b", "c", `q"uote`, `back\slash`, "new\nline", "tab\t", "ünï", "emoji 🚀", "\u2028sep", "ctl\x7f"}
	r := rand.New(rand.NewPCG(18, 2027))
	pick := func(n int) []string {
		var out []string
		for range r.IntN(n + 1) {
			out = append(out, labels[r.IntN(len(labels))])
		}
		return out
	}
	type spec struct {
		ID          string   `json:"id"`
		Options     []string `json:"options"`
		MultiSelect bool     `json:"multiSelect"`
		Approval    bool     `json:"approval"`
	}
	type jsCase struct {
		Questions []spec              `json:"questions"`
		Answers   []hitlv1.AnswerItem `json:"answers"`
	}
	var cases []jsCase
	var want []string
	ids := []string{"q1", "q2", "q3", "x"}
	for range 600 {
		var qs []hitlv1.Question
		var specs []spec
		for i := range 1 + r.IntN(3) {
			q := hitlv1.Question{ID: ids[i], MultiSelect: r.IntN(3) == 0}
			opts := map[string]bool{}
			for _, l := range pick(3) {
				if !opts[l] {
					opts[l] = true
					q.Options = append(q.Options, hitlv1.QuestionOption{Label: l})
				}
			}
			if r.IntN(5) == 0 {
				q.Intent = &hitlv1.QuestionIntent{Type: hitlv1.IntentApproval}
			}
			s := spec{ID: q.ID, Options: []string{}, MultiSelect: q.MultiSelect, Approval: q.Intent != nil}
			for _, o := range q.Options {
				s.Options = append(s.Options, o.Label)
			}
			qs, specs = append(qs, q), append(specs, s)
		}
		answers := []hitlv1.AnswerItem{}
		if r.IntN(2) == 0 {
			// A batch a person could give, mostly valid.
			for _, q := range qs {
				a := hitlv1.AnswerItem{ID: q.ID}
				for _, o := range q.Options {
					if r.IntN(2) == 0 && (q.MultiSelect || len(a.Selected) == 0) {
						a.Selected = append(a.Selected, o.Label)
					}
				}
				if r.IntN(3) == 0 && (q.MultiSelect || len(a.Selected) == 0) {
					a.Custom = labels[r.IntN(len(labels))]
				}
				answers = append(answers, a)
			}
		}
		for range r.IntN(4) * r.IntN(2) {
			a := hitlv1.AnswerItem{ID: ids[r.IntN(len(ids))], Selected: pick(2)}
			if r.IntN(3) == 0 {
				a.Custom = labels[r.IntN(len(labels))]
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
	e.g.Expect(refused).To(BeNumerically(">", 100), "the cases break rules")
	e.g.Expect(len(want)-refused).To(BeNumerically(">", 20), "and keep them")
}

// sameVerdicts runs the page's batch checker on cases and expects Go's
// verdicts, want (a message, or "" for a valid batch); it returns how many
// cases were refused.
func sameVerdicts[C any](e *env, tab context.Context, cases []C, want []string) (refused int) {
	e.t.Helper()
	var buf bytes.Buffer
	e.g.Expect(json.NewEncoder(&buf).Encode(cases)).To(Succeed())
	got := eval[[]string](e, tab, `(`+strings.TrimSpace(buf.String())+`).map(c => { const err = window.hitlValidateAnswers(c.questions, c.answers); return err ? err.message : ""; })`)
	e.g.Expect(got).To(HaveLen(len(want)))
	for i := range want {
		e.g.Expect(got[i]).To(Equal(want[i]), "case %d: %+v", i, cases[i])
		if want[i] != "" {
			refused++
		}
	}
	return refused
}
