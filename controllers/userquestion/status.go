package userquestion

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// setQuestionConditions derives a question's conditions from its state.
func setQuestionConditions(st *hitlv1.UserQuestionStatus, generation int64, now time.Time) {
	cond := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)})
	}
	switch st.State {
	case hitlv1.StateOpen:
		cond(hitlv1.ConditionReady, metav1.ConditionFalse, string(hitlv1.StateOpen), "The agent is waiting for the answer")
		cond(hitlv1.ConditionReconciling, metav1.ConditionTrue, hitlv1.ReasonAwaitingAnswer, "The question is open")
		meta.RemoveStatusCondition(&st.Conditions, hitlv1.ConditionStalled)
	case hitlv1.StateContinued:
		cond(hitlv1.ConditionReady, metav1.ConditionFalse, string(hitlv1.StateContinued), "The window closed unanswered; the question stays answerable")
		if st.QueuedReply != nil {
			cond(hitlv1.ConditionReconciling, metav1.ConditionTrue, hitlv1.ReasonAwaitingAdmission, "Reply "+st.QueuedReply.Name+" is queued for the agent to admit")
		} else {
			cond(hitlv1.ConditionReconciling, metav1.ConditionTrue, hitlv1.ReasonAwaitingAnswer, "The question is answerable as a late reply")
		}
		meta.RemoveStatusCondition(&st.Conditions, hitlv1.ConditionStalled)
	case hitlv1.StateSettled:
		msg := "Settled"
		if s := st.Settlement; s != nil {
			msg = "Settled by reply " + s.Reply
			if s.Late {
				msg += " (late)"
			}
		}
		cond(hitlv1.ConditionReady, metav1.ConditionTrue, string(hitlv1.StateSettled), msg)
		meta.RemoveStatusCondition(&st.Conditions, hitlv1.ConditionReconciling)
		meta.RemoveStatusCondition(&st.Conditions, hitlv1.ConditionStalled)
	case hitlv1.StateCancelled:
		cond(hitlv1.ConditionReady, metav1.ConditionFalse, string(hitlv1.StateCancelled), "The agent cancelled the ask")
		cond(hitlv1.ConditionStalled, metav1.ConditionTrue, string(hitlv1.StateCancelled), "The agent cancelled the ask")
		meta.RemoveStatusCondition(&st.Conditions, hitlv1.ConditionReconciling)
	}
}

// setReplyConditions derives a reply's conditions from its outcome.
func setReplyConditions(st *hitlv1.QuestionReplyStatus, generation int64, now time.Time) {
	st.ObservedGeneration = generation
	cond := func(t string, s metav1.ConditionStatus, reason string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: st.Message,
			ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)})
	}
	switch st.Outcome {
	case hitlv1.OutcomeApplied, hitlv1.OutcomeAdmitted, hitlv1.OutcomeCounted, hitlv1.OutcomeClosed:
		cond(hitlv1.ConditionReady, metav1.ConditionTrue, string(st.Outcome))
		meta.RemoveStatusCondition(&st.Conditions, hitlv1.ConditionReconciling)
		meta.RemoveStatusCondition(&st.Conditions, hitlv1.ConditionStalled)
	case hitlv1.OutcomeQueued:
		cond(hitlv1.ConditionReady, metav1.ConditionFalse, string(st.Outcome))
		cond(hitlv1.ConditionReconciling, metav1.ConditionTrue, hitlv1.ReasonAwaitingAdmission)
		meta.RemoveStatusCondition(&st.Conditions, hitlv1.ConditionStalled)
	case hitlv1.OutcomeRejected:
		cond(hitlv1.ConditionReady, metav1.ConditionFalse, string(st.Reason))
		cond(hitlv1.ConditionStalled, metav1.ConditionTrue, string(st.Reason))
		meta.RemoveStatusCondition(&st.Conditions, hitlv1.ConditionReconciling)
	}
}
