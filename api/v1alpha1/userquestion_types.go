package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Origin says who inside the agent asks.
// +kubebuilder:validation:Enum=Root;Subagent
type Origin string

const (
	// OriginRoot is the agent's own root session; only it may ask a person.
	OriginRoot Origin = "Root"
	// OriginSubagent is a delegated subagent; its asks are refused with DELEGATED_CALLER.
	OriginSubagent Origin = "Subagent"
)

// IntentType names a presentation intent.
// +kubebuilder:validation:Enum=PlanReview;Approval
type IntentType string

const (
	// IntentPlanReview presents a plan (in detail) for approval or decline.
	IntentPlanReview IntentType = "PlanReview"
	// IntentApproval presents a blocking permission decision with fixed actions.
	IntentApproval IntentType = "Approval"
)

// QuestionState is where a question is in its life.
// +kubebuilder:validation:Enum=Open;Continued;Settled;Cancelled
type QuestionState string

const (
	// StateOpen: the agent's call is still waiting for the answer.
	StateOpen QuestionState = "Open"
	// StateContinued: the foreground window closed unanswered; the agent got
	// "pending" and works on, and the question stays answerable.
	StateContinued QuestionState = "Continued"
	// StateSettled: an answer batch is recorded in status.answers. Terminal.
	StateSettled QuestionState = "Settled"
	// StateCancelled: the agent aborted the ask. Terminal.
	StateCancelled QuestionState = "Cancelled"
)

// Terminal reports whether nothing can move a question out of the state.
func (s QuestionState) Terminal() bool { return s == StateSettled || s == StateCancelled }

// QuestionOption is one answer a person may select.
type QuestionOption struct {
	// label is the text the person sees and the value an answer selects.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Label string `json:"label"`

	// description is optional help text that capable UIs show beside the label.
	// +optional
	// +kubebuilder:validation:MaxLength=1000
	Description string `json:"description,omitempty"`

	// value is what the option stands for, when it is not its label (an
	// MCP elicitation enum's const, say): answers still select labels, and
	// readers map them to values (Question.ValuesOf). Empty, the label is
	// the value.
	// +optional
	// +kubebuilder:validation:MaxLength=200
	Value string `json:"value,omitempty"`
}

// InputType is the type of a free-text answer. Values are always stored
// as the text given; the type says which texts are valid and how readers
// parse them (AnswerItem.Int, .Float, .Bool, .Time).
// +kubebuilder:validation:Enum=string;number;integer;boolean;date;dateTime;email;uri
type InputType string

const (
	// InputString is any text (the default of a question without input).
	InputString InputType = "string"
	// InputNumber is a decimal number in JSON's syntax ("-1.5", "2e3").
	InputNumber InputType = "number"
	// InputInteger is a whole number in decimal digits ("42", "-7").
	InputInteger InputType = "integer"
	// InputBoolean is "true" or "false".
	InputBoolean InputType = "boolean"
	// InputDate is an RFC 3339 full date ("2026-12-24").
	InputDate InputType = "date"
	// InputDateTime is an RFC 3339 date and time with an offset
	// ("2026-12-24T18:00:00+01:00").
	InputDateTime InputType = "dateTime"
	// InputEmail is one email address ("ops@example.com"), no display name.
	InputEmail InputType = "email"
	// InputURI is an absolute URI ("https://tickets.example.com/T-1").
	InputURI InputType = "uri"
)

