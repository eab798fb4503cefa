package inbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/answerer"
)

// cardView is what the card template shows of a question (an ask): its
// form, which never changes (a question's spec is immutable), and its
// status, which the page replaces as the question changes.
type cardView struct {
	DomID     string
	Key       string
	Order     string
	Namespace string
	Name      string
	UID       string
	Agent     string
	CallID    string
	Questions []questionView
	// Spec is what the page's validator needs of the questions, as JSON.
	Spec string
	// SealingKey is the question's spec.sealingKey, which the page seals
	// the answers of sensitive questions to.
	SealingKey string
	// Decision is "plan" or "approval" when the ask is one question with
	// that intent: the card then ends in decision buttons.
	Decision string
	// Digest is the question's status.specDigest when the card was made,
	// which the page's reply carries: a reply to a question changed since
	// counts for nothing (QUESTION_CHANGED). Empty until the controller
	// has written it.
	Digest string
	Status statusView
}

type questionView struct {
	DomID  string
	ID     string
	Header string
	Text   string
	Detail template.HTML
	// Kind is "choice" (options), "text" (no options), "plan" or "approval".
	Kind    string
	Multi   bool
	Options []optionView
	// Skippable: the ask has other questions, so this one may be
	// skipped, and its input does not require an answer.
	Skippable bool
	// Required: the question's input.required; it may not be skipped.
	Required bool
	// Sensitive: the answer is sealed in the browser (Entry is a password
	// field).
	Sensitive bool
	// Entry is the control of the free-text answer.
	Entry entryView
	// Approve is the approving label of a PlanReview or Approval;
	// Decline are the plan's other options.
	Approve optionView
	Decline []optionView
	// Approval's deny and always options, its subject (the icon only when
	// it is an inline raster image, iconURL) and localized texts.
	Reject      optionView
	Always      *optionView
	Subject     string
	Icon        template.URL
	ApproveText string
}

type optionView struct {
	DomID       string
	Label       string
	Description string
}

// statusView is the changing part of a card.
type statusView struct {
	Namespace string
	Agent     string
	State     string
	// AskedAt and Deadline are Unix milliseconds (Deadline 0: blocking);
	// the page counts age and the window down from them.
	AskedAt   int64
	Deadline  int64
	Age       string
	Remaining string
	Claims    []string
	More      int32
	Queued    *replyView
	Settled   *replyView
	// Votes is set on a question an approval rule governs.
	Votes *votesView
}

// votesView is a governed question's votes as a person sees them.
type votesView struct {
	// Tally is status.tally ("1/2", "1/2 (1 no)"); Rules what settles
	// the question, in words.
	Tally string
	Rules string
	Votes []voteView
	// Needs is what the question still needs, in words; empty once it is
	// decided.
	Needs string
	// Mine is the person's own vote: the card then offers no other.
	Mine *voteView
}

type voteView struct {
	By     string
	Choice string
	// Sets are the rule's sets of approvers the approval counts for.
	Sets string
	Mine bool
}

type replyView struct {
	Name    string
	By      string
	Mine    bool
	Late    bool
	Answers string
	// Via is how a reply a GitOps engine applied came ("via Git, commit
	// 9b1d6c0 (verified), applied by Kustomization team-a/answers").
	Via string
}

// specView is a question as the page's validator reads it.
type specView struct {
	ID          string              `json:"id"`
	Options     []string            `json:"options"`
	MultiSelect bool                `json:"multiSelect"`
	Approval    bool                `json:"approval"`
	Input       *hitlv1.AnswerInput `json:"input,omitempty"`
	Sensitive   bool                `json:"sensitive,omitempty"`
}

// domID is a safe, stable element id for a question's card.
func domID(q *hitlv1.UserQuestion) string {
	sum := sha256.Sum256([]byte(q.Namespace + "/" + q.Name + "/" + string(q.UID)))
	return "c" + hex.EncodeToString(sum[:8])
}

func key(q *hitlv1.UserQuestion) string { return q.Namespace + "/" + q.Name }

// order sorts active questions in ask order: when the window was measured
// from, then the name.
func order(q *hitlv1.UserQuestion) string {
	return fmt.Sprintf("%020d/%s", q.WindowStart().UnixNano(), key(q))
}

