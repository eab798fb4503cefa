package userquestion_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/manager"
	. "github.com/hitl-dev/hitl/test/builders"
)

// slowCloses holds each status write that closes a window (state
// Continued) for a while before the API server sees it, as a busy API
// server would, and keeps count of the writes held at once and of the
// states each question was written with.
type slowCloses struct {
	next  http.RoundTripper
	delay time.Duration

	held, most atomic.Int32
	mu         sync.Mutex
	written    map[string][]hitlv1.QuestionState // by question name
}

// statusWrite returns the question a request writes the status of, or nil
// for any other request.
func statusWrite(req *http.Request) (*hitlv1.UserQuestion, error) {
	if req.Method != http.MethodPut || !strings.HasSuffix(req.URL.Path, "/status") || !strings.Contains(req.URL.Path, "/userquestions/") {
		return nil, nil
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	var q hitlv1.UserQuestion
	if err := json.Unmarshal(body, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

func (s *slowCloses) RoundTrip(req *http.Request) (*http.Response, error) {
	q, err := statusWrite(req)
	if err != nil {
		return nil, err
	}
	if q == nil {
		return s.next.RoundTrip(req)
	}
	s.mu.Lock()
	s.written[q.Name] = append(s.written[q.Name], q.Status.State)
	s.mu.Unlock()
	if q.Status.State != hitlv1.StateContinued {
		return s.next.RoundTrip(req)
	}
	n := s.held.Add(1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	time.Sleep(s.delay)
	s.held.Add(-1)
	return s.next.RoundTrip(req)
}

// states returns the states question name was written with, in order.
func (s *slowCloses) states(name string) []hitlv1.QuestionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.written[name])
}

// A close waits on the API server (a claims read, a status write) off the
// workers: while the API server is slow, the manager closes more windows at
// once than it has workers, and a question's other events wait for its
// close to be written.
var _ = Describe("Closing windows while the API server is slow", Ordered, func() {
	slow := &slowCloses{delay: 400 * time.Millisecond, written: map[string][]hitlv1.QuestionState{}}
	BeforeAll(func() {
		startManagerThrough(manager.DefaultConfig(), func(rt http.RoundTripper) http.RoundTripper { slow.next = rt; return slow })
	})
	AfterAll(func() {
		stopManager()
		startManager()
	})

	It("closes more windows at once than it has workers while the API server is slow, each once", func() {
		const n = 64
		workers := int32(manager.DefaultConfig().Workers)
		ns := newNamespace()
		slow.most.Store(0)
		for i := range n {
			Expect(k8s.Create(ctx, Question(fmt.Sprintf("w%02d", i), ns).Ask("q", "Q?").Timeout(3*time.Second).Obj())).To(Succeed())
		}
		for i := range n {
			Eventually(state(ns, fmt.Sprintf("w%02d", i)), "30s").Should(Equal(hitlv1.StateContinued))
		}
		// On the workers, a close held 400 ms held a worker: at most as
		// many writes at once as workers. Off them, the closes that waited
		// for a slot added one each. How many more depends on how the
		// creation times (whole seconds) split the deadlines: 17 to 32.
		Expect(slow.most.Load()).To(BeNumerically(">", workers), "status writes held at once")
		for i := range n {
			Consistently(func() []hitlv1.QuestionState { return slow.states(fmt.Sprintf("w%02d", i)) }, "100ms").
				Should(Equal([]hitlv1.QuestionState{hitlv1.StateOpen, hitlv1.StateContinued}), "written once open and once closed")
		}
	})

	It("queues a reply that comes while its question's close is being written", func() {
		ns := newNamespace()
		// Two seconds: the window starts at the creation time, a whole
		// second, so a one-second window created late in its second could
		// close before the first look, which then writes Continued and
		// never Open (the first status waits --open-gather for a reply).
		Expect(k8s.Create(ctx, Question("mid", ns).Ask("q", "Q?", "yes", "no").Timeout(2*time.Second).Obj())).To(Succeed())
		Eventually(state(ns, "mid"), "10s").Should(Equal(hitlv1.StateOpen))
		Eventually(func() []hitlv1.QuestionState { return slow.states("mid") }, "10s", "5ms").
			Should(Equal([]hitlv1.QuestionState{hitlv1.StateOpen, hitlv1.StateContinued}))
		Expect(k8s.Create(ctx, Reply("during", ns, "mid").Select("q", "yes").Obj())).To(Succeed())
		Expect(state(ns, "mid")()).To(Equal(hitlv1.StateOpen), "the close was still being written when the reply came")

		// Creation times are whole seconds: a reply created in the
		// deadline's second, before it, is in time and settles the question.
		var r hitlv1.QuestionReply
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "during"}, &r)).To(Succeed())
		q := question(ns, "mid")()
		if r.CreationTimestamp.Time.Before(q.Status.Deadline.Time) {
			Eventually(func() hitlv1.ReplyOutcome { return reply(ns, "during")().Outcome }, "10s").Should(Equal(hitlv1.OutcomeApplied))
			q = question(ns, "mid")()
			Expect(q.Status.State).To(Equal(hitlv1.StateSettled))
			Expect(q.Status.Settlement.Reply).To(Equal("during"))
			Expect(q.Status.Settlement.Late).To(BeFalse())
		} else {
			Eventually(func() hitlv1.ReplyOutcome { return reply(ns, "during")().Outcome }, "10s").Should(Equal(hitlv1.OutcomeQueued))
			q = question(ns, "mid")()
			Expect(q.Status.State).To(Equal(hitlv1.StateContinued))
			Expect(q.Status.QueuedReply.Name).To(Equal("during"))
		}
		Expect(q.Status.ContinuedAt).NotTo(BeNil(), "the window closed before the reply was looked at")
		Consistently(func() int { return len(slow.states("mid")) }, "1s").Should(Equal(3), "opened, closed, and settled or queued: one write each")
	})
})