// AnswerInput describes the free-text answer a question expects, as an MCP
// elicitation primitive schema does. A value that does not fit is refused
// with BAD_ANSWER naming the question id and the rule.
//
// +kubebuilder:validation:XValidation:rule="(!has(self.minimum) && !has(self.maximum)) || self.type == 'number' || self.type == 'integer'",message="BAD_INPUT: minimum and maximum apply to a number or integer input"
// +kubebuilder:validation:XValidation:rule="(!has(self.minLength) && !has(self.maxLength)) || self.type == 'string' || self.type == 'email' || self.type == 'uri'",message="BAD_INPUT: minLength and maxLength apply to a string, email or uri input"
// +kubebuilder:validation:XValidation:rule="!has(self.pattern) || self.type == 'string'",message="BAD_INPUT: pattern applies to a string input"
// +kubebuilder:validation:XValidation:rule="!has(self.minLength) || !has(self.maxLength) || self.minLength <= self.maxLength",message="BAD_INPUT: minLength is above maxLength"
type AnswerInput struct {
	// type is the answer's type: string, number, integer, boolean, date,
	// dateTime, email or uri.
	// +required
	Type InputType `json:"type"`

	// minimum is the smallest number or integer accepted (inclusive): an
	// integer, or a decimal written as a string ("0.5").
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="type(self) == int || self.matches('^-?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$')",message="BAD_INPUT: minimum must be a number"
	Minimum *intstr.IntOrString `json:"minimum,omitempty"`

	// maximum is the largest number or integer accepted (inclusive): an
	// integer, or a decimal written as a string ("99.5").
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="type(self) == int || self.matches('^-?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$')",message="BAD_INPUT: maximum must be a number"
	Maximum *intstr.IntOrString `json:"maximum,omitempty"`

	// minLength is the fewest characters (Unicode code points) accepted.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8192
	MinLength *int32 `json:"minLength,omitempty"`

	// maxLength is the most characters (Unicode code points) accepted.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8192
	MaxLength *int32 `json:"maxLength,omitempty"`

	// pattern is a regular expression (RE2 syntax, as Go's regexp) a string
	// answer must match somewhere, as JSON Schema's pattern; anchor it with
	// ^ and $ to match the whole answer.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="''.matches(self) in [true, false]",message="BAD_INPUT: pattern is not a regular expression"
	Pattern string `json:"pattern,omitempty"`

	// required forbids skipping the question: a batch that skips it is
	// refused with BAD_ANSWER.
	// +optional
	Required bool `json:"required,omitempty"`
}

// PlanReviewIntent marks a question as the review of a plan.
type PlanReviewIntent struct {
	// approve is the option label that approves the plan; every other option
	// declines it. It must name one of the question's options.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Approve string `json:"approve"`

	// callID is the agent's tool call whose arguments hold the reviewed plan.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	CallID string `json:"callID,omitempty"`
}

// ApprovalSubject tells a person what is asking for permission. It is for
// recognition only and never an identity.
type ApprovalSubject struct {
	// name is the subject's human-readable name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Name string `json:"name"`

	// icon is an optional icon. The web inbox shows it only when it is an
	// inline raster image (a base64 data: URI of PNG, GIF, JPEG or WebP)
	// and never loads a remote URL.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Icon string `json:"icon,omitempty"`
}

// LocalizedText holds one text per locale, keyed by locale; "en" is required.
// Each text is at most 4,096 characters and each locale tag 35.
// +kubebuilder:validation:MaxProperties=32
// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 35 && size(self[k]) <= 4096)",message="BAD_INTENT: a localized text is at most 4096 characters, under a locale tag of at most 35"
// +kubebuilder:validation:XValidation:rule="'en' in self && size(self['en']) > 0",message="BAD_INTENT: localized text needs an en entry"
type LocalizedText map[string]string

// ApprovalDisplay holds localized texts for an approval card.
type ApprovalDisplay struct {
	// question is the localized question text.
	// +required
	Question LocalizedText `json:"question"`

	// detail is the localized supporting text.
	// +optional
	Detail LocalizedText `json:"detail,omitempty"`

	// approve is the localized wording of the limited grant.
	// +optional
	Approve LocalizedText `json:"approve,omitempty"`
}

// ApprovalIntent marks a question as a blocking permission decision.
type ApprovalIntent struct {
	// approve is the option label that grants the requested scope.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Approve string `json:"approve"`

	// reject is the option label that refuses it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Reject string `json:"reject"`

	// always is the optional label of a persistent grant, offered only when
	// the agent supports one.
	// +optional
	// +kubebuilder:validation:MaxLength=200
	Always string `json:"always,omitempty"`

	// subject describes, for human recognition only, what asks for permission.
	// +optional
	Subject *ApprovalSubject `json:"subject,omitempty"`

	// display holds localized texts for the approval card.
	// +optional
	Display *ApprovalDisplay `json:"display,omitempty"`
}

