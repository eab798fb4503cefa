package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
	"github.com/hitl-dev/hitl/internal/rewatch"
	. "github.com/hitl-dev/hitl/test/builders"
)

// The waiting calls of an agent share one watch of its questions
// (watch.go). These tests drive it through the tools, and through a
// client whose watches the test closes, holds back and expires.

// watchControl is a client's watches as the test sees them: it can close
// the open ones, hold new ones back, and refuse the next ones as expired
// (410), as an API server that compacted the version asked for does.
type watchControl struct {
	mu     sync.Mutex
	open   []*proxyWatch
	gate   chan struct{} // non-nil: a new watch waits until it is closed
	expire int           // the next expire watches are refused with 410
	opened int           // watches opened so far
}

// client wraps c: its watches are under wc's control.
func (wc *watchControl) client(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Watch: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			wc.mu.Lock()
			gate := wc.gate
			wc.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			wc.mu.Lock()
			if wc.expire > 0 {
				wc.expire--
				wc.mu.Unlock()
				return nil, apierrors.NewResourceExpired("too old resource version (the test expired it)")
			}
			wc.mu.Unlock()
			w, err := cl.Watch(ctx, list, opts...)
			if err != nil {
				return nil, err
			}
			p := &proxyWatch{inner: w, out: make(chan watch.Event), stop: make(chan struct{})}
			go p.run()
			wc.mu.Lock()
			wc.open = append(wc.open, p)
			wc.opened++
			wc.mu.Unlock()
			return p, nil
		},
	})
}

// cut closes every open watch, as an API server ending them does, after
// holding new ones back until release; expire refuses that many of the
// next ones as expired.
func (wc *watchControl) cut(expire int) (release func()) {
	gate := make(chan struct{})
	wc.mu.Lock()
	wc.gate = gate
	wc.expire = expire
	open := wc.open
	wc.open = nil
	wc.mu.Unlock()
	for _, p := range open {
		p.Stop()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			wc.mu.Lock()
			wc.gate = nil
			wc.mu.Unlock()
			close(gate)
		})
	}
}

func (wc *watchControl) watchesOpened() int {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	return wc.opened
}

// proxyWatch passes a real watch's events on until it is stopped.
type proxyWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func (p *proxyWatch) Stop()                          { p.once.Do(func() { close(p.stop) }) }
func (p *proxyWatch) ResultChan() <-chan watch.Event { return p.out }

func (p *proxyWatch) run() {
	defer close(p.out)
	defer p.inner.Stop()
	for {
		select {
		case <-p.stop:
			return
		case ev, ok := <-p.inner.ResultChan():
			if !ok {
				return
			}
			select {
			case p.out <- ev:
			case <-p.stop:
				return
			}
		}
	}
}

// asker is a session whose calls return still waiting at once, to ask the
// questions the tests wait on.
func (e *env) asker(callers hitlmcp.CallerFunc) func(callID string) hitlmcp.AskResult {
	cs, _ := e.session(callers, hitlmcp.Options{MaxWait: 200 * time.Millisecond, MaxWaits: -1}, nil)
	return func(callID string) hitlmcp.AskResult {
		e.t.Helper()
		args := whereArgs("")
		args["callID"] = callID
		res := structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "ask_user_question", args))
		e.g.Expect(res.Waiting).To(BeTrue())
		return res
	}
}

func waitArgs(r hitlmcp.AskResult) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "wait_for_answer", Arguments: map[string]any{"callID": r.CallID, "question": r.Question}}
}

var prodAnswer = []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}

// Many calls waiting on one question share one watch, and all of them
// return the answer once it comes; then none is left registered.
func TestManyWaitersOnOneQuestionAllWoken(t *testing.T) {
	e := newEnv(t)
	asked := e.asker(e.adminAs("bot"))("many")
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{MaxWait: time.Minute, MaxWaits: -1}, nil)
	const n = 60
	done := make([]<-chan called, n)
	for i := range done {
		done[i] = e.async(cs, e.ctx, waitArgs(asked))
	}
	e.g.Eventually(func() hitlmcp.WatchState { return hitlmcp.Watching(e.admin, "admin", e.ns, "bot") }).Should(And(
		HaveField("Open", BeTrue()), HaveField("Waiters", n), HaveField("Waiting", Equal(map[string]int{asked.Question: n}))),
		"the %d calls wait on one watch", n)
	e.answer(asked.Question, "r1", "prod")
	for i, ch := range done {
		var got called
		e.g.Eventually(ch).Should(Receive(&got), "call %d", i)
		e.g.Expect(got.err).NotTo(HaveOccurred())
		e.g.Expect(structured[hitlmcp.AskResult](e.g, got.res)).To(Equal(hitlmcp.AskResult{Question: asked.Question, CallID: "many", Answers: prodAnswer}))
	}
	st := hitlmcp.Watching(e.admin, "admin", e.ns, "bot")
	e.g.Expect(st.Waiters).To(BeZero())
	e.g.Expect(st.Waiting).To(BeEmpty())
}

