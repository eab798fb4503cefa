package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QuestionClaimSpec is an answerer's claim on a timed question's window.
//
// +kubebuilder:validation:XValidation:rule="self.questionRef == oldSelf.questionRef && self.agent == oldSelf.agent",message="spec.questionRef and spec.agent are immutable",fieldPath=".questionRef"
type QuestionClaimSpec struct {
	// questionRef names the claimed question, in the claim's namespace.
	// +required
	QuestionRef QuestionReference `json:"questionRef"`

	// agent is the claimed question's spec.agent. Creating or renewing a
	// claim needs RBAC verb "answer" on agents.hitl.dev/<agent>; a claim
	// that names another agent than its question's holds nothing.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Agent string `json:"agent"`

	// holder is the authenticated user holding the claim, stamped at
	// admission from the request on every write (whatever the client
	// sent): only the holder renews its claim.
	// +optional
	Holder *UserInfo `json:"holder,omitempty"`

	// durationSeconds is how long the claim holds after each renewal the
	// controller observes, 5 to 300 seconds.
	// +required
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=300
	DurationSeconds int32 `json:"durationSeconds"`

	// renewTime is when the holder last renewed the claim, by its own
	// clock; a write that changes it is a renewal. The controller judges
	// liveness by when it observes renewals, never by this time.
	// +optional
	RenewTime *metav1.MicroTime `json:"renewTime,omitempty"`
}

// QuestionClaim says that a person is reading and answering a timed
// question: while it lives, the controller does not close the question's
// window. Only those who may answer the question's agent may claim it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=qc,categories=hitl
// +kubebuilder:printcolumn:name="Question",type=string,JSONPath=`.spec.questionRef.name`
// +kubebuilder:printcolumn:name="Holder",type=string,JSONPath=`.spec.holder.username`
// +kubebuilder:printcolumn:name="Duration",type=integer,JSONPath=`.spec.durationSeconds`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type QuestionClaim struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the claim.
	// +required
	Spec QuestionClaimSpec `json:"spec"`
}

// QuestionClaimList is a list of QuestionClaims.
//
// +kubebuilder:object:root=true
type QuestionClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []QuestionClaim `json:"items"`
}