// QuestionIntent tells capable UIs how to present a question. It never
// changes how the answer is encoded; a UI that does not know the type shows
// the generic option list.
type QuestionIntent struct {
	// type names the intent: PlanReview or Approval.
	// +required
	Type IntentType `json:"type"`

	// planReview holds the PlanReview settings; required when type is PlanReview.
	// +optional
	PlanReview *PlanReviewIntent `json:"planReview,omitempty"`

	// approval holds the Approval settings; required when type is Approval.
	// +optional
	Approval *ApprovalIntent `json:"approval,omitempty"`
}

// Question is one question of an ask.
//
// +kubebuilder:validation:XValidation:rule="!has(self.intent) || self.intent.type != 'PlanReview' || (has(self.intent.planReview) && !has(self.intent.approval))",messageExpression="'BAD_INTENT: question ' + self.id + ': a PlanReview intent takes intent.planReview and no intent.approval'"
// +kubebuilder:validation:XValidation:rule="!has(self.intent) || self.intent.type != 'PlanReview' || (has(self.detail) && size(self.detail) > 0)",messageExpression="'BAD_INTENT: question ' + self.id + ': a PlanReview intent needs the plan in detail'"
// +kubebuilder:validation:XValidation:rule="!has(self.intent) || !has(self.intent.planReview) || (has(self.options) && self.options.exists(o, o.label == self.intent.planReview.approve))",messageExpression="'BAD_INTENT: question ' + self.id + ': intent.planReview.approve must name one of the options'"
// +kubebuilder:validation:XValidation:rule="!has(self.intent) || self.intent.type != 'Approval' || (has(self.intent.approval) && !has(self.intent.planReview))",messageExpression="'BAD_INTENT: question ' + self.id + ': an Approval intent takes intent.approval and no intent.planReview'"
// +kubebuilder:validation:XValidation:rule="!has(self.intent) || !has(self.intent.approval) || !has(self.multiSelect) || !self.multiSelect",messageExpression="'BAD_INTENT: question ' + self.id + ': an Approval question cannot be multiSelect'"
// +kubebuilder:validation:XValidation:rule="!has(self.intent) || !has(self.intent.approval) || (self.intent.approval.approve != self.intent.approval.reject && (!has(self.intent.approval.always) || (self.intent.approval.always != self.intent.approval.approve && self.intent.approval.always != self.intent.approval.reject)))",messageExpression="'BAD_INTENT: question ' + self.id + ': approval approve, reject and always must be distinct labels'"
// +kubebuilder:validation:XValidation:rule="!has(self.sensitive) || !self.sensitive || ((!has(self.options) || size(self.options) == 0) && !has(self.intent))",messageExpression="'BAD_INPUT: question ' + self.id + ': a sensitive question takes free text only: no options and no intent'"
// +kubebuilder:validation:XValidation:rule="!has(self.input) || !has(self.intent) || self.intent.type != 'Approval'",messageExpression="'BAD_INPUT: question ' + self.id + ': an Approval question takes no free text, so no input'"
// +kubebuilder:validation:XValidation:rule="!has(self.intent) || !has(self.intent.approval) || (has(self.options) && size(self.options) == (has(self.intent.approval.always) ? 3 : 2) && self.options.all(o, o.label == self.intent.approval.approve || o.label == self.intent.approval.reject || (has(self.intent.approval.always) && o.label == self.intent.approval.always)))",messageExpression="'BAD_INTENT: question ' + self.id + ': approval approve, reject and always must be exactly the option labels'"
type Question struct {
	// id is the stable id of the question, echoed in each answer so a batch
	// can be routed.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`
	ID string `json:"id"`

	// question is the text of the question shown to the person.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2000
	Question string `json:"question"`

	// detail is supporting text shown with the question and kept out of the
	// option labels; for a PlanReview intent it holds the plan (markdown).
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Detail string `json:"detail,omitempty"`

	// header is an optional short heading or group label.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Header string `json:"header,omitempty"`

	// options are the choices a UI may offer as a menu. A question without
	// options takes free text (custom) or a skip.
	// +optional
	// +listType=map
	// +listMapKey=label
	// +kubebuilder:validation:MaxItems=32
	Options []QuestionOption `json:"options,omitempty"`

	// multiSelect lets the person select more than one option; default single-select.
	// +optional
	MultiSelect bool `json:"multiSelect,omitempty"`

	// intent is an optional presentation intent for capable UIs.
	// +optional
	Intent *QuestionIntent `json:"intent,omitempty"`

	// input describes the free-text answer the question expects (its
	// custom text): a type, bounds, a pattern, and whether it may be
	// skipped. Absent, any text up to 8,192 characters fits.
	// +optional
	Input *AnswerInput `json:"input,omitempty"`

	// sensitive marks an answer that must never be stored in the clear (an
	// API key, a one-time code): the answerer seals it to spec.sealingKey,
	// so the reply, the question's status, Events, logs, metrics and
	// notifications hold only ciphertext only the asking agent can open. A
	// sensitive question takes free text only (no options, no intent).
	// +optional
	Sensitive bool `json:"sensitive,omitempty"`
}