// A call that starts waiting after its question left Open returns at once,
// though the shared watch has not seen the change: no watch is open at
// all while the question is answered and the call made.
func TestAWaiterAfterTheTransitionReturnsAtOnce(t *testing.T) {
	e := newEnv(t)
	wc := &watchControl{}
	c := wc.client(e.admin)
	callers := hitlmcp.Static(hitlmcp.Caller{Key: "admin", Client: c, Namespace: e.ns, Agent: "bot"})
	ask := e.asker(callers)
	first, second := ask("first"), ask("second")
	e.g.Expect(hitlmcp.Watching(c, "admin", e.ns, "bot").Open).To(BeTrue(), "the asks' watch lingers")

	// The watch is cut and held back: the shared cache is stale.
	release := wc.cut(0)
	defer release()
	e.answer(first.Question, "r1", "prod")
	e.g.Eventually(e.state(first.Question)).Should(Equal(hitlv1.StateSettled))

	cs, _ := e.session(callers, hitlmcp.Options{MaxWait: time.Minute}, nil)
	start := time.Now()
	res := e.call(cs, e.ctx, "wait_for_answer", waitArgs(first).Arguments)
	e.g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
	e.g.Expect(structured[hitlmcp.AskResult](e.g, res)).To(Equal(hitlmcp.AskResult{Question: first.Question, CallID: "first", Answers: prodAnswer}))

	// The same through the package's wait, with the watch still held back.
	q, err := hitlmcp.Wait(e.ctx, &hitlmcp.Caller{Key: "admin", Client: c, Namespace: e.ns, Agent: "bot"}, first.Question)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(q.Status.State).To(Equal(hitlv1.StateSettled))

	// And a question still open waits: the watch is back, and brings the
	// answer.
	done := e.async(cs, e.ctx, waitArgs(second))
	e.g.Consistently(done, 300*time.Millisecond).ShouldNot(Receive())
	release()
	e.answer(second.Question, "r2", "prod")
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(structured[hitlmcp.AskResult](e.g, got.res).Answers).To(Equal(prodAnswer))
}

// A watch that ends while calls wait is resumed without losing what
// changed meanwhile: from the last version it saw, or, when the API server
// no longer has it (410), by listing again; a question deleted meanwhile
// ends its call as a deleted question always has (NOT_ANSWERABLE).
func TestAWatchRestartLosesNothing(t *testing.T) {
	for _, c := range []struct {
		name   string
		expire int
		delete bool
	}{
		{"resumed", 0, false},
		{"expired, listed again", 1, false},
		{"resumed, the question deleted", 0, true},
		{"expired, the question deleted", 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			wc := &watchControl{}
			cl := wc.client(e.admin)
			callers := hitlmcp.Static(hitlmcp.Caller{Key: "admin", Client: cl, Namespace: e.ns, Agent: "bot"})
			asked := e.asker(callers)("restart")
			cs, _ := e.session(callers, hitlmcp.Options{MaxWait: time.Minute}, nil)
			const n = 3
			done := make([]<-chan called, n)
			for i := range done {
				done[i] = e.async(cs, e.ctx, waitArgs(asked))
			}
			e.g.Eventually(func() int { return hitlmcp.Watching(cl, "admin", e.ns, "bot").Waiting[asked.Question] }).Should(Equal(n))
			opened := wc.watchesOpened()

			// The watch ends; while none is open, the question changes.
			release := wc.cut(c.expire)
			if c.delete {
				e.g.Expect(e.admin.Delete(e.ctx, &hitlv1.UserQuestion{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: asked.Question}})).To(Succeed())
				e.g.Eventually(func() bool {
					err := e.admin.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: asked.Question}, &hitlv1.UserQuestion{})
					return apierrors.IsNotFound(err)
				}).Should(BeTrue())
			} else {
				e.answer(asked.Question, "r1", "prod")
				e.g.Eventually(e.state(asked.Question)).Should(Equal(hitlv1.StateSettled))
			}
			for _, ch := range done {
				e.g.Consistently(ch, 200*time.Millisecond).ShouldNot(Receive(), "no watch told the call yet")
			}
			release()
			for i, ch := range done {
				var got called
				e.g.Eventually(ch).Should(Receive(&got), "call %d", i)
				e.g.Expect(got.err).NotTo(HaveOccurred())
				if c.delete {
					toolError(e.g, got.res, string(hitlv1.CodeNotAnswerable), "does not exist")
				} else {
					e.g.Expect(structured[hitlmcp.AskResult](e.g, got.res).Answers).To(Equal(prodAnswer))
				}
			}
			e.g.Expect(wc.watchesOpened()).To(BeNumerically(">", opened), "the watch was opened again")
			st := hitlmcp.Watching(cl, "admin", e.ns, "bot")
			e.g.Expect(st.Open).To(BeTrue(), "the same watch goes on")
			e.g.Expect(st.Waiters).To(BeZero())
		})
	}
}

