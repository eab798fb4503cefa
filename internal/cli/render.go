package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/answerer"
)

// tableStyle says which columns a question table has.
type tableStyle struct {
	// allNamespaces adds NAMESPACE first.
	allNamespaces bool
	// wide adds CALL ID, CLAIMED BY and DEADLINE.
	wide bool
}

// printTable prints one view as a kubectl-style table.
func printTable(w io.Writer, title string, items []hitlv1.UserQuestion, style tableStyle, now time.Time) {
	fmt.Fprintf(w, "%s (%d)\n", title, len(items))
	if len(items) == 0 {
		fmt.Fprintln(w)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, style.header())
	for i := range items {
		fmt.Fprintln(tw, style.row(&items[i], now))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
}

func (s tableStyle) header() string {
	head := "NAME\tAGENT\tSTATE\tQUESTIONS\tLEFT\tANSWERED BY\tAGE"
	if s.wide {
		head += "\tCALL ID\tCLAIMED BY\tDEADLINE"
	}
	if s.allNamespaces {
		head = "NAMESPACE\t" + head
	}
	return head
}

func (s tableStyle) row(q *hitlv1.UserQuestion, now time.Time) string {
	row := fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s\t%s", q.Name, q.Spec.Agent, stateOf(q), len(q.Spec.Questions),
		timeLeft(q, now), answeredBy(q), duration.HumanDuration(now.Sub(q.CreationTimestamp.Time)))
	if s.wide {
		row += fmt.Sprintf("\t%s\t%s\t%s", q.CallID(), claimedBy(q), deadline(q))
	}
	if s.allNamespaces {
		row = q.Namespace + "\t" + row
	}
	return row
}

// claimedBy lists the holders of the live claims, "-" for none.
func claimedBy(q *hitlv1.UserQuestion) string {
	if len(q.Status.Claims) == 0 {
		return "-"
	}
	holders := make([]string, 0, len(q.Status.Claims))
	for _, c := range q.Status.Claims {
		holders = append(holders, c.Holder)
	}
	return strings.Join(holders, ",")
}

// deadline is the end of the window, "-" for a blocking question.
func deadline(q *hitlv1.UserQuestion) string {
	if d, ok := q.Deadline(); ok {
		return d.UTC().Format(time.RFC3339)
	}
	return "-"
}

func stateOf(q *hitlv1.UserQuestion) string {
	s := string(q.State())
	if q.Status.QueuedReply != nil {
		s += " (reply queued)"
	}
	return s
}

// timeLeft is what remains of an Open question's window.
func timeLeft(q *hitlv1.UserQuestion, now time.Time) string {
	switch {
	case q.Status.State.Terminal() || q.Status.State == hitlv1.StateContinued:
		return "-"
	case q.Spec.Timeout == nil:
		return "blocking"
	case len(q.Status.Claims) > 0:
		return "held"
	case q.Status.Deadline == nil:
		return q.Spec.Timeout.Duration.String()
	}
	left := q.Status.Deadline.Sub(now)
	if left < 0 {
		return "0s"
	}
	return left.Round(time.Second).String()
}

func answeredBy(q *hitlv1.UserQuestion) string {
	if s := q.Status.Settlement; s != nil && s.AnsweredBy != nil && s.AnsweredBy.Username != "" {
		return s.AnsweredBy.Username
	}
	return "-"
}

// printCard prints a question the way a person reads it.
func printCard(w io.Writer, q *hitlv1.UserQuestion, now time.Time) {
	rule := strings.Repeat("─", 60)
	fmt.Fprintf(w, "%s\n%s/%s  agent %s  %s\n", rule, q.Namespace, q.Name, q.Spec.Agent, stateOf(q))
	if q.CallID() != q.Name {
		fmt.Fprintf(w, "call %s\n", q.CallID())
	}
	switch {
	case q.Status.State.Terminal():
	case q.Status.State == hitlv1.StateContinued:
		fmt.Fprintln(w, "the window closed unanswered: a reply now is queued until the agent admits it")
	case q.Spec.Timeout == nil:
		fmt.Fprintln(w, "blocking: waits until answered or cancelled")
	case q.Status.Deadline != nil:
		left := max(q.Status.Deadline.Sub(now), 0).Round(time.Second)
		fmt.Fprintf(w, "window %s, deadline %s (%s left)\n", q.Spec.Timeout.Duration, q.Status.Deadline.UTC().Format(time.RFC3339), left)
	default:
		fmt.Fprintf(w, "window %s\n", q.Spec.Timeout.Duration)
	}
	for _, c := range q.Status.Claims {
		fmt.Fprintf(w, "claimed by %s (claim %s): the window stays open while the claim lives\n", c.Holder, c.Name)
	}
	printVotes(w, q)
	fmt.Fprintln(w, rule)
	for i := range q.Spec.Questions {
		printQuestion(w, &q.Spec.Questions[i])
	}
	if r := q.Status.QueuedReply; r != nil {
		fmt.Fprintf(w, "%s:\n", queuedText(r))
		printAnswers(w, r.Answers)
	}
	if s := q.Status.Settlement; s != nil {
		fmt.Fprintf(w, "%s:\n", settledText(s))
		printAnswers(w, q.Status.Answers)
	}
	if q.Status.State == hitlv1.StateCancelled {
		fmt.Fprintln(w, "Cancelled by the agent.")
	}
}

