package mcp

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// The tools' arguments and results. Their JSON schemas are generated from
// these types (github.com/google/jsonschema-go): a field without omitempty
// is required, a "jsonschema" tag is the property's description.

// AskArgs are the arguments of ask_user_question.
type AskArgs struct {
	Questions []AskQuestion        `json:"questions" jsonschema:"the questions of the ask (1 to 16), as UserQuestion spec.questions: each has id, question, optional header, detail, options [{label, description, value}], multiSelect, intent, input (the answer's type: hitl's own form or an MCP elicitation primitive schema) and sensitive"`
	Timeout   string               `json:"timeout,omitempty" jsonschema:"optional foreground window as a Go duration string (e.g. 30s, 2m, 1h30m): when it closes unanswered the call returns pending; absent = wait until answered"`
	CallID    string               `json:"callID,omitempty" jsonschema:"optional id of this tool call that UIs key the question's card by (default: the question's name)"`
	Approval  *hitlv1.ApprovalRule `json:"approval,omitempty" jsonschema:"optional approval rule of your own (spec.approval): {approvals: N distinct people must approve, from: [{name, groups, users, minimum}], veto, excludeRequester}; it may be stricter than the ApprovalPolicies that govern the question, never weaker (refused with POLICY_WEAKENED)"`
}

// AskQuestion is one question of ask_user_question: a UserQuestion's
// spec.questions item, whose input may also be given as an MCP elicitation
// primitive schema (Input), mapped to hitl's own form (questionOf).
type AskQuestion struct {
	ID          string                  `json:"id" jsonschema:"stable id of the question, echoed in its answer"`
	Question    string                  `json:"question" jsonschema:"the question shown to the person"`
	Header      string                  `json:"header,omitempty" jsonschema:"optional short heading (at most 32 characters)"`
	Detail      string                  `json:"detail,omitempty" jsonschema:"optional supporting text (markdown)"`
	Options     []hitlv1.QuestionOption `json:"options,omitempty" jsonschema:"optional choices [{label, description, value}]; an answer selects labels, and its value is the option's value (or label)"`
	MultiSelect bool                    `json:"multiSelect,omitempty" jsonschema:"true: the person may select several options"`
	Intent      *hitlv1.QuestionIntent  `json:"intent,omitempty" jsonschema:"optional presentation intent (PlanReview or Approval)"`
	Input       *Input                  `json:"input,omitempty" jsonschema:"optional type of the answer, in hitl's own form ({type: string|number|integer|boolean|date|dateTime|email|uri, minimum, maximum, minLength, maxLength, pattern, required}) or as an MCP elicitation primitive schema (string with format email|uri|date|date-time, number, integer, boolean, enum: {type: string, enum, enumNames} or {type: string, oneOf: [{const, title}]}, multi-select: {type: array, items: {type: string, enum} or {anyOf: [{const, title}]}, minItems, maxItems}); the result then carries the answer's typed value"`
	Sensitive   bool                    `json:"sensitive,omitempty" jsonschema:"true: the answer is a secret (an API key, a one-time code), free text only: it is sealed to this server's key and only this tool's result carries it in the clear"`
}

