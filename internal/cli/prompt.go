package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/answerer"
)

// nowFunc is the plugin's clock; golden tests replace it.
var nowFunc = time.Now

// promptAttempts bounds how often a person is asked again for a batch that
// breaks a rule.
const promptAttempts = 3

// prompter asks a person for the answers of a question: it writes the
// prompts to w and reads the lines typed from r. The answer of a sensitive
// question is read with hidden, without echo, when the input is a
// terminal; otherwise (a pipe, a file, a test) as a line of r.
type prompter struct {
	r      *bufio.Reader
	w      io.Writer
	hidden func() (string, error)
}

// newPrompter prompts on w for what is typed on in. ctx ends a hidden read:
// the terminal's echo is restored, and the read fails.
func newPrompter(ctx context.Context, in io.Reader, w io.Writer) *prompter {
	p := &prompter{r: bufio.NewReader(in), w: w}
	if f, ok := in.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		fd := int(f.Fd())
		p.hidden = func() (string, error) { return readHidden(ctx, fd, w) }
	}
	return p
}

// readHidden reads a line from the terminal fd without echo. When ctx ends
// first (Ctrl-C), the terminal's state is restored and ctx's error
// returned.
func readHidden(ctx context.Context, fd int, w io.Writer) (string, error) {
	state, err := term.GetState(fd)
	if err != nil {
		return "", err
	}
	type line struct {
		b   []byte
		err error
	}
	read := make(chan line, 1)
	go func() {
		b, err := term.ReadPassword(fd)
		read <- line{b, err}
	}()
	select {
	case l := <-read:
		fmt.Fprintln(w) // the Enter typed was not echoed
		return strings.TrimSpace(string(l.b)), l.err
	case <-ctx.Done():
		_ = term.Restore(fd, state)
		fmt.Fprintln(w)
		return "", ctx.Err()
	}
}

// promptBatch asks a person for each question of the ask on w and reads the
// answers from r, until the batch is valid (see prompter.batch).
func promptBatch(r *bufio.Reader, w io.Writer, q *hitlv1.UserQuestion) ([]hitlv1.AnswerItem, error) {
	return (&prompter{r: r, w: w}).batch(q)
}

// batch asks for each question of the ask, until the batch is valid. Each
// free-text answer is checked against its question's input rule as it is
// typed, and asked again with the rule shown; a required question is not
// skipped; the answer of a sensitive question is read hidden and sealed at
// once to the question's key, so that the batch holds only the sealed
// value.
func (p *prompter) batch(q *hitlv1.UserQuestion) ([]hitlv1.AnswerItem, error) {
	var lastErr error
	for range promptAttempts {
		answers := make([]hitlv1.AnswerItem, 0, len(q.Spec.Questions))
		for i := range q.Spec.Questions {
			item, err := p.one(q, &q.Spec.Questions[i])
			if err != nil {
				return nil, err
			}
			answers = append(answers, item)
		}
		lastErr = validation.ValidateAnswers(q.Spec.Questions, answers)
		if lastErr == nil {
			return answers, nil
		}
		fmt.Fprintf(p.w, "%v\nLet's try again.\n\n", lastErr)
	}
	return nil, lastErr
}