// A call whose client cancels it stops waiting and leaves nothing
// registered; the watch stops linger after its last call, with its
// goroutines.
func TestACancelledWaitUnregisters(t *testing.T) {
	defer hitlmcp.SetLinger(300 * time.Millisecond)()
	e := newEnv(t)
	ask := e.asker(e.adminAs("bot"))
	one, two := ask("one"), ask("two")
	cs, srv := e.session(e.adminAs("bot"), hitlmcp.Options{MaxWait: time.Minute}, nil)
	ctx1, cancel1 := context.WithCancel(e.ctx)
	ctx2, cancel2 := context.WithCancel(e.ctx)
	defer cancel2()
	done1 := e.async(cs, ctx1, waitArgs(one))
	done2 := e.async(cs, ctx2, waitArgs(two))
	e.g.Eventually(func() map[string]int { return hitlmcp.Watching(e.admin, "admin", e.ns, "bot").Waiting }).
		Should(Equal(map[string]int{one.Question: 1, two.Question: 1}))

	cancel1()
	e.g.Eventually(done1).Should(Receive())
	e.g.Eventually(func() map[string]int { return hitlmcp.Watching(e.admin, "admin", e.ns, "bot").Waiting }).
		Should(Equal(map[string]int{two.Question: 1}), "the cancelled call unregistered; the other waits on")
	e.g.Consistently(done2, 500*time.Millisecond).ShouldNot(Receive())
	e.g.Expect(hitlmcp.Watching(e.admin, "admin", e.ns, "bot").Open).To(BeTrue(), "a watch with a waiter stays open past the linger")
	e.g.Expect(e.state(one.Question)()).To(Equal(hitlv1.StateOpen), "a cancelled call leaves its question open")

	cancel2()
	e.g.Eventually(done2).Should(Receive())
	e.g.Eventually(func() bool { return hitlmcp.Watching(e.admin, "admin", e.ns, "bot").Open }).Should(BeFalse(), "the watch stops after the linger")
	e.g.Eventually(func() int { return hitlmcp.WatchGoroutines()[e.ns+"/bot"] }).Should(BeZero(), "with its goroutines")
	e.g.Eventually(func() int { return srv.Waits("admin") }).Should(BeZero())
}

