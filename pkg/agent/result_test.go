package agent_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/agent"
	. "github.com/hitl-dev/hitl/test/builders"
)

var _ = DescribeTable("ResultOf, what a question returns to the call that waits for it",
	func(state hitlv1.QuestionState, answers []hitlv1.AnswerItem, want agent.Result, code hitlv1.ErrorCode) {
		q := Question("deploy-1", "agents").Agent("bot").Ask("env", "Where to deploy?", "staging", "prod").Obj()
		q.Spec.CallID = "call-1"
		q.Status.State, q.Status.Answers = state, answers
		got, err := agent.ResultOf(q)
		switch {
		case code != "":
			Expect(validation.CodeOf(err)).To(Equal(code))
			Expect(err).To(MatchError(ContainSubstring("deploy-1")))
		case state.OrOpen() == hitlv1.StateOpen:
			Expect(err).To(HaveOccurred())
			Expect(validation.CodeOf(err)).To(BeEmpty(), "an Open question is no result, not a refusal")
		default:
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(got).To(Equal(want))
	},
	Entry("Settled: the answers", hitlv1.StateSettled, chose("prod"),
		agent.Result{Question: "deploy-1", CallID: "call-1", Answers: chose("prod")}, hitlv1.ErrorCode("")),
	Entry("Continued: pending, no answers", hitlv1.StateContinued, nil,
		agent.Result{Question: "deploy-1", CallID: "call-1", Pending: true}, hitlv1.ErrorCode("")),
	Entry("Cancelled: ASK_ABORTED", hitlv1.StateCancelled, nil, agent.Result{}, hitlv1.CodeAskAborted),
	Entry("Open: no result yet", hitlv1.StateOpen, nil, agent.Result{}, hitlv1.ErrorCode("")),
	Entry("no state yet, which is Open", hitlv1.QuestionState(""), nil, agent.Result{}, hitlv1.ErrorCode("")),
)
