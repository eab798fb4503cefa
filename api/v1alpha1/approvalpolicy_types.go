package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// MaxVotes is how many votes a governed question records at most; a vote
// past them is Rejected, NOT_ANSWERABLE.
const MaxVotes = 64

// ApproverSet is a group of approvers from whom a rule needs a minimum of
// distinct approvals: an approving identity belongs to the set when its
// username is one of users or it is in one of groups.
type ApproverSet struct {
	// name names the set within its rule ("sre"), a DNS label in a policy
	// or in spec.approval. In a question's status.approval, a policy's set
	// is named "<policy>/<set>"; the agent's own keep their name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=320
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9./]*[a-z0-9])?$`
	Name string `json:"name"`

	// groups are the groups whose members belong to the set.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	Groups []string `json:"groups,omitempty"`

	// users are the usernames that belong to the set.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	Users []string `json:"users,omitempty"`

	// minimum is how many distinct identities of the set must approve, 1
	// to 16. Their approvals also count toward the rule's approvals.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Minimum int32 `json:"minimum"`
}

// ApprovalRule is what a governed question needs to settle.
//
// +kubebuilder:validation:XValidation:rule="!has(self.from) || self.from.all(s, size(s.name) <= 63 && s.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))",message="BAD_INTENT: a set's name (from[].name) is a DNS label of at most 63 characters",fieldPath=".from"
// +kubebuilder:validation:XValidation:rule="!has(self.from) || self.from.all(s, s.minimum <= self.approvals)",message="BAD_INTENT: a set's minimum (from[].minimum) may not exceed approvals",fieldPath=".from"
// +kubebuilder:validation:XValidation:rule="!has(self.from) || self.from.all(s, (has(s.groups) && size(s.groups) > 0) || (has(s.users) && size(s.users) > 0))",message="BAD_INTENT: each set (from[]) names groups or users",fieldPath=".from"
type ApprovalRule struct {
	// approvals is the number of distinct identities whose approval
	// settles the question, 1 to 16.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Approvals int32 `json:"approvals"`

	// from lists sets of approvers each with its own minimum ("at least 1
	// from group sre").
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	From []ApproverSet `json:"from,omitempty"`

	// veto, when true (the default), settles the question as rejected on
	// the first rejecting vote. When false, the question settles as
	// rejected once as many distinct identities reject as approvals
	// requires.
	// +optional
	Veto *bool `json:"veto,omitempty"`

	// excludeRequester, when true (the default), refuses the vote of the
	// identity that asked (spec.askedBy), SELF_APPROVAL, whatever it is
	// granted.
	// +optional
	ExcludeRequester *bool `json:"excludeRequester,omitempty"`
}

// VetoEnabled is veto with its default, true.
func (r *ApprovalRule) VetoEnabled() bool { return r.Veto == nil || *r.Veto }

// RequesterExcluded is excludeRequester with its default, true.
func (r *ApprovalRule) RequesterExcluded() bool {
	return r.ExcludeRequester == nil || *r.ExcludeRequester
}

// ApprovalSelector says which questions a policy (an ApprovalPolicy or a
// NotificationPolicy) selects. Every part that is set must match; an empty
// selector selects every question of the namespace.
type ApprovalSelector struct {
	// agents are the agents (spec.agent) whose questions it governs; empty
	// means every agent.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Agents []string `json:"agents,omitempty"`

	// questionSelector selects questions by their labels; unset means
	// every question.
	// +optional
	QuestionSelector *metav1.LabelSelector `json:"questionSelector,omitempty"`

	// intents are the intents it applies to: a question is governed when
	// one of its questions has one of them. Empty means every question,
	// with an intent or without.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:Enum=Approval;PlanReview
	Intents []IntentType `json:"intents,omitempty"`
}

// ApprovalPolicySpec selects questions and says what settles them.
type ApprovalPolicySpec struct {
	// selector says which questions of the namespace the policy governs.
	// +optional
	Selector ApprovalSelector `json:"selector,omitempty"`

	// rule is what a governed question needs to settle.
	// +required
	Rule ApprovalRule `json:"rule"`
}

// ApprovalPolicy is the platform's rule for the approvals of the
// questions it selects: N distinct approving identities, minimums per set
// of approvers, a veto, and the requester excluded. It is fixed into each
// question's status.approval when the question is asked: a later change
// governs only questions asked after it. Written by the platform team;
// the agent role has no rights on it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=ap,categories=hitl
// +kubebuilder:printcolumn:name="Agents",type=string,JSONPath=`.spec.selector.agents`
// +kubebuilder:printcolumn:name="Intents",type=string,JSONPath=`.spec.selector.intents`
// +kubebuilder:printcolumn:name="Approvals",type=integer,JSONPath=`.spec.rule.approvals`
// +kubebuilder:printcolumn:name="Veto",type=boolean,JSONPath=`.spec.rule.veto`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ApprovalPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the policy.
	// +required
	Spec ApprovalPolicySpec `json:"spec"`
}

// ApprovalPolicyList is a list of ApprovalPolicies.
//
// +kubebuilder:object:root=true
type ApprovalPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ApprovalPolicy `json:"items"`
}

// PolicyReference names a policy, at the generation that was read.
type PolicyReference struct {
	// name is the ApprovalPolicy's name, in the question's namespace.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// generation is the policy's metadata.generation when it was read.
	// +required
	Generation int64 `json:"generation"`
}

// EffectiveApproval is the rule a governed question settles by, fixed
// when it was asked: the strictest of the matching policies and of the
// agent's own spec.approval (the most approvals, every set of every one,
// a veto if any has one, the requester excluded if any excludes it).
type EffectiveApproval struct {
	// approvals is the number of distinct approving identities required.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Approvals int32 `json:"approvals"`

	// from are the sets of approvers with their minimums: a policy's named
	// "<policy>/<set>", the agent's own (spec.approval) by their name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	From []ApproverSet `json:"from,omitempty"`

	// veto: the first rejecting vote settles the question as rejected.
	// +optional
	Veto bool `json:"veto,omitempty"`

	// excludeRequester: the identity that asked may not vote.
	// +optional
	ExcludeRequester bool `json:"excludeRequester,omitempty"`

	// policies are the policies it was made from, at the generation read
	// (the first 64 by name).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Policies []PolicyReference `json:"policies,omitempty"`
}

// VoteChoice is what a vote says of the approval asked.
// +kubebuilder:validation:Enum=Approve;Reject
type VoteChoice string

const (
	// VoteApprove approves every Approval and PlanReview question of the
	// batch (or answers a governed question without either).
	VoteApprove VoteChoice = "Approve"
	// VoteReject rejects at least one of them.
	VoteReject VoteChoice = "Reject"
)

// Vote is one reply counted on a governed question.
type Vote struct {
	// reply is the QuestionReply's name and replyUID its UID.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Reply string `json:"reply"`

	// replyUID is the reply's UID.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=128
	ReplyUID types.UID `json:"replyUID,omitempty"`

	// by is the reply's authenticated author (its spec.answeredBy), by
	// username and UID: the groups it was in when it voted are what sets
	// says.
	// +required
	By UserInfo `json:"by"`

	// choice is Approve or Reject.
	// +required
	Choice VoteChoice `json:"choice"`

	// sets are the names of the rule's approver sets (status.approval.from)
	// the voter belongs to, for an approving vote.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=320
	Sets []string `json:"sets,omitempty"`

	// at is when the controller counted it.
	// +required
	At metav1.MicroTime `json:"at"`
}
