package v1alpha1

// Condition types of questions and replies, read the way kstatus reads them:
// Reconciling=True is "in progress", Stalled=True is "failed", Ready=True is
// "current".
const (
	// ConditionReady is True once a question is settled, or a reply applied or admitted.
	ConditionReady = "Ready"
	// ConditionReconciling is True while a question waits for an answer, or a reply for admission.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when a question was cancelled or a reply rejected.
	ConditionStalled = "Stalled"
)

// Condition reasons beyond the states, the outcomes and the error codes,
// which are reasons too.
const (
	// ReasonAwaitingAnswer: the question waits for a reply.
	ReasonAwaitingAnswer = "AwaitingAnswer"
	// ReasonAwaitingAdmission: a late reply is queued for the agent to admit.
	ReasonAwaitingAdmission = "AwaitingAdmission"
)