// newCard builds a question's card for person, in locale.
func newCard(q *hitlv1.UserQuestion, p Person, locales []string, now time.Time) cardView {
	id := domID(q)
	c := cardView{
		DomID: id, Key: key(q), Order: order(q), Namespace: q.Namespace, Name: q.Name, UID: string(q.UID),
		Agent: q.Spec.Agent, CallID: q.CallID(), Digest: q.Status.SpecDigest, SealingKey: q.Spec.SealingKey,
		Status: newStatus(q, p, now),
	}
	specs := make([]specView, 0, len(q.Spec.Questions))
	for i := range q.Spec.Questions {
		qq := &q.Spec.Questions[i]
		c.Questions = append(c.Questions, newQuestion(qq, fmt.Sprintf("%s-q%d", id, i), len(q.Spec.Questions) > 1, locales))
		s := specView{ID: qq.ID, Options: []string{}, MultiSelect: qq.MultiSelect,
			Approval: qq.Intent != nil && qq.Intent.Type == hitlv1.IntentApproval, Input: qq.Input, Sensitive: qq.Sensitive}
		for _, o := range qq.Options {
			s.Options = append(s.Options, o.Label)
		}
		specs = append(specs, s)
	}
	if len(c.Questions) == 1 {
		switch k := c.Questions[0].Kind; k {
		case "plan", "approval":
			c.Decision = k
		}
	}
	spec, _ := json.Marshal(specs)
	c.Spec = string(spec)
	return c
}

func newQuestion(q *hitlv1.Question, id string, skippable bool, locales []string) questionView {
	required := q.Input != nil && q.Input.Required
	v := questionView{
		DomID: id, ID: q.ID, Header: q.Header, Text: q.Question, Detail: renderMarkdown(q.Detail),
		Multi: q.MultiSelect, Skippable: skippable && !required, Required: required, Sensitive: q.Sensitive,
		Kind: "choice", Entry: newEntry(q, len(q.Options) > 0),
	}
	byLabel := map[string]optionView{}
	for j, o := range q.Options {
		ov := optionView{DomID: fmt.Sprintf("%s-o%d", id, j), Label: o.Label, Description: o.Description}
		v.Options = append(v.Options, ov)
		byLabel[o.Label] = ov
	}
	if len(q.Options) == 0 {
		v.Kind = "text"
	}
	in := q.Intent
	switch {
	case in != nil && in.Type == hitlv1.IntentPlanReview && in.PlanReview != nil:
		v.Kind = "plan"
		v.Approve = byLabel[in.PlanReview.Approve]
		for _, o := range v.Options {
			if o.Label != in.PlanReview.Approve {
				v.Decline = append(v.Decline, o)
			}
		}
	case in != nil && in.Type == hitlv1.IntentApproval && in.Approval != nil:
		a := in.Approval
		v.Kind = "approval"
		v.Approve, v.Reject = byLabel[a.Approve], byLabel[a.Reject]
		if a.Always != "" {
			always := byLabel[a.Always]
			v.Always = &always
		}
		if a.Subject != nil {
			v.Subject = a.Subject.Name
			v.Icon = iconURL(a.Subject.Icon)
		}
		if d := a.Display; d != nil {
			if t := localized(d.Question, locales); t != "" {
				v.Text = t
			}
			if t := localized(d.Detail, locales); t != "" {
				v.Detail = renderMarkdown(t)
			}
			v.ApproveText = localized(d.Approve, locales)
		}
	}
	return v
}

// newStatus is the changing part of a question's card, as person sees it.
func newStatus(q *hitlv1.UserQuestion, p Person, now time.Time) statusView {
	st := q.Status.State
	if st == "" {
		st = hitlv1.StateOpen
	}
	if q.Spec.Cancelled && !st.Terminal() {
		st = hitlv1.StateCancelled
	}
	asked := q.WindowStart()
	v := statusView{
		Namespace: q.Namespace, Agent: q.Spec.Agent, State: string(st),
		AskedAt: asked.UnixMilli(), Age: duration.HumanDuration(now.Sub(asked)),
	}
	if deadline, timed := q.Deadline(); timed && st == hitlv1.StateOpen {
		v.Deadline = deadline.UnixMilli()
		v.Remaining = remaining(deadline.Sub(now))
	}
	for _, c := range q.Status.Claims {
		v.Claims = append(v.Claims, orDefault(c.Holder, c.Name))
	}
	v.More = q.Status.ClaimCount - int32(len(q.Status.Claims))
	if qr := q.Status.QueuedReply; qr != nil {
		v.Queued = &replyView{Name: qr.Name, Answers: summary(qr.Answers)}
		if qr.AnsweredBy != nil {
			v.Queued.By = qr.AnsweredBy.Username
			v.Queued.Mine = qr.AnsweredBy.Username == p.Username
		}
		if qr.Source != nil {
			v.Queued.Via = qr.Source.Via()
		}
	}
	if s := q.Status.Settlement; s != nil && st == hitlv1.StateSettled {
		v.Settled = &replyView{Name: s.Reply, Late: s.Late, Answers: summary(q.Status.Answers)}
		if s.AnsweredBy != nil {
			v.Settled.By = s.AnsweredBy.Username
			v.Settled.Mine = s.AnsweredBy.Username == p.Username
		}
		if s.Source != nil {
			v.Settled.Via = s.Source.Via()
		}
	}
	v.Votes = newVotes(q, p, st)
	return v
}