func (p *prompter) one(uq *hitlv1.UserQuestion, q *hitlv1.Question) (hitlv1.AnswerItem, error) {
	item := hitlv1.AnswerItem{ID: q.ID}
	approval := q.Intent != nil && q.Intent.Approval != nil
	switch {
	case q.Sensitive:
		return p.sensitive(uq, q)
	case len(q.Options) == 0:
		text, err := p.text(q, fmt.Sprintf("%s\n  your answer%s (%s): ", q.Question, expects(q), skipHint(q)))
		item.Custom = text
		return item, err
	case q.MultiSelect:
		line, err := p.line(fmt.Sprintf("%s\n  choose any of 1-%d, comma-separated (%s): ", q.Question, len(q.Options), noneHint(q)))
		if err != nil {
			return item, err
		}
		if item.Selected, err = labels(q, line); err != nil {
			fmt.Fprintln(p.w, " ", err)
			return p.one(uq, q)
		}
		if item.Custom, err = p.text(q, fmt.Sprintf("  anything to add (free text%s, Enter for nothing): ", expects(q))); err != nil {
			return item, err
		}
		if item.Skipped() && required(q) {
			fmt.Fprintf(p.w, "  %s is required: choose an option or type an answer — try again\n", q.ID)
			return p.one(uq, q)
		}
		return item, nil
	default:
		hint := " or type your own answer" + expects(q) + " (" + skipHint(q) + ")"
		if approval {
			hint = ""
		}
		line, err := p.line(fmt.Sprintf("%s\n  choose 1-%d%s: ", q.Question, len(q.Options), hint))
		if err != nil {
			return item, err
		}
		if line == "" {
			if required(q) && !approval {
				fmt.Fprintf(p.w, "  %s is required: it may not be skipped — try again\n", q.ID)
				return p.one(uq, q)
			}
			return item, nil
		}
		if n, convErr := strconv.Atoi(line); convErr == nil {
			if n < 1 || n > len(q.Options) {
				fmt.Fprintf(p.w, "  %d is not between 1 and %d\n", n, len(q.Options))
				return p.one(uq, q)
			}
			item.Selected = []string{q.Options[n-1].Label}
			return item, nil
		}
		if approval {
			fmt.Fprintln(p.w, "  an approval takes one of its options")
			return p.one(uq, q)
		}
		if why := validation.CheckValue(q.Input, line); why != "" {
			fmt.Fprintf(p.w, "  %s: %s — try again\n", q.ID, why)
			return p.one(uq, q)
		}
		item.Custom = line
		return item, nil
	}
}

// text reads free text for q, asking again until it fits q's input rule
// and, when q is required and has no options, until it is not empty.
func (p *prompter) text(q *hitlv1.Question, prompt string) (string, error) {
	for {
		text, err := p.line(prompt)
		if err != nil {
			return "", err
		}
		if text == "" {
			if required(q) && len(q.Options) == 0 {
				fmt.Fprintf(p.w, "  %s is required: it may not be skipped — try again\n", q.ID)
				continue
			}
			return "", nil
		}
		if why := validation.CheckValue(q.Input, text); why != "" {
			fmt.Fprintf(p.w, "  %s: %s — try again\n", q.ID, why)
			continue
		}
		return text, nil
	}
}

// sensitive reads the answer of a sensitive question without showing it,
// checks it (saying the rule, never the value), and seals it to the
// question's key.
func (p *prompter) sensitive(uq *hitlv1.UserQuestion, q *hitlv1.Question) (hitlv1.AnswerItem, error) {
	prompt := fmt.Sprintf("%s\n  your answer%s, not shown as you type and sealed for the agent only (%s): ", q.Question, expects(q), skipHint(q))
	for {
		fmt.Fprint(p.w, prompt)
		value, err := p.secret()
		if err != nil {
			return hitlv1.AnswerItem{}, err
		}
		if value == "" {
			if required(q) {
				fmt.Fprintf(p.w, "  %s is required: it may not be skipped — try again\n", q.ID)
				continue
			}
			return hitlv1.AnswerItem{ID: q.ID}, nil
		}
		if validation.CheckValue(q.Input, value) != "" {
			fmt.Fprintf(p.w, "  %s: the answer is not %s — try again\n", q.ID, answerer.DescribeInput(q.Input))
			continue
		}
		return answerer.Seal(uq, q.ID, value)
	}
}

// secret reads a hidden line, or a line of the input when it is not a
// terminal.
func (p *prompter) secret() (string, error) {
	if p.hidden != nil {
		return p.hidden()
	}
	line, err := p.r.ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		if errors.Is(err, io.EOF) {
			return "", errors.New("the input ended before the answer was complete")
		}
		return "", err
	}
	fmt.Fprintln(p.w)
	return strings.TrimSpace(line), nil
}

// expects is ", an integer from 1 to 10" for a question with an input
// rule, "" for one without.
func expects(q *hitlv1.Question) string {
	if q.Input == nil {
		return ""
	}
	return ", " + answerer.DescribeInput(q.Input)
}

func required(q *hitlv1.Question) bool { return q.Input != nil && q.Input.Required }

// skipHint says whether Enter skips the question.
func skipHint(q *hitlv1.Question) string {
	if required(q) {
		return "required"
	}
	return "Enter to skip"
}

func noneHint(q *hitlv1.Question) string {
	if required(q) {
		return "required"
	}
	return "Enter for none"
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

// line prints a prompt and reads one trimmed line (ask).
func (p *prompter) line(prompt string) (string, error) { return ask(p.r, p.w, prompt) }

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