// 10,000 waits, on several agents' questions, that end every way a wait
// ends (an answer, a question answered before, a cancel, the max wait, a
// deleted question), leave nothing behind: no waiter, no watch once the
// linger passed, no goroutine.
func TestTenThousandWaitsLeakNothing(t *testing.T) {
	defer hitlmcp.SetLinger(200 * time.Millisecond)()
	e := newEnv(t)
	// A client of its own, without the client-side rate limit.
	cfg := rest.CopyConfig(e.k.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.RateLimiter = nil
	c := e.clientFor(cfg)

	// Warm up: one watch opened and closed, so that the connections and the
	// client's caches are there before the count.
	warm := &hitlmcp.Caller{Key: "admin", Client: c, Namespace: e.ns, Agent: "warm"}
	ctx, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
	_, err := hitlmcp.Wait(ctx, warm, "none")
	cancel()
	e.g.Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodeNotAnswerable))
	e.g.Eventually(func() int { n, _ := hitlmcp.WatchesOf(c); return n }).Should(BeZero())
	runtime.GC()
	before := runtime.NumGoroutine()

	const (
		agents   = 4
		perAgent = 10 // questions per agent
		waits    = 10000
		parallel = 100
	)
	type target struct {
		caller *hitlmcp.Caller
		name   string
	}
	var asked []target
	for a := range agents {
		caller := &hitlmcp.Caller{Key: "admin", Client: c, Namespace: e.ns, Agent: fmt.Sprintf("leak-%d", a)}
		for i := range perAgent {
			q := Question(fmt.Sprintf("leak-%d-%d", a, i), e.ns).Agent(caller.Agent).Ask("env", "Where?", "staging", "prod").Obj()
			e.g.Expect(c.Create(e.ctx, q)).To(Succeed())
			asked = append(asked, target{caller, q.Name})
		}
	}
	// The questions of even index are answered while the waits go on (one
	// of them deleted instead); the others never.
	answered := func(i int) bool { return i%2 == 0 }

	var outcomes sync.Map // outcome -> *atomic.Int64
	count := func(what string) {
		v, _ := outcomes.LoadOrStore(what, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= waits {
					return
				}
				tg := asked[i%len(asked)]
				var ctx context.Context
				var cancel context.CancelFunc
				switch {
				case i%3 == 0: // cancelled soon
					ctx, cancel = context.WithCancel(e.ctx)
					time.AfterFunc(time.Duration(i%7)*time.Millisecond, cancel)
				case i%3 == 1 || !answered(i%len(asked)): // a short max wait
					ctx, cancel = context.WithTimeout(e.ctx, time.Duration(5+i%20)*time.Millisecond)
				default: // until answered
					ctx, cancel = context.WithTimeout(e.ctx, time.Minute)
				}
				if i%50 == 1 {
					tg.name = "never-asked"
				}
				q, err := hitlmcp.Wait(ctx, tg.caller, tg.name)
				cancel()
				switch {
				case err == nil && q.LeftOpen():
					count("returned a question that left Open")
				case validation.CodeOf(err) == hitlv1.CodeNotAnswerable:
					count("NOT_ANSWERABLE")
				case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
					count("context ended")
				default:
					count(fmt.Sprintf("unexpected: %v, %v", q, err))
				}
			}
		}()
	}
	for i, tg := range asked {
		if !answered(i) {
			continue
		}
		time.Sleep(50 * time.Millisecond)
		if i == 0 {
			e.g.Expect(c.Delete(e.ctx, &hitlv1.UserQuestion{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: tg.name}})).To(Succeed())
			continue
		}
		e.g.Expect(c.Create(e.ctx, Reply(fmt.Sprintf("r-%d", i), e.ns, tg.name).Select("env", "prod").Obj())).To(Succeed())
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	e.g.Eventually(finished, time.Minute).Should(BeClosed())

	outcomes.Range(func(k, v any) bool {
		t.Logf("%6d %s", v.(*atomic.Int64).Load(), k)
		e.g.Expect(k).NotTo(HavePrefix("unexpected"))
		return true
	})
	n, waiters := hitlmcp.WatchesOf(c)
	e.g.Expect(waiters).To(BeZero(), "no waiter left registered")
	t.Logf("%d watches open at the end, %d goroutines before, %d now", n, before, runtime.NumGoroutine())
	e.g.Eventually(func() int { n, _ := hitlmcp.WatchesOf(c); return n }).Should(BeZero(), "every watch stops after the linger")
	e.g.Eventually(func() map[string]int {
		left := map[string]int{}
		for k, v := range hitlmcp.WatchGoroutines() {
			if strings.HasPrefix(k, e.ns+"/") {
				left[k] = v
			}
		}
		return left
	}).Should(BeEmpty(), "with its goroutines")
	e.g.Eventually(func() int { runtime.GC(); return runtime.NumGoroutine() }, 20*time.Second).Should(BeNumerically("<=", before+5),
		"no goroutine left behind (%d before)", before)
}

