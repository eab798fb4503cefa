package userquestion_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	. "github.com/hitl-dev/hitl/test/builders"
)

// questionGauges reads hitl_questions, by state.
func questionGauges() map[hitlv1.QuestionState]float64 {
	out := map[hitlv1.QuestionState]float64{}
	for _, s := range []hitlv1.QuestionState{hitlv1.StateOpen, hitlv1.StateContinued, hitlv1.StateSettled, hitlv1.StateCancelled} {
		out[s] = counter("hitl_questions", map[string]string{"state": string(s)})
	}
	return out
}

// storedQuestions counts the questions the API server holds, by state.
func storedQuestions() map[hitlv1.QuestionState]float64 {
	var list hitlv1.UserQuestionList
	Expect(k8s.List(ctx, &list)).To(Succeed())
	out := map[hitlv1.QuestionState]float64{hitlv1.StateOpen: 0, hitlv1.StateContinued: 0, hitlv1.StateSettled: 0, hitlv1.StateCancelled: 0}
	for i := range list.Items {
		out[list.Items[i].State()]++
	}
	return out
}

// gaugesMatchStore waits until hitl_questions counts what the API server
// holds.
func gaugesMatchStore() {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		want := storedQuestions()
		g.Expect(questionGauges()).To(Equal(want))
	}).Should(Succeed())
}

var _ = Describe("hitl_questions", func() {
	It("follows every question through its states, its deletion and a restart of the manager", func() {
		ns := newNamespace()
		gaugesMatchStore()

		Expect(k8s.Create(ctx, Question("open", ns).Ask("q", "Q?").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Question("settles", ns).Ask("q", "Q?").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Question("continues", ns).Ask("q", "Q?").Timeout(time.Second).Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Question("cancels", ns).Ask("q", "Q?").Obj())).To(Succeed())
		for _, n := range []string{"open", "settles", "continues", "cancels"} {
			Eventually(state(ns, n)).ShouldNot(BeEmpty())
		}
		gaugesMatchStore()

		Expect(k8s.Create(ctx, Reply("settles-r", ns, "settles").Custom("q", "a").Obj())).To(Succeed())
		Eventually(state(ns, "settles")).Should(Equal(hitlv1.StateSettled))
		q := question(ns, "cancels")()
		q.Spec.Cancelled = true
		Expect(k8s.Update(ctx, q)).To(Succeed())
		Eventually(state(ns, "cancels")).Should(Equal(hitlv1.StateCancelled))
		Eventually(state(ns, "continues"), "5s").Should(Equal(hitlv1.StateContinued))
		gaugesMatchStore()

		// Deleted in each state.
		for _, n := range []string{"open", "settles", "continues", "cancels"} {
			Expect(k8s.Delete(ctx, question(ns, n)())).To(Succeed())
		}
		gaugesMatchStore()

		// A new manager counts from its own cache's initial list.
		Expect(k8s.Create(ctx, Question("kept", ns).Ask("q", "Q?").Obj())).To(Succeed())
		Eventually(state(ns, "kept")).Should(Equal(hitlv1.StateOpen))
		stopManager()
		Expect(k8s.Create(ctx, Question("while-down", ns).Ask("q", "Q?").Obj())).To(Succeed())
		startManager()
		Eventually(state(ns, "while-down")).Should(Equal(hitlv1.StateOpen))
		gaugesMatchStore()
	})
})
