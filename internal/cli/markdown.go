package cli

import (
	"fmt"
	"io"
	"strings"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/answerer"
)

// printMarkdown renders a question for the description of the pull
// request that commits a reply to it (answer --to-file): what is asked, by
// whom, the options, the approval rule and votes, the spec digest the
// reply is bound to and, once settled, the answers.
//
// The question's text is the agent's, and the custom answers a person's:
// neither may change the page around it. Text that takes one line is
// escaped (mdText, mdCode), so it renders as the characters written and
// starts no HTML, link, emphasis or block. A detail is markdown, often a
// plan with headings of its own; rendered, it could close the page's
// elements and add headings or HTML to it, so it is shown as its source in
// a fenced block (mdFence) that no line of it can close.
func printMarkdown(w io.Writer, q *hitlv1.UserQuestion) {
	fmt.Fprintf(w, "## %s\n\n", mdTitle(q))
	mdFacts(w, q)
	for i := range q.Spec.Questions {
		mdQuestion(w, i+1, &q.Spec.Questions[i])
	}
	mdVotes(w, q)
	mdOutcome(w, q)
}

// mdTitle names the question and its agent, after the first header of its
// questions when they have one.
func mdTitle(q *hitlv1.UserQuestion) string {
	title := "Question " + mdCode(q.Namespace+"/"+q.Name) + " from agent " + mdCode(q.Spec.Agent)
	for _, question := range q.Spec.Questions {
		if question.Header != "" {
			return mdText(question.Header) + ": " + title
		}
	}
	return title
}

// mdFacts lists who asked, the state, the deadline and what a reply is
// bound to.
func mdFacts(w io.Writer, q *hitlv1.UserQuestion) {
	when := "none: the question blocks until answered or cancelled"
	if d := deadline(q); d != "-" {
		when = mdCode(d)
	}
	digest := "not written yet: a reply prepared now is bound by uid only"
	if q.Status.SpecDigest != "" {
		digest = mdCode(q.Status.SpecDigest)
	}
	fmt.Fprintf(w, "- **Asked by:** %s\n", mdCode(user(q.Spec.AskedBy)))
	fmt.Fprintf(w, "- **State:** %s\n", mdText(stateOf(q)))
	fmt.Fprintf(w, "- **Deadline:** %s\n", when)
	fmt.Fprintf(w, "- **UID:** %s\n", mdCode(string(q.UID)))
	fmt.Fprintf(w, "- **Spec digest:** %s\n\n", digest)
}

func mdQuestion(w io.Writer, n int, q *hitlv1.Question) {
	heading := mdText(q.Question)
	if q.Header != "" {
		heading = mdText(q.Header) + ": " + heading
	}
	fmt.Fprintf(w, "### %d. %s\n\n%s: %s\n\n", n, heading, mdCode(q.ID), questionKind(q))
	if in := q.Intent; in != nil && in.Approval != nil && in.Approval.Subject != nil {
		fmt.Fprintf(w, "Asking for permission: %s\n\n", mdText(in.Approval.Subject.Name))
	}
	mdDetail(w, q)
	if s := inputText(q); s != "" {
		fmt.Fprintf(w, "%s.\n\n", mdText(strings.ToUpper(s[:1])+s[1:]))
	}
	if q.Sensitive {
		fmt.Fprintf(w, "%s.\n\n", mdText(strings.ToUpper(sensitiveText[:1])+sensitiveText[1:]))
	}
	for _, o := range q.Options {
		fmt.Fprintf(w, "- **%s**", mdText(o.Label))
		if role := optionRole(q, o.Label); role != "" {
			fmt.Fprintf(w, " _(%s)_", role)
		}
		if o.Description != "" {
			fmt.Fprintf(w, ": %s", mdText(o.Description))
		}
		fmt.Fprintln(w)
	}
	if len(q.Options) > 0 {
		fmt.Fprintln(w)
	}
}

// mdDetail shows a question's detail as markdown source, folded (open for
// a plan, which is what is reviewed).
func mdDetail(w io.Writer, q *hitlv1.Question) {
	if q.Detail == "" {
		return
	}
	open, summary := "", "Detail"
	if q.Intent != nil && q.Intent.PlanReview != nil {
		open, summary = " open", "Plan"
	}
	// The HTML lines are ours; a blank line after each returns to
	// markdown, as CommonMark ends an HTML block there.
	fmt.Fprintf(w, "<details%s><summary>%s</summary>\n\n", open, summary)
	mdFence(w, "markdown", q.Detail)
	fmt.Fprint(w, "\n</details>\n\n")
}

