package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/agent"
	"github.com/hitl-dev/hitl/pkg/sealed"
)

// ask is ask_user_question: it maps the questions' inputs to hitl's form
// (questionOf), checks the ask, asks as agent.Ask (no timeout) or
// agent.AskTimed do, and waits as await does: at most the max wait,
// counted from the call's start. The answers come with their typed values,
// sensitive ones opened (output).
func (s *Server) ask(ctx context.Context, req *mcp.CallToolRequest, in AskArgs) (AskOutput, string, error) {
	start := time.Now()
	c, a, err := s.caller(ctx, req)
	if err != nil {
		return AskOutput{}, "", err
	}
	questions := make([]hitlv1.Question, 0, len(in.Questions))
	for i, aq := range in.Questions {
		q, err := questionOf(i, aq)
		if err != nil {
			return AskOutput{}, "", err
		}
		questions = append(questions, q)
	}
	spec := hitlv1.UserQuestionSpec{Agent: c.Agent, CallID: in.CallID, Questions: questions, Approval: in.Approval}
	if s.opts.SealingKey != nil && slices.ContainsFunc(questions, func(q hitlv1.Question) bool { return q.Sensitive }) {
		// As agent.Create will: the key this process opens the answers with.
		spec.SealingKey = s.opts.SealingKey.PublicKey()
	}
	var timeout *time.Duration
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil {
			return AskOutput{}, "", fmt.Errorf("%s: timeout %q is not a duration; give one like \"30s\", \"2m\" or \"1h30m\", or leave it out to wait until answered (timeout)", hitlv1.CodeBadTimeout, in.Timeout)
		}
		timeout = &d
		spec.Timeout = &metav1.Duration{Duration: d}
	}
	if err := validation.ValidateAsk(&spec, 0); err != nil {
		return AskOutput{}, "", argumentsError(err)
	}
	for i, q := range questions {
		switch {
		case q.ID == "":
			return AskOutput{}, "", fmt.Errorf("%s: every question needs an id (questions[%d].id)", CodeBadArguments, i)
		case q.Question == "":
			return AskOutput{}, "", fmt.Errorf("%s: question %s has no text (questions[%d].question)", CodeBadArguments, q.ID, i)
		}
	}
	release, err := s.acquire(c.Key)
	if err != nil {
		return AskOutput{}, "", err
	}
	defer release()
	stop := s.progress(ctx, req, "waiting for a person to answer")
	defer stop()
	if ctx.Err() != nil {
		return AskOutput{}, "", &validation.Error{Code: hitlv1.CodeAskAborted, Rule: fmt.Sprintf("the call ended before the ask was made (%v)", context.Cause(ctx))}
	}
	q, err := create(ctx, a, agent.Request{CallID: in.CallID, Questions: questions, Approval: in.Approval}, timeout)
	if err != nil {
		return AskOutput{}, "", err
	}
	_, res, text, err := s.await(ctx, c, a, q.Name, start)
	if err != nil {
		return AskOutput{}, "", err
	}
	out, text := s.output(q, res, text)
	return out, text, nil
}

// waitTyped is wait_for_answer (waitFor), with the answers' typed values
// and sensitive answers opened, as ask_user_question returns them.
func (s *Server) waitTyped(ctx context.Context, req *mcp.CallToolRequest, in WaitArgs) (AskOutput, string, error) {
	q, res, text, err := s.waitFor(ctx, req, in)
	if err != nil {
		return AskOutput{}, "", err
	}
	out, text := s.output(q, res, text)
	return out, text, nil
}

