// Package v1alpha1 holds the hitl.dev/v1alpha1 API: UserQuestion, an agent's
// ask for a person's answer, and QuestionReply, a person's answer to it.
//
// +kubebuilder:object:generate=true
// +groupName=hitl.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every hitl kind.
	GroupVersion = schema.GroupVersion{Group: "hitl.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the hitl kinds with a runtime.Scheme
	// (apimachinery's builder: the API package depends on apimachinery
	// only, not on controller-runtime).
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the hitl kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &UserQuestion{}, &UserQuestionList{}, &QuestionReply{}, &QuestionReplyList{},
		&QuestionClaim{}, &QuestionClaimList{}, &ApprovalPolicy{}, &ApprovalPolicyList{},
		&NotificationChannel{}, &NotificationChannelList{}, &NotificationPolicy{}, &NotificationPolicyList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Labels and annotations that hitl reads and writes.
const (
	// AgentLabel carries the asking agent on questions and replies.
	AgentLabel = "hitl.dev/agent"
	// QuestionLabel carries the question's name on replies and claims.
	QuestionLabel = "hitl.dev/question"
)

// The RBAC verbs on resource "agents" (group hitl.dev, resource name = the
// agent) that grant asking as, and answering for, an agent. The admission
// policies in config/policies spell the same strings.
const (
	VerbAsk    = "ask"
	VerbAnswer = "answer"
	// VerbManage marks the manager: only its role holds it, and the
	// admission policies let it change and delete what others own.
	VerbManage = "manage"
	// VerbNotify marks the notifier (hitl-notify): the question-owner
	// admission policy lets its holder change a question's
	// NotifiedAnnotation and nothing else.
	VerbNotify = "notify"
	// AgentsResource is the RBAC resource the verbs are checked on.
	AgentsResource = "agents"
)
