package admission_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	. "github.com/hitl-dev/hitl/test/builders"
)

// Names that no object can have used to reach the API reader, which
// refuses them before sending anything, so the webhooks answered with an
// internal error (found by FuzzWebhookHandlers; its seeds "reply naming a
// question by a path", "reply naming no question" and "reply naming the
// question .." reproduce it without an API server). A ServiceAccount
// username with such a name once reached the same reader through the
// question webhook; who may ask is now the question-identity policy's to
// decide, which reads no object.
var _ = Describe("Names no object can have", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		grant(ns, "alice-answers", user("alice"), createReplies, agentVerb("answer", "bot"))
	})

	It("refuses a reply naming such a question with NOT_ANSWERABLE, not an internal error", func() {
		for _, name := range []string{"a/b", "..", "%2F"} {
			err := as("alice").Create(ctx, Reply("r", ns, name).Select("env", "prod").Obj())
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).NotTo(ContainSubstring("Internal error"))
			deniedByWebhook(err, hitlv1.CodeNotAnswerable, "does not exist")
		}
	})

	It("leaves a reply naming no question to the schema", func() {
		err := as("alice").Create(ctx, Reply("r", ns, "").Select("env", "prod").Obj())
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).NotTo(ContainSubstring("Internal error"))
		Expect(err.Error()).To(ContainSubstring("spec.questionRef.name"))
	})

	It("refuses a ServiceAccount username with such a name with AGENT_MISMATCH, not an internal error", func() {
		username := "system:serviceaccount:" + ns + ":a/b"
		grant(ns, "odd-creates", user(username), createQuestions)
		err := as(username, "system:serviceaccounts", "system:serviceaccounts:"+ns).Create(ctx, Question("q", ns).Agent("bot").Ask("env", "Where?", "a", "b").Obj())
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).NotTo(ContainSubstring("Internal error"))
		deniedByPolicy(err, "question-identity", hitlv1.CodeAgentMismatch, "user "+username+" may not ask as agent bot (spec.agent)")
	})
})