// UserQuestionSpec is the agent's ask. It is immutable after creation except
// for the two fields the agent writes later: cancelled and admittedReply.
//
// +kubebuilder:validation:XValidation:rule="has(self.questions) && size(self.questions) > 0",message="EMPTY_QUESTIONS: spec.questions must hold at least one question",fieldPath=".questions"
// +kubebuilder:validation:XValidation:rule="!has(self.origin) || self.origin != 'Subagent'",message="DELEGATED_CALLER: a subagent (spec.origin Subagent) may not ask a person directly",fieldPath=".origin"
// +kubebuilder:validation:XValidation:rule="!has(self.questions) || !self.questions.exists(q, has(q.intent) && q.intent.type == 'Approval') || (size(self.questions) == 1 && !has(self.timeout))",message="BAD_INTENT: an Approval ask has exactly one question and no spec.timeout",fieldPath=".questions"
// +kubebuilder:validation:XValidation:rule="!has(self.questions) || !self.questions.exists(q, has(q.sensitive) && q.sensitive) || has(self.sealingKey)",message="BAD_INPUT: a sensitive question needs spec.sealingKey, the asking agent's public key its answer is sealed to",fieldPath=".sealingKey"
// +kubebuilder:validation:XValidation:rule="has(self.sealingKey) == has(oldSelf.sealingKey)",message="spec.sealingKey is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.timeout) == has(oldSelf.timeout) && has(self.callID) == has(oldSelf.callID) && has(self.ttlSecondsAfterFinished) == has(oldSelf.ttlSecondsAfterFinished) && has(self.askedAt) == has(oldSelf.askedAt) && has(self.approval) == has(oldSelf.approval)",message="spec.timeout, spec.callID, spec.askedAt, spec.ttlSecondsAfterFinished and spec.approval are immutable"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.askedBy) ? (has(self.askedBy) && self.askedBy == oldSelf.askedBy) : !has(self.askedBy)",message="NOT_OWNER: spec.askedBy is stamped at admission and immutable",fieldPath=".askedBy"
// +kubebuilder:validation:XValidation:rule="!has(self.questions) || self.questions.map(q, size(q.question) + (has(q.detail) ? size(q.detail) : 0) + (has(q.header) ? size(q.header) : 0)).sum() <= 65536",message="BAD_INTENT: the questions' text (question, detail and header, all questions together) is at most 65536 characters",fieldPath=".questions"
// +kubebuilder:validation:XValidation:rule="!has(self.questions) || self.questions.map(q, has(q.options) ? q.options.map(o, size(o.label) + (has(o.description) ? size(o.description) : 0)).sum() : 0).sum() <= 65536",message="BAD_INTENT: the options' text (label and description, all questions together) is at most 65536 characters",fieldPath=".questions"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.cancelled) || !oldSelf.cancelled || (has(self.cancelled) && self.cancelled)",message="spec.cancelled may only go from false to true",fieldPath=".cancelled"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.admittedReply) || (has(self.admittedReply) && self.admittedReply == oldSelf.admittedReply)",message="spec.admittedReply may be set once and never changed",fieldPath=".admittedReply"
type UserQuestionSpec struct {
	// agent is the asking agent (a DNS label). The hitl.dev/agent label
	// carries the same value.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.agent is immutable"
	Agent string `json:"agent"`

	// origin says who inside the agent asks: Root (default) or Subagent. A
	// subagent may not ask a person directly (DELEGATED_CALLER).
	// +optional
	// +kubebuilder:default=Root
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.origin is immutable"
	Origin Origin `json:"origin,omitempty"`

	// callID is the agent's tool-call id that UIs key their card by; when
	// empty, readers use the object's name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.callID is immutable"
	CallID string `json:"callID,omitempty"`

	// questions are the questions of the ask (1 to 16), keyed by id.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.questions is immutable"
	Questions []Question `json:"questions,omitempty"`

	// sealingKey is the asking agent's public key (an ECDH P-256 point,
	// uncompressed, in unpadded base64url) that sensitive answers are
	// sealed to. Required when a question is sensitive; the agent keeps
	// the private key, so nobody else, the manager included, can read them.
	// +optional
	// +kubebuilder:validation:MaxLength=87
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]{87}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.sealingKey is immutable"
	SealingKey string `json:"sealingKey,omitempty"`

	// timeout is the foreground window, written as a Go duration with the
	// units h, m, s and ms, e.g. "90s", "1m30s", "1.5s" or "250ms". Absent,
	// the question is blocking: it stays Open until answered or cancelled.
	// It must be positive, a whole number of milliseconds and at most the
	// controller's maximum (BAD_TIMEOUT).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]{1,5})?h)?([0-9]+([.][0-9]{1,4})?m)?([0-9]+([.][0-9]{1,3})?s)?([0-9]+ms)?$') && size(self) > 0 && duration(self) > duration('0s')",message="BAD_TIMEOUT: spec.timeout must be a positive duration of whole milliseconds, like 90s, 1m30s or 250ms"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.timeout is immutable"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// askedAt is when the agent sent the ask, to the microsecond, as its
	// client recorded it. creationTimestamp has whole seconds only, so a
	// window measured from it could close up to a second early; the
	// controller measures the window from askedAt instead when askedAt lies
	// within [creationTimestamp, creationTimestamp + 1s), and from
	// creationTimestamp otherwise. The SDKs and kubectl hitl set it; the
	// admission webhook stamps the time it saw the request when it is absent.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.askedAt is immutable"
	AskedAt *metav1.MicroTime `json:"askedAt,omitempty"`

	// ttlSecondsAfterFinished deletes the question this many seconds after it
	// became Settled or Cancelled; the replies and claims it owns go with it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.ttlSecondsAfterFinished is immutable"
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// cancelled, set by the agent, aborts the ask. It may only go from false to true.
	// +optional
	Cancelled bool `json:"cancelled,omitempty"`

	// admittedReply, set once by the agent, names the queued reply it takes
	// as a new turn. It must name status.queuedReply.name when it is set.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	AdmittedReply string `json:"admittedReply,omitempty"`

	// askedBy is the authenticated user who created the question, stamped
	// at admission from the request (whatever the client sent), and
	// immutable. Only this identity (or the manager, or the garbage
	// collector) may change or delete the question, and it never answers
	// its own Approval or PlanReview question.
	// +optional
	AskedBy *UserInfo `json:"askedBy,omitempty"`

	// approval is the agent's own approval rule: N distinct approvers,
	// sets of approvers with minimums, a veto. It may only be as strict as
	// the ApprovalPolicies that govern the question or stricter: one that
	// asks for less than a policy is refused, POLICY_WEAKENED. Immutable.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.approval is immutable"
	Approval *ApprovalRule `json:"approval,omitempty"`
}