// printVotes prints, for a governed question, what settles it, the votes
// counted (who, and Approve or Reject) and, while it is undecided, what it
// still needs.
func printVotes(w io.Writer, q *hitlv1.UserQuestion) {
	ap := answerer.ApprovalOf(q)
	if ap == nil {
		return
	}
	fmt.Fprintf(w, "votes %s: settles with %s\n", ap.Tally, ap.Rules())
	for _, v := range ap.Votes {
		fmt.Fprintf(w, "  %s\n", voteText(v))
	}
	if needs := stillNeeded(q, ap); len(needs) > 0 {
		fmt.Fprintf(w, "still needed: %s\n", strings.Join(needs, "; "))
	}
}

// voteText is one vote in words: "carol: Approve (counts for prod/sre)".
func voteText(v hitlv1.Vote) string {
	s := fmt.Sprintf("%s: %s", user(&v.By), v.Choice)
	if len(v.Sets) > 0 {
		s += fmt.Sprintf(" (counts for %s)", strings.Join(v.Sets, ", "))
	}
	return s
}

// stillNeeded is what a governed question lacks to settle; nothing once it
// is Settled or Cancelled, when it can get no more.
func stillNeeded(q *hitlv1.UserQuestion, ap *answerer.Approval) []string {
	if q.Status.State.Terminal() {
		return nil
	}
	return ap.Needs()
}

func printQuestion(w io.Writer, q *hitlv1.Question) {
	header := ""
	if q.Header != "" {
		header = "[" + q.Header + "] "
	}
	fmt.Fprintf(w, "%s%s  (%s, id %s)\n", header, q.Question, questionKind(q), q.ID)
	if in := q.Intent; in != nil {
		switch {
		case in.PlanReview != nil:
			fmt.Fprintf(w, "  plan review: %q approves\n", in.PlanReview.Approve)
		case in.Approval != nil:
			fmt.Fprintf(w, "  approval: %q approves, %q rejects", in.Approval.Approve, in.Approval.Reject)
			if in.Approval.Always != "" {
				fmt.Fprintf(w, ", %q always allows", in.Approval.Always)
			}
			fmt.Fprintln(w)
			if s := in.Approval.Subject; s != nil {
				fmt.Fprintf(w, "  subject: %s\n", s.Name)
			}
		}
	}
	if q.Detail != "" {
		for _, line := range strings.Split(strings.TrimRight(q.Detail, "\n"), "\n") {
			fmt.Fprintf(w, "  │ %s\n", line)
		}
	}
	if s := inputText(q); s != "" {
		fmt.Fprintf(w, "  %s\n", s)
	}
	if q.Sensitive {
		fmt.Fprintf(w, "  %s\n", sensitiveText)
	}
	for i, o := range q.Options {
		if o.Description != "" {
			fmt.Fprintf(w, "  %d. %s — %s\n", i+1, o.Label, o.Description)
		} else {
			fmt.Fprintf(w, "  %d. %s\n", i+1, o.Label)
		}
	}
	fmt.Fprintln(w)
}

// inputText says what free text a question with an input rule takes:
// "expects an integer from 1 to 10; required". "" for a question without.
func inputText(q *hitlv1.Question) string {
	if q.Input == nil {
		return ""
	}
	s := "expects " + answerer.DescribeInput(q.Input)
	if q.Input.Required {
		s += "; required"
	}
	return s
}

// sensitiveText is what a card says of a sensitive question.
const sensitiveText = "sensitive: the answer is sealed for the asking agent; no one else can read it"

// sealedText stands for the answer to a sensitive question, which is shown
// to no one (its sealed text included).
const sealedText = "(sensitive answer given)"

// questionKind says how a question is answered: "single choice",
// "multiple choice", "free text" or "sensitive free text".
func questionKind(q *hitlv1.Question) string {
	switch {
	case q.Sensitive:
		return "sensitive free text"
	case len(q.Options) == 0:
		return "free text"
	case q.MultiSelect:
		return "multiple choice"
	}
	return "single choice"
}

func printAnswers(w io.Writer, answers []hitlv1.AnswerItem) {
	for _, a := range answers {
		fmt.Fprintf(w, "  %s: %s\n", a.ID, answerText(a))
	}
}

// answerText is one answer in words: the labels selected, the custom text
// quoted (so that it holds no line break), "(sensitive answer given)" for a
// sealed answer, or "(skipped)".
func answerText(a hitlv1.AnswerItem) string {
	switch {
	case a.Sealed != "":
		return sealedText
	case a.Skipped():
		return "(skipped)"
	case a.Custom != "" && len(a.Selected) > 0:
		return strings.Join(a.Selected, ", ") + " + " + strconv.Quote(a.Custom)
	case a.Custom != "":
		return strconv.Quote(a.Custom)
	}
	return strings.Join(a.Selected, ", ")
}

// queuedText says which late reply waits, and whose.
func queuedText(r *hitlv1.QueuedReply) string {
	return fmt.Sprintf("Queued reply %s from %s%s, waiting for the agent to admit it", r.Name, user(r.AnsweredBy), via(r.Source))
}

// via says how a reply a GitOps engine applied came, after its author.
func via(s *hitlv1.ReplySource) string {
	if s == nil {
		return ""
	}
	return " (" + s.Via() + ")"
}

// settledText says how a question was settled: in its window or late, by
// which reply, whose, and when.
func settledText(s *hitlv1.Settlement) string {
	when := "in window"
	if s.Late {
		when = "late"
	}
	return fmt.Sprintf("Settled %s by reply %s from %s%s at %s", when, s.Reply, user(s.AnsweredBy), via(s.Source), s.At.UTC().Format(time.RFC3339))
}

func user(u *hitlv1.UserInfo) string {
	if u == nil || u.Username == "" {
		return "unknown"
	}
	return u.Username
}