// newVotes is the votes of a governed question, as person sees them; nil
// when no approval rule governs it.
func newVotes(q *hitlv1.UserQuestion, p Person, st hitlv1.QuestionState) *votesView {
	ap := answerer.ApprovalOf(q)
	if ap == nil {
		return nil
	}
	v := &votesView{Tally: ap.Tally, Rules: ap.Rules()}
	for _, vote := range ap.Votes {
		vv := voteView{By: vote.By.Username, Choice: string(vote.Choice), Sets: strings.Join(vote.Sets, ", "),
			Mine: p.Username != "" && vote.By.Username == p.Username}
		if vv.Mine {
			v.Mine = &vv
		}
		v.Votes = append(v.Votes, vv)
	}
	if !st.Terminal() {
		v.Needs = strings.Join(ap.Needs(), "; ")
	}
	return v
}

// active reports whether a question belongs in the list: it may take a
// reply, or one is queued on it for the agent to admit.
func active(q *hitlv1.UserQuestion) bool {
	code, _ := hitlv1.Unanswerable(q.Name, &q.Spec, &q.Status)
	return code == "" || code == hitlv1.CodeReplyQueued
}

// remaining is a countdown's text, as the page writes it too.
func remaining(d time.Duration) string {
	if d <= 0 {
		return "window closing"
	}
	d = d.Round(time.Second)
	m, s := int(d/time.Minute), int(d%time.Minute/time.Second)
	if m >= 60 {
		return fmt.Sprintf("%dh%02dm left", m/60, m%60)
	}
	return fmt.Sprintf("%d:%02d left", m, s)
}

// summary writes an answer batch on one line: "env: staging; notes: “…”".
func summary(items []hitlv1.AnswerItem) string {
	parts := make([]string, 0, len(items))
	for _, a := range items {
		var vals []string
		vals = append(vals, a.Selected...)
		if a.Custom != "" {
			vals = append(vals, strconv.Quote(a.Custom))
		}
		if a.Sealed != "" {
			// Only the asking agent can open it; its ciphertext says
			// nothing to a person.
			vals = append(vals, "sensitive answer given")
		}
		if len(vals) == 0 {
			vals = []string{"(skipped)"}
		}
		parts = append(parts, a.ID+": "+strings.Join(vals, ", "))
	}
	return strings.Join(parts, "; ")
}

// localized picks a text for the first of locales that it has (a locale,
// then its language), else its "en" text.
func localized(t hitlv1.LocalizedText, locales []string) string {
	for _, l := range locales {
		if s, ok := t[l]; ok && s != "" {
			return s
		}
		if base, _, found := strings.Cut(l, "-"); found {
			if s, ok := t[base]; ok && s != "" {
				return s
			}
		}
	}
	return t["en"]
}

// locales reads Accept-Language, best first.
func locales(r *http.Request) []string {
	type tag struct {
		name string
		q    float64
	}
	var tags []tag
	for _, part := range strings.Split(r.Header.Get("Accept-Language"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if name == "" || name == "*" || len(name) > 35 {
			continue
		}
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		tags = append(tags, tag{name, q})
	}
	sort.SliceStable(tags, func(i, j int) bool { return tags[i].q > tags[j].q })
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		out = append(out, t.name)
	}
	return out
}

// explanations say in words what each outcome and code means for the
// person who sent the reply.
var explanations = map[string]string{
	string(hitlv1.OutcomeApplied):  "The agent has your answer: the question is settled.",
	string(hitlv1.OutcomeQueued):   "The window had closed, so your reply is queued: the agent will take it when ready. You can withdraw it until then.",
	string(hitlv1.OutcomeAdmitted): "The agent took your late reply.",
	string(hitlv1.OutcomeCounted):  "Your vote is counted; the question needs more approvals.",
	string(hitlv1.CodeDuplicateVote): "You have already voted on this question: each person votes once, " +
		"and your first vote stands.",
	string(hitlv1.CodeQuestionChanged): "The question changed since this card was shown, so nothing was counted: " +
		"reload the page and read it again.",
	string(hitlv1.CodeNotAnswerable): "The question can no longer be answered: it was settled (someone answered first), " +
		"cancelled by the agent, or deleted.",
	string(hitlv1.CodeReplyQueued): "Someone's late reply to this question is already queued and waits for the agent; " +
		"it must be taken or withdrawn before another can be sent.",
	string(hitlv1.CodeForbidden): "You may not answer this agent's questions: you need the RBAC verb answer on its agent " +
		"(resource agents in group hitl.dev). Ask your cluster operator.",
	string(hitlv1.CodeBadAnswer):     "The answers do not fit the question; nothing was sent.",
	string(hitlv1.CodeAgentMismatch): "The reply names another agent than its question's.",
}

func explain(s string) string { return explanations[s] }

var funcs = template.FuncMap{
	"join":   func(s []string) string { return strings.Join(s, ", ") },
	"minus1": func(n int) int { return n - 1 },
	"stateText": func(s string) string {
		switch s {
		case string(hitlv1.StateContinued):
			return "window closed: answer late"
		case string(hitlv1.StateOpen):
			return "waiting"
		}
		return strings.ToLower(s)
	},
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