// UserInfo is the authenticated user who answered, as the API server saw it.
type UserInfo struct {
	// username is the user's name, e.g. "alice" or "system:serviceaccount:ns:name".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Username string `json:"username,omitempty"`

	// uid is the user's uid, when the authenticator gives one.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	UID string `json:"uid,omitempty"`

	// groups are the user's groups.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	Groups []string `json:"groups,omitempty"`
}

// ClaimHolder is one live claim on a question.
type ClaimHolder struct {
	// name is the name of the QuestionClaim.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// holder is the username of the answerer holding the claim, as stamped
	// at admission (the claim's spec.holder.username).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Holder string `json:"holder,omitempty"`
}

// QueuedReply is a late reply waiting for the agent to admit it.
type QueuedReply struct {
	// name is the QuestionReply's name; the agent admits it by writing this
	// name to spec.admittedReply.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// uid is the QuestionReply's UID: a reply re-created under the same
	// name is another reply.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=128
	UID types.UID `json:"uid,omitempty"`

	// answers is the queued batch.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=16
	Answers []AnswerItem `json:"answers,omitempty"`

	// answeredBy is who sent the reply.
	// +optional
	AnsweredBy *UserInfo `json:"answeredBy,omitempty"`

	// queuedAt is when the controller queued the reply, to the microsecond.
	// +required
	QueuedAt metav1.MicroTime `json:"queuedAt"`

	// source is where the reply came from when a GitOps engine applied it
	// (the reply's status.source).
	// +optional
	Source *ReplySource `json:"source,omitempty"`
}

