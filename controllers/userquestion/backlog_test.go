package userquestion_test

import (
	"fmt"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/manager"
	. "github.com/hitl-dev/hitl/test/builders"
)

// slowOpens holds each status write that opens a question for a while,
// as an API server busy with other clients would, so that new questions
// pile up in the manager's queue behind their first writes.
type slowOpens struct {
	next  http.RoundTripper
	delay time.Duration
}

func (s *slowOpens) RoundTrip(req *http.Request) (*http.Response, error) {
	q, err := statusWrite(req)
	if err != nil {
		return nil, err
	}
	if q != nil && q.Status.State == hitlv1.StateOpen {
		time.Sleep(s.delay)
	}
	return s.next.RoundTrip(req)
}

// A window that falls due while its question still waits in the queue for
// its first look goes ahead of the questions still waiting at its deadline.
var _ = Describe("Deadlines while new questions pile up", Ordered, func() {
	BeforeAll(func() {
		c := manager.DefaultConfig()
		c.Workers = 1
		slow := &slowOpens{delay: 300 * time.Millisecond}
		startManagerThrough(c, func(rt http.RoundTripper) http.RoundTripper { slow.next = rt; return slow })
	})
	AfterAll(func() {
		stopManager()
		startManager()
	})

	It("closes a window on time though its question was not yet looked at when it fell due", func() {
		// 24 questions without a window, then one with a 2 s window: one
		// worker writes each Open in 300 ms, so in turn the last would be
		// looked at about 7 s later.
		ns := newNamespace()
		for i := range 24 {
			Expect(k8s.Create(ctx, Question(fmt.Sprintf("b%02d", i), ns).Ask("q", "Q?").Obj())).To(Succeed())
		}
		Expect(k8s.Create(ctx, Question("due", ns).Ask("q", "Q?").Timeout(2*time.Second).Obj())).To(Succeed())
		Eventually(state(ns, "due"), "30s").Should(Equal(hitlv1.StateContinued))
		q := question(ns, "due")()
		late := q.Status.ContinuedAt.Sub(q.Status.Deadline.Time)
		Expect(late).To(BeNumerically("<", 1500*time.Millisecond), "closed %s after its deadline", late)
	})
})