// Input is a question's input as ask_user_question takes it: the union of
// hitl's own form (hitlv1.AnswerInput) and of the MCP elicitation
// primitive schemas (StringSchema, NumberSchema, BooleanSchema and the
// enum schemas), as one flat object, so that checking arguments against
// the tool's JSON schema stays cheap. Keywords that no form has are kept
// in unknown, and refused with BAD_INPUT naming them.
type Input struct {
	Type        string       `json:"type" jsonschema:"hitl: string, number, integer, boolean, date, dateTime, email or uri; MCP elicitation: string, number, integer, boolean, or array (multi-select)"`
	Title       string       `json:"title,omitempty" jsonschema:"elicitation: a short title, the question's header when it has none and the title fits 32 characters"`
	Description string       `json:"description,omitempty" jsonschema:"elicitation: help text, the question's detail when it has none"`
	Minimum     Bound        `json:"minimum,omitempty" jsonschema:"number or integer: the smallest value accepted (inclusive); a number, or a number written as a string"`
	Maximum     Bound        `json:"maximum,omitempty" jsonschema:"number or integer: the largest value accepted (inclusive); a number, or a number written as a string"`
	MinLength   *int32       `json:"minLength,omitempty" jsonschema:"string, email or uri: the fewest characters accepted"`
	MaxLength   *int32       `json:"maxLength,omitempty" jsonschema:"string, email or uri: the most characters accepted"`
	Pattern     string       `json:"pattern,omitempty" jsonschema:"string: a regular expression (RE2) the answer must match"`
	Format      string       `json:"format,omitempty" jsonschema:"elicitation string: email, uri, date or date-time"`
	Enum        []string     `json:"enum,omitempty" jsonschema:"elicitation string: the values to choose one of; they become the options"`
	EnumNames   []string     `json:"enumNames,omitempty" jsonschema:"elicitation string with enum: the options' labels, one per value"`
	OneOf       []EnumOption `json:"oneOf,omitempty" jsonschema:"elicitation string: the choices [{const, title}] to choose one of; they become the options (label title, value const)"`
	Items       *InputItems  `json:"items,omitempty" jsonschema:"elicitation array: the choices, {type: string, enum} or {anyOf: [{const, title}]}; they become the options of a multi-select question"`
	MinItems    *int32       `json:"minItems,omitempty" jsonschema:"elicitation array: 0, or 1 to forbid answering with no selection"`
	MaxItems    *int32       `json:"maxItems,omitempty" jsonschema:"elicitation array: at least the number of choices (hitl does not cap selections)"`
	Required    bool         `json:"required,omitempty" jsonschema:"true: the question may not be skipped"`

	// unknown are the keywords given that no form has; err is why the
	// input did not decode, raw what it decoded from.
	unknown []string
	err     error
	raw     json.RawMessage
}

// InputItems are the choices of an elicitation multi-select schema.
type InputItems struct {
	Type  string       `json:"type,omitempty" jsonschema:"string"`
	Enum  []string     `json:"enum,omitempty" jsonschema:"the values to choose from"`
	AnyOf []EnumOption `json:"anyOf,omitempty" jsonschema:"the choices [{const, title}] to choose from"`
}

// EnumOption is a titled choice of an elicitation enum schema.
type EnumOption struct {
	Const string `json:"const" jsonschema:"the choice's value"`
	Title string `json:"title,omitempty" jsonschema:"the choice's label; without it, the value"`
}

// Bound is a minimum or maximum as given: a JSON number, or a number
// written as a JSON string (hitl's form of a fractional bound). It is
// checked when the question is mapped (questionOf).
type Bound []byte

// UnmarshalJSON keeps the bound's JSON text.
func (b *Bound) UnmarshalJSON(data []byte) error {
	*b = append((*b)[:0], data...)
	return nil
}

// MarshalJSON writes the bound's JSON text.
func (b Bound) MarshalJSON() ([]byte, error) {
	if len(b) == 0 {
		return []byte("null"), nil
	}
	return b, nil
}

var (
	inputKeywords = keywords(Input{})
	itemsKeywords = keywords(InputItems{})
)

// UnmarshalJSON decodes an input strictly, on its own, and never fails
// the call's decoding: keywords it does not know (in the input and in its
// items) are kept for a BAD_INPUT naming them (unknown), and a value of
// the wrong JSON type for a BAD_ARGUMENTS naming it (err, raw), both made
// by questionOf, which knows the question (encoding/json does not say
// where in the arguments a custom decoder's error is).
func (in *Input) UnmarshalJSON(data []byte) error {
	*in = Input{raw: append(json.RawMessage(nil), data...)}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		in.err = err
		return nil
	}
	unknown := strip(obj, inputKeywords, "")
	var items map[string]json.RawMessage
	if raw, ok := obj["items"]; ok && json.Unmarshal(raw, &items) == nil && items != nil {
		if u := strip(items, itemsKeywords, "items."); len(u) > 0 {
			unknown = append(unknown, u...)
			obj["items"], _ = json.Marshal(items)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		data, _ = json.Marshal(obj)
	}
	type plain Input
	var p plain
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		in.err, in.raw = err, data
		return nil
	}
	*in = Input(p)
	in.unknown = unknown
	return nil
}

// strip deletes from obj the keys that are not in known, and returns them
// with prefix.
func strip(obj map[string]json.RawMessage, known map[string]bool, prefix string) []string {
	var out []string
	for k := range obj {
		if !known[k] {
			out = append(out, prefix+k)
			delete(obj, k)
		}
	}
	return out
}

// keywords are the JSON names of a struct's exported fields.
func keywords(v any) map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(v)
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out[name] = true
	}
	return out
}

