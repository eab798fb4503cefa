package userquestion_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/manager"
	. "github.com/hitl-dev/hitl/test/builders"
)

// A burst of windows closing in one namespace (a shared deadline, a
// restart) gets the namespace's budget of Continued Events and one Event
// summing up the rest; outcomes always get one Event each.
var _ = Describe("The Events of a burst of closed windows", Ordered, func() {
	const budget, timed = 3, 8
	BeforeAll(func() {
		stopManager()
		c := manager.DefaultConfig()
		c.ContinuedEventsPerMinute = budget
		startManagerWith(c)
	})
	AfterAll(func() {
		stopManager()
		startManager()
	})

	It("writes the budget of Continued Events, sums up the others in one, and writes every outcome's", func() {
		ns := newNamespace()
		aggregated := counter("hitl_events_total", map[string]string{"result": "aggregated"})
		for i := range timed {
			Expect(k8s.Create(ctx, Question(fmt.Sprintf("t%d", i), ns).Ask("q", "Q?").Timeout(2*time.Second).Obj())).To(Succeed())
		}
		for i := range 4 {
			Expect(k8s.Create(ctx, Question(fmt.Sprintf("s%d", i), ns).Ask("q", "Q?").Obj())).To(Succeed())
			Expect(k8s.Create(ctx, Reply(fmt.Sprintf("r%d", i), ns, fmt.Sprintf("s%d", i)).Custom("q", "yes").Obj())).To(Succeed())
		}
		Expect(k8s.Create(ctx, Question("pick", ns).Ask("color", "Which?", "red", "blue").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Reply("both", ns, "pick").Select("color", "red", "blue").Obj())).To(Succeed())
		for i := range timed {
			Eventually(state(ns, fmt.Sprintf("t%d", i))).Should(Equal(hitlv1.StateContinued))
		}

		continued := func() []eventsv1.Event {
			var list eventsv1.EventList
			Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			var out []eventsv1.Event
			for _, e := range list.Items {
				if e.Reason == string(hitlv1.StateContinued) {
					out = append(out, e)
				}
			}
			return out
		}
		Eventually(func() int { return len(continued()) }, "30s").Should(Equal(budget + 1))
		Consistently(func() int { return len(continued()) }, "1s").Should(Equal(budget + 1))
		var summary *eventsv1.Event
		own := map[string]bool{}
		for _, e := range continued() {
			if strings.HasPrefix(e.Note, fmt.Sprintf("%d windows in this namespace", timed-budget)) {
				summary = &e
				continue
			}
			own[e.Regarding.Name] = true
		}
		Expect(own).To(HaveLen(budget), "the budget's Continued Events are about distinct questions")
		Expect(summary).NotTo(BeNil(), "one Event sums up the Continued Events over the budget")
		Expect(own).NotTo(HaveKey(summary.Regarding.Name), "the summary regards a question that has no Event of its own")
		for i := range timed {
			name := fmt.Sprintf("t%d", i)
			Expect(own[name] || strings.Contains(summary.Note, name)).To(BeTrue(), "%s is in an Event of its own or in the summary", name)
		}
		Expect(counter("hitl_events_total", map[string]string{"result": "aggregated"}) - aggregated).To(BeEquivalentTo(timed - budget))

		for i := range 4 {
			Eventually(events(ns, fmt.Sprintf("s%d", i), string(hitlv1.StateSettled))).Should(Equal(1))
		}
		Eventually(events(ns, "both", string(hitlv1.CodeBadAnswer))).Should(Equal(1))
	})
})
