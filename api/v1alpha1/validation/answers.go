package validation

import (
	"fmt"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// ValidateAnswers checks an answer batch against the questions of its ask
// and returns the first broken rule as a BAD_ANSWER *Error, or nil:
//
//   - the batch names every question id of the ask exactly once, and no other id;
//   - selected holds option labels of that question, each at most once;
//   - single-select: at most one label, and none when custom is set;
//   - multi-select: custom may accompany any number of labels;
//   - a question without options takes custom or a skip;
//   - an Approval question takes exactly one selected label and no custom;
//   - an item with no label and no custom skips its question, and a batch
//     may skip some questions, not all of them;
//   - custom text fits the question's input rule (type, bounds, pattern),
//     and a question whose input is required is not skipped;
//   - a sensitive question is answered sealed (never in custom or
//     selected), and only a sensitive question is.
func ValidateAnswers(questions []hitlv1.Question, answers []hitlv1.AnswerItem) error {
	byID := make(map[string]*hitlv1.Question, len(questions))
	for i := range questions {
		byID[questions[i].ID] = &questions[i]
	}

	seen := make(map[string]bool, len(answers))
	skipped := 0
	for i, a := range answers {
		field := fmt.Sprintf("spec.answers[%d]", i)
		q, ok := byID[a.ID]
		if !ok {
			return newError(hitlv1.CodeBadAnswer, a.ID, field+".id", "not a question of the ask")
		}
		if seen[a.ID] {
			return newError(hitlv1.CodeBadAnswer, a.ID, field+".id", "answered more than once")
		}
		seen[a.ID] = true
		if err := validateItem(q, a, field); err != nil {
			return err
		}
		if a.Skipped() {
			skipped++
		}
	}
	for _, q := range questions {
		if !seen[q.ID] {
			return newError(hitlv1.CodeBadAnswer, q.ID, "spec.answers",
				"not answered: a batch names every question of the ask exactly once (skip it with an item that has no selected and no custom)")
		}
	}
	if len(answers) > 0 && skipped == len(answers) {
		return newError(hitlv1.CodeBadAnswer, "", "spec.answers", "a batch may skip some questions, not all of them")
	}
	return nil
}

// validateItem checks one answer item against its question.
func validateItem(q *hitlv1.Question, a hitlv1.AnswerItem, field string) error {
	if isApproval(q) {
		if len(a.Selected) != 1 || a.Custom != "" {
			return newError(hitlv1.CodeBadAnswer, q.ID, field,
				"an Approval question takes exactly one selected label and no custom text")
		}
	}
	if len(q.Options) == 0 && len(a.Selected) > 0 {
		return newError(hitlv1.CodeBadAnswer, q.ID, field+".selected",
			"the question has no options: answer with custom text or skip it")
	}
	if q.Sensitive {
		if len(a.Selected) > 0 || a.Custom != "" {
			return newError(hitlv1.CodeBadAnswer, q.ID, field,
				"the question is sensitive: its answer is sealed (sealed), never plain text in selected or custom")
		}
	} else if a.Sealed != "" {
		return newError(hitlv1.CodeBadAnswer, q.ID, field+".sealed", "the question is not sensitive: answer it in selected or custom, not sealed")
	}
	if a.Skipped() && q.Input != nil && q.Input.Required {
		return newError(hitlv1.CodeBadAnswer, q.ID, field, "the question is required (input.required): it may not be skipped")
	}
	if a.Custom != "" {
		if why := CheckValue(q.Input, a.Custom); why != "" {
			return newError(hitlv1.CodeBadAnswer, q.ID, field+".custom", "%s (input.type %s)", why, q.Input.Type)
		}
	}
	labels := make(map[string]bool, len(q.Options))
	for _, o := range q.Options {
		labels[o.Label] = true
	}
	picked := make(map[string]bool, len(a.Selected))
	for j, s := range a.Selected {
		if !labels[s] {
			return newError(hitlv1.CodeBadAnswer, q.ID, fmt.Sprintf("%s.selected[%d]", field, j),
				"%q is not an option of the question", s)
		}
		if picked[s] {
			return newError(hitlv1.CodeBadAnswer, q.ID, fmt.Sprintf("%s.selected[%d]", field, j),
				"%q is selected more than once", s)
		}
		picked[s] = true
	}
	if !q.MultiSelect {
		if len(a.Selected) > 1 {
			return newError(hitlv1.CodeBadAnswer, q.ID, field+".selected",
				"the question is single-select: select at most one label")
		}
		if a.Custom != "" && len(a.Selected) > 0 {
			return newError(hitlv1.CodeBadAnswer, q.ID, field+".selected",
				"the question is single-select: custom text replaces the choice, so selected must be empty")
		}
	}
	return nil
}

func isApproval(q *hitlv1.Question) bool {
	return q.Intent != nil && q.Intent.Type == hitlv1.IntentApproval
}
