package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ReplyOutcome is what the controller did with a reply.
// +kubebuilder:validation:Enum=Applied;Queued;Admitted;Rejected;Counted;Closed
type ReplyOutcome string

const (
	// OutcomeApplied: the reply settled an Open question inside its window.
	OutcomeApplied ReplyOutcome = "Applied"
	// OutcomeQueued: the reply waits, queued on a Continued question, for the agent to admit it.
	OutcomeQueued ReplyOutcome = "Queued"
	// OutcomeAdmitted: the agent admitted the queued reply and it settled the question late.
	OutcomeAdmitted ReplyOutcome = "Admitted"
	// OutcomeRejected: the reply changed nothing; reason holds the error code.
	OutcomeRejected ReplyOutcome = "Rejected"
	// OutcomeCounted: the reply is a vote on a governed question, counted
	// in status.votes, and did not decide it.
	OutcomeCounted ReplyOutcome = "Counted"
	// OutcomeClosed: the reply came when its question was already finished
	// (Settled or Cancelled) or gone (deleted, or replaced by another of
	// the same name); it changed nothing, its reason is NOT_ANSWERABLE, and
	// it is final and healthy: a reply file that outlives its question in
	// a GitOps repository leaves the engine green.
	OutcomeClosed ReplyOutcome = "Closed"
)