// optionRole is what choosing an option of a PlanReview or Approval
// question means; "" for an option of another question.
func optionRole(q *hitlv1.Question, label string) string {
	switch in := q.Intent; {
	case in == nil:
	case in.Approval != nil && label == in.Approval.Approve:
		return "approves"
	case in.Approval != nil && label == in.Approval.Reject:
		return "rejects"
	case in.Approval != nil && label == in.Approval.Always:
		return "approves, and always allows"
	case in.PlanReview != nil && label == in.PlanReview.Approve:
		return "approves the plan"
	case in.PlanReview != nil:
		return "declines the plan"
	}
	return ""
}

// mdVotes shows, for a governed question, its rule, tally and votes (see
// printVotes).
func mdVotes(w io.Writer, q *hitlv1.UserQuestion) {
	ap := answerer.ApprovalOf(q)
	if ap == nil {
		return
	}
	fmt.Fprintf(w, "### Votes: %s\n\nSettles with %s.\n\n", mdText(ap.Tally), mdText(ap.Rules()))
	for _, v := range ap.Votes {
		fmt.Fprintf(w, "- %s\n", mdText(voteText(v)))
	}
	if len(ap.Votes) > 0 {
		fmt.Fprintln(w)
	}
	if needs := stillNeeded(q, ap); len(needs) > 0 {
		fmt.Fprintf(w, "Still needed: %s.\n\n", mdText(strings.Join(needs, "; ")))
	}
}

// mdOutcome shows the queued late reply, the settled answers and who gave
// them, or the cancellation.
func mdOutcome(w io.Writer, q *hitlv1.UserQuestion) {
	if r := q.Status.QueuedReply; r != nil {
		fmt.Fprintf(w, "### Queued reply\n\n%s:\n\n", mdText(queuedText(r)))
		mdAnswers(w, r.Answers)
	}
	if s := q.Status.Settlement; s != nil {
		fmt.Fprintf(w, "### Answers\n\n%s:\n\n", mdText(settledText(s)))
		mdAnswers(w, q.Status.Answers)
	}
	if q.Status.State == hitlv1.StateCancelled {
		fmt.Fprint(w, "### Cancelled\n\nCancelled by the agent.\n")
	}
}

func mdAnswers(w io.Writer, answers []hitlv1.AnswerItem) {
	for _, a := range answers {
		fmt.Fprintf(w, "- %s: %s\n", mdCode(a.ID), mdText(answerText(a)))
	}
	fmt.Fprintln(w)
}

// mdEscaper backslash-escapes the ASCII punctuation that can start
// markdown in a line of text: HTML and entities (< > &), code (`),
// emphasis and strikethrough (* _ ~), links and images (! [ ] ( )),
// table cells (|), GitHub's math ($), and the block markers a line could
// start with (# + - . > and a list's 1) or 1.). CommonMark reads any
// escaped ASCII punctuation as the character itself.
var mdEscaper = func() *strings.Replacer {
	var pairs []string
	for _, c := range "\\`*_~<>&[]()!|$#+-." {
		pairs = append(pairs, string(c), `\`+string(c))
	}
	return strings.NewReplacer(pairs...)
}()

// blank stands for a text with nothing to show, so that the markup around
// it is never left empty ("- ****" is a rule, not an option).
const blank = `\-`

// mdText is s as one line of escaped markdown: its line breaks (and other
// runs of white space) become one space, so that it stays in the
// paragraph, heading or list item it is put in.
func mdText(s string) string {
	if s = oneLine(s); s == "" {
		return blank
	}
	return mdEscaper.Replace(s)
}

// mdCode is s as a code span, on one line: a span delimited by a run of
// backticks longer than any in s, which nothing in s can end.
func mdCode(s string) string {
	if s = oneLine(s); s == "" {
		return blank
	}
	ticks := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " " // CommonMark strips one space each side
	}
	return ticks + s + ticks
}

// mdFence writes text as a fenced code block: its fence is a run of
// backticks longer than any in text, so no line of text closes it, and
// whatever text holds (HTML, headings, fences) is shown as written.
func mdFence(w io.Writer, info, text string) {
	fence := strings.Repeat("`", max(3, longestRun(text, '`')+1))
	fmt.Fprintf(w, "%s%s\n%s\n%s\n", fence, info, strings.TrimRight(text, "\n"), fence)
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c rune) int {
	longest, run := 0, 0
	for _, r := range s {
		if r != c {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	return longest
}

// oneLine joins the words of s with single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