// question reads the caller's question name, the questions and identity
// (UID) that its answers' types and seals need, with a context that
// outlives the call's by up to cancelGrace, as the wait's own last read.
func (s *Server) question(ctx context.Context, req *mcp.CallToolRequest, name string) (*hitlv1.UserQuestion, error) {
	c, err := s.callers(ctx, req)
	if err != nil {
		return nil, err
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
	defer cancel()
	return get(gctx, c, name)
}

// output is res as ask_user_question and wait_for_answer return it: the
// answers of q with their typed values (answersOf) and the text that says
// them; res and text as they are when it holds no answers (pending,
// waiting).
func (s *Server) output(q *hitlv1.UserQuestion, res AskResult, text string) (AskOutput, string) {
	out := AskOutput{Question: res.Question, CallID: res.CallID, Waiting: res.Waiting, Pending: res.Pending, Approval: res.Approval}
	if len(res.Answers) == 0 {
		return out, text
	}
	if q == nil {
		q = &hitlv1.UserQuestion{}
	}
	out.Answers = answersOf(q, s.opts.SealingKey, res.Answers)
	return out, withVotes(renderTyped(q.Spec.Questions, out.Answers), out.Approval)
}

// answersOf is a batch of q as the tools return it: each answer with its
// typed value (valueOf), a sensitive one opened with key, its text in
// custom. A sealed answer that does not open with key (sealed to another
// process's key) keeps its ciphertext (sealed) and has no value. The
// opened texts go to the tool's result only: never to a log, an error or
// a notification.
func answersOf(q *hitlv1.UserQuestion, key *sealed.Key, items []hitlv1.AnswerItem) []Answer {
	byID := make(map[string]*hitlv1.Question, len(q.Spec.Questions))
	for i := range q.Spec.Questions {
		byID[q.Spec.Questions[i].ID] = &q.Spec.Questions[i]
	}
	out := make([]Answer, 0, len(items))
	for _, item := range items {
		a := Answer{ID: item.ID, Selected: item.Selected, Custom: item.Custom}
		question := byID[item.ID]
		a.Sensitive = question != nil && question.Sensitive || item.Sealed != ""
		if item.Sealed != "" {
			var err error = sealed.ErrNotOpened
			var text string
			if key != nil {
				text, err = key.Open(item.Sealed, sealed.Binding{Namespace: q.Namespace, Question: q.Name, UID: string(q.UID), ID: item.ID})
			}
			if err != nil {
				a.Sealed = item.Sealed
				out = append(out, a)
				continue
			}
			a.Custom = text
		}
		a.Value = valueOf(question, a)
		out = append(out, a)
	}
	return out
}

// valueOf is an answer's typed value: the selected options' values (one
// for a single-select question, a list for a multiSelect one), else its
// free text as its input type reads it (a number, a boolean, or the text);
// nil for a skip.
func valueOf(q *hitlv1.Question, a Answer) any {
	if len(a.Selected) > 0 {
		values := a.Selected
		if q != nil {
			values = q.ValuesOf(hitlv1.AnswerItem{ID: a.ID, Selected: a.Selected})
		}
		if len(values) == 1 && (q == nil || !q.MultiSelect) {
			return values[0]
		}
		return values
	}
	if a.Custom == "" {
		return nil
	}
	if q == nil || q.Input == nil || validation.CheckValue(q.Input, a.Custom) != "" {
		return a.Custom
	}
	switch q.Input.Type {
	case hitlv1.InputNumber, hitlv1.InputInteger:
		// The text, checked to be a JSON number, written as one.
		return json.Number(a.Custom)
	case hitlv1.InputBoolean:
		return a.Custom == "true"
	}
	return a.Custom
}

// Elicitation's string formats, as hitl's input types.
var formats = map[string]hitlv1.InputType{
	"email": hitlv1.InputEmail, "uri": hitlv1.InputURI, "date": hitlv1.InputDate, "date-time": hitlv1.InputDateTime,
}

// hitl's input types, by name.
var inputTypes = map[string]hitlv1.InputType{
	"string": hitlv1.InputString, "number": hitlv1.InputNumber, "integer": hitlv1.InputInteger, "boolean": hitlv1.InputBoolean,
	"date": hitlv1.InputDate, "dateTime": hitlv1.InputDateTime, "email": hitlv1.InputEmail, "uri": hitlv1.InputURI,
}

// questionOf is the i-th question of an ask as a UserQuestion holds it:
// its input in hitl's own form is kept, and an MCP elicitation primitive
// schema mapped one to one: a string (with a format: email, uri, date,
// date-time as dateTime), a number or integer with its bounds, a boolean,
// a single-select enum (enum with enumNames, or oneOf const/title) as the
// question's options, a multi-select (array of enum or anyOf const/title)
// as multiSelect options; the option's label is the title (or the value),
// its value the const when they differ. A schema that does not map is
// BAD_INPUT naming the question and the keyword; the rules of hitl's form
// itself are checked by validation.ValidateAsk.
func questionOf(i int, in AskQuestion) (hitlv1.Question, error) {
	q := hitlv1.Question{ID: in.ID, Question: in.Question, Header: in.Header, Detail: in.Detail, Options: in.Options,
		MultiSelect: in.MultiSelect, Intent: in.Intent, Sensitive: in.Sensitive}
	x := in.Input
	if x == nil {
		return q, nil
	}
	bad := func(keyword, format string, args ...any) error {
		return &validation.Error{Code: hitlv1.CodeBadInput, QuestionID: in.ID, Field: fmt.Sprintf("questions[%d].input.%s", i, keyword),
			Rule: fmt.Sprintf(format, args...)}
	}
	if x.err != nil {
		return q, decodeError(x.raw, x.err, fmt.Sprintf("questions[%d].input", i))
	}
	if len(x.unknown) > 0 {
		k := x.unknown[0]
		if k == "default" || k == "items.default" {
			return q, bad(k, "hitl asks without a default answer: say the default in the question's text or detail, and leave default out")
		}
		return q, bad(k, "%s is not a keyword hitl maps: an input takes type, title, description, minimum, maximum, minLength, maxLength, "+
			"pattern, format, enum, enumNames, oneOf, items (type, enum, anyOf), minItems, maxItems and required", k)
	}
	if q.Detail == "" {
		q.Detail = x.Description
	}
	if q.Header == "" && utf8.RuneCountInString(x.Title) <= 32 {
		q.Header = x.Title
	}
	enum := len(x.Enum) > 0 || len(x.EnumNames) > 0 || len(x.OneOf) > 0
	given := func(names ...string) string {
		present := map[string]bool{
			"minimum": len(x.Minimum) > 0, "maximum": len(x.Maximum) > 0, "minLength": x.MinLength != nil, "maxLength": x.MaxLength != nil,
			"pattern": x.Pattern != "", "format": x.Format != "", "enum": len(x.Enum) > 0, "enumNames": len(x.EnumNames) > 0,
			"oneOf": len(x.OneOf) > 0, "items": x.Items != nil, "minItems": x.MinItems != nil, "maxItems": x.MaxItems != nil,
		}
		for _, n := range names {
			if present[n] {
				return n
			}
		}
		return ""
	}
	if k := given("enum", "enumNames", "oneOf"); k != "" && x.Type != "string" {
		return q, bad(k, "%s belongs to a string schema (single-select); a multi-select is type array with items {type: string, enum} or {anyOf}", k)
	}
	if k := given("items", "minItems", "maxItems"); k != "" && x.Type != "array" {
		return q, bad(k, "%s belongs to an array schema (multi-select)", k)
	}
	if x.Format != "" && (x.Type != "string" || enum) {
		return q, bad("format", "format belongs to a string schema without enum or oneOf")
	}
	switch {
	case x.Type == "":
		return q, bad("type", "the input needs a type: string, number, integer, boolean, date, dateTime, email, uri, or array (multi-select)")
	case x.Type == "array":
		if k := given("minimum", "maximum", "minLength", "maxLength", "pattern"); k != "" {
			return q, bad(k, "%s does not apply to a multi-select", k)
		}
		return multiSelectOf(q, in, x, bad)
	case enum:
		if k := given("minimum", "maximum", "minLength", "maxLength", "pattern"); k != "" {
			return q, bad(k, "%s does not apply to an enum", k)
		}
		if len(in.Options) > 0 {
			return q, bad(given("enum", "oneOf", "enumNames"), "the question has options already: give its choices once, as options or in input")
		}
		if in.MultiSelect {
			return q, bad("type", "a string enum is single-select: for a multi-select, give type array with items")
		}
		opts, err := optionsOf(x.Enum, x.EnumNames, x.OneOf, "enum", "enumNames", "oneOf", bad)
		if err != nil {
			return q, err
		}
		q.Options = opts
		if x.Required {
			q.Input = &hitlv1.AnswerInput{Type: hitlv1.InputString, Required: true}
		}
		return q, nil
	}
	t, ok := inputTypes[x.Type]
	if !ok {
		return q, bad("type", "type %q has no hitl input type: give string, number, integer, boolean, date, dateTime, email, uri, or array (multi-select)", x.Type)
	}
	if x.Format != "" {
		if t, ok = formats[x.Format]; !ok {
			return q, bad("format", "format %q has no hitl input type: give email, uri, date or date-time, or leave it out", x.Format)
		}
	}
	ai := &hitlv1.AnswerInput{Type: t, MinLength: x.MinLength, MaxLength: x.MaxLength, Pattern: x.Pattern, Required: x.Required}
	var err error
	if ai.Minimum, err = boundOf(x.Minimum); err != nil {
		return q, bad("minimum", "minimum %v", err)
	}
	if ai.Maximum, err = boundOf(x.Maximum); err != nil {
		return q, bad("maximum", "maximum %v", err)
	}
	q.Input = ai
	return q, nil
}

// multiSelectOf maps an elicitation array schema (multi-select) onto q.
func multiSelectOf(q hitlv1.Question, in AskQuestion, x *Input, bad func(keyword, format string, args ...any) error) (hitlv1.Question, error) {
	it := x.Items
	if it == nil {
		return q, bad("items", "a multi-select (type array) needs items: {type: string, enum: [...]} or {anyOf: [{const, title}]}")
	}
	if it.Type != "" && it.Type != "string" {
		return q, bad("items.type", "the choices of a multi-select are strings, not %q", it.Type)
	}
	if len(in.Options) > 0 {
		return q, bad("items", "the question has options already: give its choices once, as options or in input")
	}
	opts, err := optionsOf(it.Enum, nil, it.AnyOf, "items.enum", "", "items.anyOf", bad)
	if err != nil {
		return q, err
	}
	required := x.Required
	if n := x.MinItems; n != nil {
		switch {
		case *n < 0 || *n > 1:
			return q, bad("minItems", "hitl can require one selection (minItems 1), not %d", *n)
		case *n == 1:
			required = true
		}
	}
	if n := x.MaxItems; n != nil && int(*n) < len(opts) {
		return q, bad("maxItems", "hitl does not cap the number of selections: maxItems %d is below the %d choices (for one choice, give type string with enum or oneOf)", *n, len(opts))
	}
	q.Options, q.MultiSelect = opts, true
	if required {
		q.Input = &hitlv1.AnswerInput{Type: hitlv1.InputString, Required: true}
	}
	return q, nil
}

// optionsOf makes a question's options from an enum's values (with their
// names) or from titled choices: the label is the name or title, or the
// value; the option's value is the value when it is not the label.
func optionsOf(values, names []string, titled []EnumOption, valuesKey, namesKey, titledKey string,
	bad func(keyword, format string, args ...any) error) ([]hitlv1.QuestionOption, error) {
	switch {
	case len(values) > 0 && len(titled) > 0:
		return nil, bad(valuesKey, "give the choices once: %s or %s, not both", valuesKey, titledKey)
	case len(names) > 0 && len(values) != len(names):
		return nil, bad(namesKey, "%s has %d names for %d values of %s: one name per value", namesKey, len(names), len(values), valuesKey)
	case len(values) == 0 && len(titled) == 0:
		return nil, bad(valuesKey, "the choices are empty: give at least one in %s or %s", valuesKey, titledKey)
	case len(values)+len(titled) > 32:
		return nil, bad(valuesKey, "a question has at most 32 options, not %d", len(values)+len(titled))
	}
	key := valuesKey
	if len(titled) > 0 {
		key = titledKey
		for _, c := range titled {
			values = append(values, c.Const)
			names = append(names, c.Title)
		}
	}
	opts := make([]hitlv1.QuestionOption, 0, len(values))
	labels, seen := map[string]bool{}, map[string]bool{}
	for j, v := range values {
		label := v
		if j < len(names) && names[j] != "" {
			label = names[j]
		}
		field := fmt.Sprintf("%s[%d]", key, j)
		switch {
		case v == "":
			return nil, bad(field, "a choice's value is empty")
		case utf8.RuneCountInString(label) > 200 || utf8.RuneCountInString(v) > 200:
			return nil, bad(field, "a choice's label and value are at most 200 characters")
		case labels[label]:
			return nil, bad(field, "two choices have the label %q: labels tell the choices apart", label)
		case seen[v]:
			return nil, bad(field, "two choices have the value %q", v)
		}
		labels[label], seen[v] = true, true
		o := hitlv1.QuestionOption{Label: label}
		if v != label {
			o.Value = v
		}
		opts = append(opts, o)
	}
	return opts, nil
}

// boundOf is a minimum or maximum in hitl's form: an integer when it is
// one (and fits), else the number's text (a fractional bound as a string).
// Whether the text is a number is checked by validation.ValidateInput.
func boundOf(b Bound) (*intstr.IntOrString, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	var text string
	switch v := v.(type) {
	case json.Number:
		text = v.String()
	case string:
		text = v
	default:
		return nil, fmt.Errorf("must be a number, or a number written as a string, not %s", b)
	}
	if n, err := strconv.ParseInt(text, 10, 32); err == nil && strings.TrimLeft(text, "-0123456789") == "" {
		x := intstr.FromInt32(int32(n))
		return &x, nil
	}
	x := intstr.FromString(text)
	return &x, nil
}

// approvalOf is a governed question's rule and votes as the tools return
// them; nil for a question no approval rule governs.
func approvalOf(a *agent.Approval) *Approval {
	if a == nil {
		return nil
	}
	out := &Approval{Approvals: a.Rule.Approvals, From: a.Rule.From, Veto: a.Rule.Veto, ExcludeRequester: a.Rule.ExcludeRequester,
		Tally: a.Tally, Votes: []Vote{}}
	for _, p := range a.Rule.Policies {
		out.Policies = append(out.Policies, p.Name)
	}
	for _, v := range a.Votes {
		vote := Vote{By: v.By.Username, Choice: string(v.Choice), Sets: v.Sets, Reply: v.Reply}
		if !v.At.IsZero() {
			vote.At = v.At.UTC().Format(time.RFC3339Nano)
		}
		out.Votes = append(out.Votes, vote)
	}
	return out
}

// withVotes adds to text, on a line of their own, a governed question's
// votes: "votes 2/2 (2 approvals needed): alice Approve, bob Approve".
func withVotes(text string, a *Approval) string {
	if a == nil {
		return text
	}
	votes := make([]string, 0, len(a.Votes))
	for _, v := range a.Votes {
		votes = append(votes, orUnknown(v.By)+" "+v.Choice)
	}
	if len(votes) == 0 {
		votes = append(votes, "none yet")
	}
	return text + fmt.Sprintf("\nvotes %s (%d %s needed): %s", a.Tally, a.Approvals, plural(int(a.Approvals), "approval", "approvals"), strings.Join(votes, ", "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// argumentsError names the tool's argument instead of the UserQuestion's
// field in a rule the SDK checked (spec.questions[0] is questions[0]).
func argumentsError(err error) error {
	var v *validation.Error
	if !errors.As(err, &v) {
		return err
	}
	local := *v
	local.Field = strings.TrimPrefix(local.Field, "spec.")
	return &local
}

func (s *Server) list(ctx context.Context, req *mcp.CallToolRequest, _ NoArgs) (ListResult, string, error) {
	_, a, err := s.caller(ctx, req)
	if err != nil {
		return ListResult{}, "", err
	}
	v, err := a.Projection(ctx)
	if err != nil {
		return ListResult{}, "", err
	}
	out := ListResult{Active: []ActiveQuestion{}, Settled: []SettledQuestion{}}
	var b strings.Builder
	fmt.Fprintf(&b, "%d active, %d settled question(s) of agent %s.\n", len(v.Active), len(v.Settled), a.Name())
	for _, q := range v.Active {
		a := ActiveQuestion{Question: q.Name, CallID: q.CallID, State: string(q.State), Questions: q.Questions, Approval: approvalOf(q.Approval)}
		out.Active = append(out.Active, a)
		fmt.Fprintf(&b, "- %s (callID %s): %s\n", q.Name, q.CallID, q.State)
		if a.Approval != nil {
			fmt.Fprintf(&b, "%s\n", indent(strings.TrimPrefix(withVotes("", a.Approval), "\n")))
		}
	}
	for _, q := range v.Settled {
		s := SettledQuestion{Question: q.Name, CallID: q.CallID, Answers: q.Answers, Late: q.Late, Approval: approvalOf(q.Approval)}
		if !q.At.IsZero() {
			s.At = q.At.UTC().Format(time.RFC3339Nano)
		}
		out.Settled = append(out.Settled, s)
		late := ""
		if q.Late {
			late = ", late"
		}
		fmt.Fprintf(&b, "- %s (callID %s): Settled%s\n%s\n", q.Name, q.CallID, late, indent(withVotes(renderAnswers(nil, q.Answers), s.Approval)))
	}
	return out, strings.TrimRight(b.String(), "\n"), nil
}

func (s *Server) queued(ctx context.Context, req *mcp.CallToolRequest, _ NoArgs) (QueuedResult, string, error) {
	c, _, err := s.caller(ctx, req)
	if err != nil {
		return QueuedResult{}, "", err
	}
	l := &hitlv1.UserQuestionList{}
	if err := c.Client.List(ctx, l, client.InNamespace(c.Namespace), client.MatchingLabels{hitlv1.AgentLabel: c.Agent}); err != nil {
		return QueuedResult{}, "", fmt.Errorf("listing the questions of agent %s in %s: %w", c.Agent, c.Namespace, err)
	}
	type item struct {
		r  QueuedReply
		at time.Time
	}
	var items []item
	for _, q := range l.Items {
		qr := q.Status.QueuedReply
		if qr == nil || q.Status.State.Terminal() {
			continue
		}
		r := QueuedReply{Question: q.Name, CallID: q.CallID(), Reply: qr.Name, Answers: qr.Answers}
		if qr.AnsweredBy != nil {
			r.AnsweredBy = qr.AnsweredBy.Username
		}
		if !qr.QueuedAt.IsZero() {
			r.QueuedAt = qr.QueuedAt.UTC().Format(time.RFC3339Nano)
		}
		items = append(items, item{r, qr.QueuedAt.Time})
	}
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].at.Equal(items[j].at) {
			return items[i].at.Before(items[j].at)
		}
		return items[i].r.Question < items[j].r.Question
	})
	out := QueuedResult{Replies: []QueuedReply{}}
	var b strings.Builder
	fmt.Fprintf(&b, "%d late reply(ies) waiting for admit_reply.\n", len(items))
	for _, it := range items {
		out.Replies = append(out.Replies, it.r)
		fmt.Fprintf(&b, "- reply %s on question %s (callID %s), from %s:\n%s\n", it.r.Reply, it.r.Question, it.r.CallID, orUnknown(it.r.AnsweredBy), indent(renderAnswers(nil, it.r.Answers)))
	}
	return out, strings.TrimRight(b.String(), "\n"), nil
}

func (s *Server) admit(ctx context.Context, req *mcp.CallToolRequest, in AdmitArgs) (AdmitOutput, string, error) {
	if in.Question == "" {
		return AdmitOutput{}, "", fmt.Errorf("%s: the question's name is required (question)", CodeBadArguments)
	}
	if in.Reply == "" {
		return AdmitOutput{}, "", fmt.Errorf("%s: the queued reply's name is required, see get_queued_replies (reply)", CodeBadArguments)
	}
	c, a, err := s.caller(ctx, req)
	if err != nil {
		return AdmitOutput{}, "", err
	}
	release, err := s.acquire(c.Key)
	if err != nil {
		return AdmitOutput{}, "", err
	}
	defer release()
	res, err := a.Admit(ctx, in.Question, in.Reply)
	// A sealed answer that does not open with this server's key is
	// admitted all the same: answersOf says so.
	if err != nil && (!errors.Is(err, sealed.ErrNotOpened) || res.Question == "") {
		return AdmitOutput{}, "", err
	}
	q, err := s.question(ctx, req, res.Question)
	if err != nil {
		return AdmitOutput{}, "", err
	}
	out := AdmitOutput{Question: res.Question, CallID: res.CallID, Answers: answersOf(q, s.opts.SealingKey, res.Answers), Approval: approvalOf(res.Approval)}
	return out, fmt.Sprintf("admitted late reply %s on question %s (callID %s):\n%s", in.Reply, res.Question, res.CallID,
		withVotes(renderTyped(q.Spec.Questions, out.Answers), out.Approval)), nil
}

func (s *Server) cancel(ctx context.Context, req *mcp.CallToolRequest, in CancelArgs) (CancelResult, string, error) {
	if in.Question == "" {
		return CancelResult{}, "", fmt.Errorf("%s: the question's name is required (question)", CodeBadArguments)
	}
	c, a, err := s.caller(ctx, req)
	if err != nil {
		return CancelResult{}, "", err
	}
	if err := a.Cancel(ctx, in.Question); err != nil {
		return CancelResult{}, "", err
	}
	// Cancel leaves a finished question as it is: say so.
	q := &hitlv1.UserQuestion{}
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: in.Question}, q); err != nil {
		return CancelResult{}, "", fmt.Errorf("reading question %s: %w", in.Question, err)
	}
	if !q.Spec.Cancelled {
		return CancelResult{}, "", &validation.Error{Code: hitlv1.CodeNotAnswerable, Field: "question",
			Rule: fmt.Sprintf("question %s is %s and can no longer be cancelled", in.Question, q.Status.State)}
	}
	return CancelResult{Question: in.Question, Cancelled: true}, fmt.Sprintf("question %s is cancelled", in.Question), nil
}

