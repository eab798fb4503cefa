package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// nowFunc is the plugin's clock; golden tests replace it.
var nowFunc = time.Now

// promptAttempts bounds how often a person is asked again for a batch that
// breaks a rule.
const promptAttempts = 3

// promptBatch asks a person for each question of the ask on w and reads the
// answers from r, until the batch is valid.
func promptBatch(r *bufio.Reader, w io.Writer, q *hitlv1.UserQuestion) ([]hitlv1.AnswerItem, error) {
	var lastErr error
	for range promptAttempts {
		answers := make([]hitlv1.AnswerItem, 0, len(q.Spec.Questions))
		for i := range q.Spec.Questions {
			item, err := promptOne(r, w, &q.Spec.Questions[i])
			if err != nil {
				return nil, err
			}
			answers = append(answers, item)
		}
		lastErr = validation.ValidateAnswers(q.Spec.Questions, answers)
		if lastErr == nil {
			return answers, nil
		}
		fmt.Fprintf(w, "%v\nLet's try again.\n\n", lastErr)
	}
	return nil, lastErr
}

func promptOne(r *bufio.Reader, w io.Writer, q *hitlv1.Question) (hitlv1.AnswerItem, error) {
	item := hitlv1.AnswerItem{ID: q.ID}
	approval := q.Intent != nil && q.Intent.Approval != nil
	switch {
	case len(q.Options) == 0:
		text, err := ask(r, w, fmt.Sprintf("%s\n  your answer (Enter to skip): ", q.Question))
		item.Custom = text
		return item, err
	case q.MultiSelect:
		line, err := ask(r, w, fmt.Sprintf("%s\n  choose any of 1-%d, comma-separated (Enter for none): ", q.Question, len(q.Options)))
		if err != nil {
			return item, err
		}
		if item.Selected, err = labels(q, line); err != nil {
			fmt.Fprintln(w, " ", err)
			return promptOne(r, w, q)
		}
		item.Custom, err = ask(r, w, "  anything to add (free text, Enter for nothing): ")
		return item, err
	default:
		hint := " or type your own answer (Enter to skip)"
		if approval {
			hint = ""
		}
		line, err := ask(r, w, fmt.Sprintf("%s\n  choose 1-%d%s: ", q.Question, len(q.Options), hint))
		if err != nil || line == "" {
			return item, err
		}
		if n, convErr := strconv.Atoi(line); convErr == nil {
			if n < 1 || n > len(q.Options) {
				fmt.Fprintf(w, "  %d is not between 1 and %d\n", n, len(q.Options))
				return promptOne(r, w, q)
			}
			item.Selected = []string{q.Options[n-1].Label}
			return item, nil
		}
		if approval {
			fmt.Fprintln(w, "  an approval takes one of its options")
			return promptOne(r, w, q)
		}
		item.Custom = line
		return item, nil
	}
}

// labels turns "1,3" into the labels of options 1 and 3.
func labels(q *hitlv1.Question, line string) ([]string, error) {
	var out []string
	for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > len(q.Options) {
			return nil, fmt.Errorf("%q is not an option number between 1 and %d", f, len(q.Options))
		}
		out = append(out, q.Options[n-1].Label)
	}
	return out, nil
}

// ask prints a prompt and reads one trimmed line. The end of the input
// ends the conversation.
func ask(r *bufio.Reader, w io.Writer, prompt string) (string, error) {
	fmt.Fprint(w, prompt)
	line, err := r.ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		if errors.Is(err, io.EOF) {
			return "", errors.New("the input ended before the answer was complete")
		}
		return "", err
	}
	return strings.TrimSpace(line), nil
}