// Settlement records how a question was settled.
type Settlement struct {
	// reply is the name of the QuestionReply that settled the question.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Reply string `json:"reply"`

	// replyUID is that QuestionReply's UID.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=128
	ReplyUID types.UID `json:"replyUID,omitempty"`

	// answeredBy is who sent that reply.
	// +optional
	AnsweredBy *UserInfo `json:"answeredBy,omitempty"`

	// late is true when the reply arrived after the window closed and the
	// agent admitted it; false when it arrived inside the window.
	// +optional
	Late bool `json:"late,omitempty"`

	// at is when the question was settled, to the microsecond, so that
	// settlement order is exact.
	// +required
	At metav1.MicroTime `json:"at"`

	// votes are, on a governed question, the votes that counted toward the
	// decision, the deciding one last.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Votes []Vote `json:"votes,omitempty"`

	// source is where the settling reply came from when a GitOps engine
	// applied it: the engine's object, the revision and whether the
	// commit's signature was verified (the reply's status.source).
	// +optional
	Source *ReplySource `json:"source,omitempty"`
}

// UserQuestionStatus is what the controller observed and decided.
type UserQuestionStatus struct {
	// state is Open, Continued, Settled or Cancelled.
	// +optional
	State QuestionState `json:"state,omitempty"`

	// questionCount is the number of questions in the ask.
	// +optional
	QuestionCount int32 `json:"questionCount,omitempty"`

	// deadline is the end of the foreground window of a timed question:
	// spec.askedAt (or creationTimestamp, see spec.askedAt) + spec.timeout,
	// computed once and never moved.
	// +optional
	Deadline *metav1.MicroTime `json:"deadline,omitempty"`

	// continuedAt is when the window closed unanswered, to the microsecond.
	// +optional
	ContinuedAt *metav1.MicroTime `json:"continuedAt,omitempty"`

	// claims lists the live claims on the question, the first 64 by
	// name; claimCount says how many the controller counts (at most 64).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Claims []ClaimHolder `json:"claims,omitempty"`

	// claimCount is the number of live claims, which may be more than
	// claims lists.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ClaimCount int32 `json:"claimCount,omitempty"`

	// queuedReply is the late reply waiting for admission, if any.
	// +optional
	QueuedReply *QueuedReply `json:"queuedReply,omitempty"`

	// answers is the settled batch: what the person finally answered,
	// inside the window or late.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=16
	Answers []AnswerItem `json:"answers,omitempty"`

	// settlement records which reply settled the question, who sent it,
	// whether it was late, and when.
	// +optional
	Settlement *Settlement `json:"settlement,omitempty"`

	// specDigest is "sha256:" and the hex SHA-256 of what the question
	// asks (its agent, questions and approval rule), written when it is
	// first looked at. A reply may carry it in spec.questionRef.specDigest.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	SpecDigest string `json:"specDigest,omitempty"`

	// approval is the approval rule the question settles by, fixed when it
	// was asked from the ApprovalPolicies that governed it and its own
	// spec.approval; unset when none did: then the first valid reply
	// settles it.
	// +optional
	Approval *EffectiveApproval `json:"approval,omitempty"`

	// votes are the votes counted so far on a governed question, in the
	// order they were counted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Votes []Vote `json:"votes,omitempty"`

	// tally is "<approving identities>/<approvals required>" on a governed
	// question, for kubectl get.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Tally string `json:"tally,omitempty"`

	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Ready, Reconciling and Stalled, read by kstatus-based
	// tools (kubectl wait, Flux, Argo CD).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// UserQuestion is an agent's ask for a person's answer: a batch of
// questions, an optional foreground window, and the controller-owned
// lifecycle Open, Continued, Settled or Cancelled.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=uq,categories=hitl
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.spec.agent`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Questions",type=integer,JSONPath=`.status.questionCount`
// +kubebuilder:printcolumn:name="Deadline",type=string,JSONPath=`.status.deadline`
// +kubebuilder:printcolumn:name="Votes",type=string,JSONPath=`.status.tally`
// +kubebuilder:printcolumn:name="Answered By",type=string,JSONPath=`.status.settlement.answeredBy.username`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.admittedReply) || (has(oldSelf.spec.admittedReply) && oldSelf.spec.admittedReply == self.spec.admittedReply) || (has(self.status) && has(self.status.queuedReply) && self.status.queuedReply.name == self.spec.admittedReply)",message="spec.admittedReply must name the reply queued in status.queuedReply.name"
type UserQuestion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the ask.
	// +required
	Spec UserQuestionSpec `json:"spec"`

	// status is the question's life as the controller records it.
	// +optional
	Status UserQuestionStatus `json:"status,omitempty"`
}

// CallID is the id UIs key the question's card by: spec.callID, or the
// object's name when that is empty.
func (q *UserQuestion) CallID() string {
	if q.Spec.CallID != "" {
		return q.Spec.CallID
	}
	return q.Name
}

// MaxClaims is how many live claims the controller counts on one
// question, and status.claims lists, at most.
const MaxClaims = 64

// WindowStart is the instant a timed question's window is measured from:
// spec.askedAt when it lies within [creationTimestamp, creationTimestamp +
// 1s), the only second in which the API server can have received the ask,
// and creationTimestamp otherwise.
func (q *UserQuestion) WindowStart() time.Time {
	created := q.CreationTimestamp.Time
	if a := q.Spec.AskedAt; a != nil && !a.Time.Before(created) && a.Time.Before(created.Add(time.Second)) {
		return a.Time
	}
	return created
}

// Deadline is the end of a timed question's foreground window: status.deadline
// once the controller has written it, otherwise WindowStart() + spec.timeout.
// ok is false for a blocking question.
func (q *UserQuestion) Deadline() (deadline time.Time, ok bool) {
	if q.Status.Deadline != nil {
		return q.Status.Deadline.Time, true
	}
	if q.Spec.Timeout == nil {
		return time.Time{}, false
	}
	return q.WindowStart().Add(q.Spec.Timeout.Duration), true
}

// UserQuestionList is a list of UserQuestions.
//
// +kubebuilder:object:root=true
type UserQuestionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UserQuestion `json:"items"`
}