// renderAnswers is a batch as text, one line per question, with the
// question's text when questions are known. A sensitive answer shows only
// that it is sealed.
func renderAnswers(questions []hitlv1.Question, answers []hitlv1.AnswerItem) string {
	items := make([]Answer, 0, len(answers))
	for _, a := range answers {
		items = append(items, Answer{ID: a.ID, Selected: a.Selected, Custom: a.Custom, Sensitive: a.Sealed != "", Sealed: a.Sealed})
	}
	return render(questions, items, func(Answer) string { return "(sensitive answer, sealed)" })
}

// renderTyped is a batch with its typed values as text, one line per
// question: the labels selected (with their values when those differ), the
// free text (a number or boolean as it is, other text quoted), a sensitive
// answer's opened text, or why it did not open.
func renderTyped(questions []hitlv1.Question, answers []Answer) string {
	return render(questions, answers, func(Answer) string {
		return "(a sensitive answer sealed to another key: this server cannot open it; " +
			"a server that keeps its key across restarts runs with --sealing-key-file)"
	})
}

// render writes answers one per line; sealedText says an answer whose
// ciphertext is all there is.
func render(questions []hitlv1.Question, answers []Answer, sealedText func(Answer) string) string {
	texts := map[string]string{}
	for _, q := range questions {
		texts[q.ID] = q.Question
	}
	var b strings.Builder
	for i, a := range answers {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(a.ID)
		if t := texts[a.ID]; t != "" {
			fmt.Fprintf(&b, " (%s)", t)
		}
		b.WriteString(": ")
		var parts []string
		if len(a.Selected) > 0 {
			part := strings.Join(a.Selected, ", ")
			if values := selectedValues(a); values != "" {
				part += " (value " + values + ")"
			}
			parts = append(parts, part)
		}
		switch v := a.Value; {
		case a.Sealed != "":
			parts = append(parts, sealedText(a))
		case a.Custom == "":
		case len(a.Selected) == 0 && isNumberOrBool(v):
			parts = append(parts, fmt.Sprint(v))
		default:
			parts = append(parts, fmt.Sprintf("%q", a.Custom))
		}
		if len(parts) == 0 {
			parts = append(parts, "(skipped)")
		}
		b.WriteString(strings.Join(parts, "; "))
	}
	if b.Len() == 0 {
		return "(no answers)"
	}
	return b.String()
}

// selectedValues is the values of an answer's selected options, when they
// are not its labels; "" when they are.
func selectedValues(a Answer) string {
	var values []string
	switch v := a.Value.(type) {
	case string:
		values = []string{v}
	case []string:
		values = v
	}
	if len(values) == 0 || slices.Equal(values, a.Selected) {
		return ""
	}
	return strings.Join(values, ", ")
}

func isNumberOrBool(v any) bool {
	switch v.(type) {
	case json.Number, bool:
		return true
	}
	return false
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

func orUnknown(s string) string {
	if s == "" {
		return "an unknown user"
	}
	return s
}
