package mcp

import (
	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// The tools' arguments and results. Their JSON schemas are generated from
// these types (github.com/google/jsonschema-go): a field without omitempty
// is required, a "jsonschema" tag is the property's description.

// AskArgs are the arguments of ask_user_question.
type AskArgs struct {
	Questions []hitlv1.Question    `json:"questions" jsonschema:"the questions of the ask (1 to 16), as UserQuestion spec.questions: each has id, question, optional header, detail, options [{label, description}], multiSelect and intent"`
	Timeout   string               `json:"timeout,omitempty" jsonschema:"optional foreground window as a Go duration string (e.g. 30s, 2m, 1h30m): when it closes unanswered the call returns pending; absent = wait until answered"`
	CallID    string               `json:"callID,omitempty" jsonschema:"optional id of this tool call that UIs key the question's card by (default: the question's name)"`
	Approval  *hitlv1.ApprovalRule `json:"approval,omitempty" jsonschema:"optional approval rule of your own (spec.approval): {approvals: N distinct people must approve, from: [{name, groups, users, minimum}], veto, excludeRequester}; it may be stricter than the ApprovalPolicies that govern the question, never weaker (refused with POLICY_WEAKENED)"`
}

// AskResult is what ask_user_question and wait_for_answer return: the
// answers, pending, or still waiting.
type AskResult struct {
	Question string              `json:"question" jsonschema:"the UserQuestion's name"`
	CallID   string              `json:"callID" jsonschema:"the id UIs key the question's card by"`
	Waiting  bool                `json:"waiting,omitempty" jsonschema:"true when nobody answered during this call: the question stays open; call wait_for_answer with callID and question to wait on"`
	Pending  bool                `json:"pending,omitempty" jsonschema:"true when the window closed unanswered: the question stays answerable and a late reply may come (see get_queued_replies)"`
	Answers  []hitlv1.AnswerItem `json:"answers,omitempty" jsonschema:"the answer batch: one item {id, selected[], custom} per question; an item with neither selected nor custom is a skip"`
	Approval *Approval           `json:"approval,omitempty" jsonschema:"present when an approval rule governed the question: the rule and the votes that decided it (so far, when pending); the answers are the deciding vote's"`
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

// AdmitResult is what admit_reply returns.
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