// A watch the API server refuses ends its waits with the refusal, at
// once, whether its first list is refused or a later watch, and leaves no
// watch open: the next call starts another.
func TestARefusedWatchEndsItsWaits(t *testing.T) {
	defer hitlmcp.SetLinger(0)()
	e := newEnv(t)
	forbidden := apierrors.NewForbidden(hitlv1.GroupVersion.WithResource("userquestions").GroupResource(), "", errors.New("the test refuses"))
	var refuseList, refuseWatch atomic.Bool
	refusing := interceptor.NewClient(e.admin, interceptor.Funcs{
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*hitlv1.UserQuestionList); ok && refuseList.Load() {
				return forbidden
			}
			return cl.List(ctx, list, opts...)
		},
		Watch: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			if refuseWatch.Load() {
				return nil, forbidden
			}
			return cl.Watch(ctx, list, opts...)
		},
	})
	wc := &watchControl{}
	c := wc.client(refusing)
	caller := &hitlmcp.Caller{Key: "admin", Client: c, Namespace: e.ns, Agent: "bot"}
	asked := e.asker(hitlmcp.Static(*caller))("refused")
	e.g.Eventually(func() bool { return hitlmcp.Watching(c, "admin", e.ns, "bot").Open }).Should(BeFalse(), "no linger")

	// The first list refused.
	refuseList.Store(true)
	_, err := hitlmcp.Wait(e.ctx, caller, asked.Question)
	e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	e.g.Expect(err.Error()).To(ContainSubstring("following the questions of agent bot in " + e.ns))
	e.g.Expect(hitlmcp.Watching(c, "admin", e.ns, "bot").Open).To(BeFalse())

	// A later watch refused, while a call waits: the open one ends, and
	// the API server refuses the next.
	refuseList.Store(false)
	done := make(chan error, 1)
	go func() { _, err := hitlmcp.Wait(e.ctx, caller, asked.Question); done <- err }()
	e.g.Eventually(func() int { return hitlmcp.Watching(c, "admin", e.ns, "bot").Waiters }).Should(Equal(1))
	refuseWatch.Store(true)
	wc.cut(0)()
	// At once, unless a request failed just before (on a loaded machine the
	// client's own rate limiter can fail one): a refusal that follows a
	// failure is what an API server coming back says until it has read its
	// authorization rules, and is retried for rewatch.Patience.
	e.g.Eventually(done, rewatch.Patience+20*time.Second).Should(Receive(WithTransform(apierrors.IsForbidden, BeTrue())))
	e.g.Expect(hitlmcp.Watching(c, "admin", e.ns, "bot").Open).To(BeFalse())
	e.g.Eventually(func() int { return hitlmcp.WatchGoroutines()[e.ns+"/bot"] }).Should(BeZero())

	// The next call starts another watch, which the API server accepts.
	refuseWatch.Store(false)
	go func() { _, err := hitlmcp.Wait(e.ctx, caller, asked.Question); done <- err }()
	e.g.Eventually(func() int { return hitlmcp.Watching(c, "admin", e.ns, "bot").Waiters }).Should(Equal(1))
	e.answer(asked.Question, "r1", "prod")
	e.g.Eventually(done).Should(Receive(BeNil()))
}

// An ask answered while it waits returns the question as the shared
// watch delivered it when it left Open, as the Go SDK returns its watch
// event: the call reads its question once, when it starts waiting, and
// not again once the answer comes (a read there was the most of what an
// MCP ask answered at once cost over the Go SDK's). The answer is whole:
// the question's answers, and the typed values made from its spec.
func TestAnAnswerComesWithTheWatch(t *testing.T) {
	e := newEnv(t)
	var gets atomic.Int64
	c := interceptor.NewClient(e.admin, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*hitlv1.UserQuestion); ok {
				gets.Add(1)
			}
			return cl.Get(ctx, key, obj, opts...)
		},
	})
	callers := hitlmcp.Static(hitlmcp.Caller{Key: "admin", Client: c, Namespace: e.ns, Agent: "bot"})
	cs, _ := e.session(callers, hitlmcp.Options{MaxWait: time.Minute}, nil)
	for i, callID := range []string{"first", "second"} {
		// The first ask starts the agent's watch, the second finds it open.
		gets.Store(0)
		args := whereArgs("")
		args["callID"] = callID
		done := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: args})
		e.g.Eventually(gets.Load).Should(Equal(int64(1)), "ask %d reads its question once it waits", i)
		e.g.Eventually(func() int { return hitlmcp.Watching(c, "admin", e.ns, "bot").Waiters }).Should(Equal(1))
		name := ""
		for q, n := range hitlmcp.Watching(c, "admin", e.ns, "bot").Waiting {
			e.g.Expect(n).To(Equal(1))
			name = q
		}
		e.answer(name, "r-"+callID, "prod")
		var got called
		e.g.Eventually(done).Should(Receive(&got))
		e.g.Expect(got.err).NotTo(HaveOccurred())
		e.g.Expect(structured[hitlmcp.AskOutput](e.g, got.res)).To(Equal(hitlmcp.AskOutput{Question: name, CallID: callID,
			Answers: []hitlmcp.Answer{{ID: "env", Selected: []string{"prod"}, Value: "prod"}}}))
		e.g.Expect(text(got.res)).To(ContainSubstring("prod"))
		e.g.Expect(gets.Load()).To(Equal(int64(1)), "ask %d read its question again after the answer", i)
	}
}