// AskResult is the answers, pending, or still waiting, as the waits
// build it. ask_user_question and wait_for_answer return it as AskOutput:
// the same fields, with each answer's typed value.
type AskResult struct {
	Question string              `json:"question" jsonschema:"the UserQuestion's name"`
	CallID   string              `json:"callID" jsonschema:"the id UIs key the question's card by"`
	Waiting  bool                `json:"waiting,omitempty" jsonschema:"true when nobody answered during this call: the question stays open; call wait_for_answer with callID and question to wait on"`
	Pending  bool                `json:"pending,omitempty" jsonschema:"true when the window closed unanswered: the question stays answerable and a late reply may come (see get_queued_replies)"`
	Answers  []hitlv1.AnswerItem `json:"answers,omitempty" jsonschema:"the answer batch: one item {id, selected[], custom} per question; an item with neither selected nor custom is a skip"`
	Approval *Approval           `json:"approval,omitempty" jsonschema:"present when an approval rule governed the question: the rule and the votes that decided it (so far, when pending); the answers are the deciding vote's"`
}

// AskOutput is what ask_user_question and wait_for_answer return: the
// answers, each with its typed value, pending, or still waiting. Its JSON
// is AskResult's with a value (and sensitive) in each answer, so a reader
// that decodes it as AskResult reads what it always did.
type AskOutput struct {
	Question string    `json:"question" jsonschema:"the UserQuestion's name"`
	CallID   string    `json:"callID" jsonschema:"the id UIs key the question's card by"`
	Waiting  bool      `json:"waiting,omitempty" jsonschema:"true when nobody answered during this call: the question stays open; call wait_for_answer with callID and question to wait on"`
	Pending  bool      `json:"pending,omitempty" jsonschema:"true when the window closed unanswered: the question stays answerable and a late reply may come (see get_queued_replies)"`
	Answers  []Answer  `json:"answers,omitempty" jsonschema:"the answer batch: one item {id, selected[], custom, value} per question; an item with neither selected nor custom is a skip, and has no value"`
	Approval *Approval `json:"approval,omitempty" jsonschema:"present when an approval rule governed the question: the rule and the votes that decided it (so far, when pending); the answers are the deciding vote's"`
}

// Answer is the answer to one question, as the tools return it: the
// answer item's selected labels and custom text, and its typed value.
type Answer struct {
	ID        string   `json:"id" jsonschema:"the answered question's id"`
	Selected  []string `json:"selected,omitempty" jsonschema:"the labels of the options selected"`
	Custom    string   `json:"custom,omitempty" jsonschema:"the free text given (a sensitive answer's opened text)"`
	Value     any      `json:"value,omitempty" jsonschema:"the answer's typed value (absent on a skip): a number for a number or integer input, true or false for a boolean, a string for a string, date, dateTime, email or uri input or plain free text, the selected option's value (its value, or its label) for a single-select question, and an array of them for a multiSelect one"`
	Sensitive bool     `json:"sensitive,omitempty" jsonschema:"true for the answer to a sensitive question: keep custom and value out of logs and of anything you write"`
	Sealed    string   `json:"sealed,omitempty" jsonschema:"a sensitive answer that does not open with this server's key (sealed to the key of another process, e.g. before a restart): its ciphertext"`
}

// WaitArgs are the arguments of wait_for_answer.
type WaitArgs struct {
	CallID   string `json:"callID" jsonschema:"the callID that ask_user_question returned"`
	Question string `json:"question,omitempty" jsonschema:"the question's name that ask_user_question returned; without it, your newest question with callID"`
}

// Approval is how a governed question settles: its rule and its votes.
type Approval struct {
	Approvals        int32                `json:"approvals" jsonschema:"how many distinct people had to approve"`
	From             []hitlv1.ApproverSet `json:"from,omitempty" jsonschema:"sets of approvers {name, groups, users, minimum}, each of which had to give at least minimum of the approvals"`
	Veto             bool                 `json:"veto,omitempty" jsonschema:"true: the first rejecting vote settles the question as rejected"`
	ExcludeRequester bool                 `json:"excludeRequester,omitempty" jsonschema:"true: the identity that asked may not vote"`
	Policies         []string             `json:"policies,omitempty" jsonschema:"the ApprovalPolicies the rule came from"`
	Tally            string               `json:"tally,omitempty" jsonschema:"approving people over approvals required, e.g. 2/2, with (n no) when some rejected"`
	Votes            []Vote               `json:"votes" jsonschema:"the votes, in the order they were counted: on a settled question the ones that decided it, the deciding one last"`
}

