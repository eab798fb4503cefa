package userquestion_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/manager"
	. "github.com/hitl-dev/hitl/test/builders"
)

// replyPatches counts the manager's patches of replies' metadata (not of
// their status), by reply name.
type replyPatches struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func (p *replyPatches) RoundTrip(req *http.Request) (*http.Response, error) {
	path := req.URL.Path
	if req.Method == http.MethodPatch && strings.Contains(path, "/questionreplies/") && !strings.HasSuffix(path, "/status") {
		p.mu.Lock()
		p.n[path[strings.LastIndex(path, "/")+1:]]++
		p.mu.Unlock()
	}
	return p.next.RoundTrip(req)
}

func (p *replyPatches) of(name string) func() int {
	return func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.n[name]
	}
}

// The cache keeps no labels of a final reply that was adopted; the
// controller must not take that for a reply still to adopt.
var _ = Describe("Adoption of a final reply", Ordered, func() {
	patches := &replyPatches{n: map[string]int{}}
	BeforeAll(func() {
		startManagerThrough(manager.DefaultConfig(), func(rt http.RoundTripper) http.RoundTripper { patches.next = rt; return patches })
	})
	AfterAll(func() {
		stopManager()
		startManager()
	})

	It("labels a bare reply once, however often its question is looked at again", func() {
		ns := newNamespace()
		Expect(k8s.Create(ctx, Question("deploy", ns).Agent("release-bot").Ask("env", "Where?", "staging", "prod").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Reply("bare", ns, "deploy").Select("env", "prod").Obj())).To(Succeed())
		Eventually(outcome(ns, "bare")).Should(Equal(hitlv1.OutcomeApplied))
		Eventually(func() map[string]string {
			got := &hitlv1.QuestionReply{}
			Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bare"}, got)).To(Succeed())
			return got.Labels
		}).Should(Equal(map[string]string{hitlv1.AgentLabel: "release-bot", hitlv1.QuestionLabel: "deploy"}))
		// Each late reply is closed, and brings the question back to the
		// controller with the settled reply among its replies.
		for i := range 5 {
			name := fmt.Sprintf("late-%d", i)
			Expect(k8s.Create(ctx, Reply(name, ns, "deploy").Select("env", "staging").Obj())).To(Succeed())
			Eventually(outcome(ns, name)).Should(Equal(hitlv1.OutcomeClosed))
		}
		Consistently(patches.of("bare"), "1s").Should(Equal(1), "patches of the settled reply's labels")
	})
})
