package v1alpha1

import "strings"

// ErrorCode is one of the stable error codes of the hitl specification. It
// starts every denial message and condition message, and it is the reason of
// a rejected reply.
type ErrorCode string

// The error codes of the specification. The CRD's CEL messages spell the same
// strings, because markers cannot refer to Go constants; the envtest suite
// checks that each of them is denied with its code.
const (
	// CodeEmptyQuestions: an ask with no questions.
	CodeEmptyQuestions ErrorCode = "EMPTY_QUESTIONS"
	// CodeBadIntent: an intent that breaks the PlanReview or Approval rules.
	CodeBadIntent ErrorCode = "BAD_INTENT"
	// CodeBadTimeout: a non-positive, fractional-millisecond or oversized timeout.
	CodeBadTimeout ErrorCode = "BAD_TIMEOUT"
	// CodeDelegatedCaller: a subagent asking a person directly.
	CodeDelegatedCaller ErrorCode = "DELEGATED_CALLER"
	// CodeAgentMismatch: the creating user may not ask as spec.agent.
	CodeAgentMismatch ErrorCode = "AGENT_MISMATCH"
	// CodeBadAnswer: an answer batch that breaks the batch rules.
	CodeBadAnswer ErrorCode = "BAD_ANSWER"
	// CodeReplyQueued: the question already has a queued reply.
	CodeReplyQueued ErrorCode = "REPLY_QUEUED"
	// CodeNotAnswerable: the question is Settled, Cancelled or missing.
	CodeNotAnswerable ErrorCode = "NOT_ANSWERABLE"
	// CodeForbidden: the replying user may not answer this agent's questions.
	CodeForbidden ErrorCode = "FORBIDDEN"
	// CodeAskAborted: the agent's ask was cancelled before it was answered.
	CodeAskAborted ErrorCode = "ASK_ABORTED"
	// CodeNotOwner: changing or deleting a question, or withdrawing a
	// reply, that is not the caller's.
	CodeNotOwner ErrorCode = "NOT_OWNER"
	// CodeSelfApproval: the asking identity answering its own Approval or
	// PlanReview question.
	CodeSelfApproval ErrorCode = "SELF_APPROVAL"
	// CodePolicyWeakened: spec.approval asks for less than an
	// ApprovalPolicy that governs the question.
	CodePolicyWeakened ErrorCode = "POLICY_WEAKENED"
	// CodeDuplicateVote: a second vote by one identity on a governed
	// question.
	CodeDuplicateVote ErrorCode = "DUPLICATE_VOTE"
	// CodeQuestionChanged: spec.questionRef.specDigest is not the
	// question's status.specDigest.
	CodeQuestionChanged ErrorCode = "QUESTION_CHANGED"
	// CodeBadNotification: a NotificationPolicy or NotificationChannel
	// that breaks its rules.
	CodeBadNotification ErrorCode = "BAD_NOTIFICATION"
	// CodeBadInput: a question's input rule (spec.questions[].input) or
	// sensitive flag that breaks its rules, or a sensitive ask without a
	// sealing key.
	CodeBadInput ErrorCode = "BAD_INPUT"
)

// ErrorCodes are the codes above, in the specification's order.
func ErrorCodes() []ErrorCode {
	return []ErrorCode{CodeEmptyQuestions, CodeBadIntent, CodeBadTimeout, CodeDelegatedCaller, CodeAgentMismatch,
		CodeBadAnswer, CodeReplyQueued, CodeNotAnswerable, CodeForbidden, CodeAskAborted, CodeNotOwner, CodeSelfApproval,
		CodePolicyWeakened, CodeDuplicateVote, CodeQuestionChanged, CodeBadNotification, CodeBadInput}
}

// Known reports whether c is one of the specification's codes.
func (c ErrorCode) Known() bool {
	for _, k := range ErrorCodes() {
		if c == k {
			return true
		}
	}
	return false
}

// CodeOfMessage finds the code that starts a message ("BAD_ANSWER: ...")
// or a part of it after ": " (`admission webhook "..." denied the request:
// REPLY_QUEUED: ...`, `spec.timeout: Invalid value: "0s": BAD_TIMEOUT: ...`),
// and returns it with the rest of the message after it. ok is false when no
// known code is found.
func CodeOfMessage(msg string) (code ErrorCode, rest string, ok bool) {
	for s := msg; ; {
		name, after, found := strings.Cut(s, ": ")
		if !found {
			return "", "", false
		}
		if ErrorCode(name).Known() {
			return ErrorCode(name), after, true
		}
		s = after
	}
}