// Vote is one person's vote on a governed question.
type Vote struct {
	By     string   `json:"by" jsonschema:"who voted, as the API server authenticated them"`
	Choice string   `json:"choice" jsonschema:"Approve or Reject"`
	Sets   []string `json:"sets,omitempty" jsonschema:"the rule's sets of approvers (from[].name) the approval counts for"`
	Reply  string   `json:"reply" jsonschema:"the QuestionReply that carried the vote"`
	At     string   `json:"at,omitempty" jsonschema:"when the vote was counted (RFC 3339)"`
}

// NoArgs are the arguments of a tool that takes none.
type NoArgs struct{}

// ListResult is what list_questions returns.
type ListResult struct {
	Active  []ActiveQuestion  `json:"active" jsonschema:"the questions that can still take an answer (Open or Continued), in ask order"`
	Settled []SettledQuestion `json:"settled" jsonschema:"the settled questions with their answers, in settlement order"`
}

// ActiveQuestion is an Open or Continued question.
type ActiveQuestion struct {
	Question  string            `json:"question" jsonschema:"the UserQuestion's name"`
	CallID    string            `json:"callID"`
	State     string            `json:"state" jsonschema:"Open (the asking call may still return the answer) or Continued (an answer can only come as a late reply)"`
	Questions []hitlv1.Question `json:"questions"`
	Approval  *Approval         `json:"approval,omitempty" jsonschema:"present when an approval rule governs the question: the rule and the votes counted so far"`
}

// SettledQuestion is a settled question and its answers.
type SettledQuestion struct {
	Question string              `json:"question" jsonschema:"the UserQuestion's name"`
	CallID   string              `json:"callID"`
	Answers  []hitlv1.AnswerItem `json:"answers"`
	Late     bool                `json:"late,omitempty" jsonschema:"true when the answers came as an admitted late reply"`
	At       string              `json:"at,omitempty" jsonschema:"when the question settled (RFC 3339)"`
	Approval *Approval           `json:"approval,omitempty" jsonschema:"present when an approval rule governed the question: the rule and the votes that decided it"`
}

// QueuedResult is what get_queued_replies returns.
type QueuedResult struct {
	Replies []QueuedReply `json:"replies" jsonschema:"late replies waiting for admit_reply, oldest first"`
}

// QueuedReply is a late reply queued on a Continued question.
type QueuedReply struct {
	Question   string              `json:"question" jsonschema:"the UserQuestion's name"`
	CallID     string              `json:"callID"`
	Reply      string              `json:"reply" jsonschema:"the QuestionReply's name, which admit_reply takes"`
	Answers    []hitlv1.AnswerItem `json:"answers"`
	AnsweredBy string              `json:"answeredBy,omitempty" jsonschema:"who sent the reply, as the API server authenticated them"`
	QueuedAt   string              `json:"queuedAt,omitempty" jsonschema:"when the reply was queued (RFC 3339)"`
}

// AdmitArgs are the arguments of admit_reply.
type AdmitArgs struct {
	Question string `json:"question" jsonschema:"the UserQuestion's name"`
	Reply    string `json:"reply" jsonschema:"the queued QuestionReply's name, from get_queued_replies"`
}

// AdmitOutput is what admit_reply returns: AdmitResult with each answer's
// typed value.
type AdmitOutput struct {
	Question string    `json:"question"`
	CallID   string    `json:"callID"`
	Answers  []Answer  `json:"answers" jsonschema:"the admitted batch, to be handled as a new turn: one item {id, selected[], custom, value} per question"`
	Approval *Approval `json:"approval,omitempty" jsonschema:"present when an approval rule governed the question: the rule and the votes that decided it, the admitted reply's last"`
}

// AdmitResult is admit_reply's result without typed values.
type AdmitResult struct {
	Question string              `json:"question"`
	CallID   string              `json:"callID"`
	Answers  []hitlv1.AnswerItem `json:"answers" jsonschema:"the admitted batch, to be handled as a new turn"`
	Approval *Approval           `json:"approval,omitempty" jsonschema:"present when an approval rule governed the question: the rule and the votes that decided it, the admitted reply's last"`
}

// CancelArgs are the arguments of cancel_question.
type CancelArgs struct {
	Question string `json:"question" jsonschema:"the UserQuestion's name"`
}

// CancelResult is what cancel_question returns.
type CancelResult struct {
	Question  string `json:"question"`
	Cancelled bool   `json:"cancelled" jsonschema:"true: the question no longer takes answers"`
}