// AnswerItem is the answer to one question of the ask.
//
// +kubebuilder:validation:XValidation:rule="!has(self.sealed) || ((!has(self.selected) || size(self.selected) == 0) && (!has(self.custom) || size(self.custom) == 0))",messageExpression="'BAD_ANSWER: question ' + self.id + ': a sealed answer takes no selected and no custom'"
type AnswerItem struct {
	// id is the id of the answered question.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ID string `json:"id"`

	// selected holds the selected option labels. Empty, with no custom text,
	// it marks a skipped question. Each label appears at most once.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=200
	Selected []string `json:"selected,omitempty"`

	// custom is free text (the "Other" answer). For a single-select question
	// it replaces the choice, so selected must then be empty.
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	Custom string `json:"custom,omitempty"`

	// sealed is the answer to a sensitive question, sealed to the
	// question's spec.sealingKey (see package pkg/sealed): only the asking
	// agent can open it. It replaces custom and selected, which stay empty.
	// +optional
	// +kubebuilder:validation:MaxLength=11264
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+$`
	Sealed string `json:"sealed,omitempty"`
}

// Skipped reports whether the item marks its question as skipped.
func (a AnswerItem) Skipped() bool { return len(a.Selected) == 0 && a.Custom == "" && a.Sealed == "" }

// QuestionReference names a question in the reply's namespace.
type QuestionReference struct {
	// name is the UserQuestion's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// uid, when set, is the UID of the question named: a reply or claim
	// whose uid is not the live question's answers or holds nothing (a
	// reply is Rejected, NOT_ANSWERABLE), so what was prepared for one
	// question never counts for a same-named other.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=128
	UID types.UID `json:"uid,omitempty"`

	// specDigest, when set, is the status.specDigest of the question the
	// reply was prepared for: a reply whose digest is not the live
	// question's is Rejected, QUESTION_CHANGED, so a vote prepared for one
	// question never counts for another.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	SpecDigest string `json:"specDigest,omitempty"`
}

// QuestionReplySpec is a person's answer batch. It is immutable.
//
// +kubebuilder:validation:XValidation:rule="has(self.answers) && size(self.answers) > 0",message="BAD_ANSWER: spec.answers must hold one item per question of the ask",fieldPath=".answers"
// +kubebuilder:validation:XValidation:rule="!has(self.answers) || self.answers.exists(a, (has(a.selected) && size(a.selected) > 0) || (has(a.custom) && size(a.custom) > 0) || has(a.sealed))",message="BAD_ANSWER: a batch may skip some questions, not all of them",fieldPath=".answers"
type QuestionReplySpec struct {
	// questionRef names the question answered, in the same namespace.
	// +required
	QuestionRef QuestionReference `json:"questionRef"`

	// answers is the batch: one item per question of the ask, keyed by id.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=16
	Answers []AnswerItem `json:"answers,omitempty"`

	// answeredBy is the authenticated user who created the reply, stamped by
	// the admission webhook from the API request; whatever a client sends
	// here is overwritten.
	// +optional
	AnsweredBy *UserInfo `json:"answeredBy,omitempty"`
}

// QuestionReplyStatus is what the controller did with the reply.
type QuestionReplyStatus struct {
	// outcome is Applied, Queued, Admitted, Counted, Rejected or Closed;
	// empty until the controller has processed the reply.
	// +optional
	Outcome ReplyOutcome `json:"outcome,omitempty"`

	// reason is the error code of a Rejected reply, and NOT_ANSWERABLE for
	// a Closed one.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason ErrorCode `json:"reason,omitempty"`

	// message explains the outcome; for a rejection it starts with the code
	// and names the question id and the rule broken.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// observedGeneration is the spec generation the status describes; 0
	// (the default) until the controller has judged the reply, so that
	// kstatus-based tools (Flux's health checks) read a new reply as in
	// progress rather than current.
	// +optional
	// +kubebuilder:default=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Ready, Reconciling and Stalled, read by kstatus-based
	// tools: a rejected reply reads as failed, an applied, admitted,
	// counted or closed one as current.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// source is where the reply came from when a GitOps engine applied it:
	// the engine's object, the revision it applied and whether the
	// commit's signature was verified. Set with the reply's outcome; empty
	// for a reply created otherwise.
	// +optional
	Source *ReplySource `json:"source,omitempty"`
}

// ReplySource is the provenance of a reply a GitOps engine applied.
type ReplySource struct {
	// engine is the engine's object that applied the reply: a Flux
	// Kustomization or an Argo CD Application.
	// +required
	Engine EngineReference `json:"engine"`

	// revision is the source revision the engine was applying when the
	// reply was judged, as the engine names it (Flux: "main@sha1:<sha>";
	// Argo CD: the commit SHA). Empty when the engine's object could not
	// be read.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Revision string `json:"revision,omitempty"`

	// verified is true when the engine's source verified the signature of
	// the commit at that revision (Flux: the source's SourceVerified
	// condition True for that revision).
	// +optional
	Verified bool `json:"verified,omitempty"`
}

// EngineReference names a GitOps engine's object.
type EngineReference struct {
	// kind is Kustomization (kustomize.toolkit.fluxcd.io) or Application
	// (argoproj.io).
	// +required
	// +kubebuilder:validation:Enum=Kustomization;Application
	Kind string `json:"kind"`

	// namespace is the object's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// name is the object's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// QuestionReply is a person's answer to a UserQuestion. Create one to
// answer; delete a queued one to withdraw it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=qr,categories=hitl
// +kubebuilder:printcolumn:name="Question",type=string,JSONPath=`.spec.questionRef.name`
// +kubebuilder:printcolumn:name="Outcome",type=string,JSONPath=`.status.outcome`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
// +kubebuilder:printcolumn:name="Answered By",type=string,JSONPath=`.spec.answeredBy.username`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type QuestionReply struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the answer batch; it cannot be changed after creation.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: delete the reply and create a new one"
	Spec QuestionReplySpec `json:"spec"`

	// status is what the controller did with the reply. A reply not yet
	// judged reads {observedGeneration: 0}.
	// +optional
	// +kubebuilder:default={observedGeneration: 0}
	Status QuestionReplyStatus `json:"status,omitempty"`
}

// QuestionReplyList is a list of QuestionReplies.
//
// +kubebuilder:object:root=true
type QuestionReplyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []QuestionReply `json:"items"`
}

// Adopt makes q an owner of r, so that r is deleted with q, unless q already
// is one; it reports whether it changed r.
func (r *QuestionReply) Adopt(q *UserQuestion) bool {
	if r.OwnedBy(q) {
		return false
	}
	r.OwnerReferences = append(r.OwnerReferences, metav1.OwnerReference{
		APIVersion: GroupVersion.String(), Kind: "UserQuestion", Name: q.Name, UID: q.UID,
	})
	return true
}

// OwnedBy reports whether q is an owner of r.
func (r *QuestionReply) OwnedBy(q *UserQuestion) bool {
	for _, o := range r.OwnerReferences {
		if o.UID == q.UID {
			return true
		}
	}
	return false
}
