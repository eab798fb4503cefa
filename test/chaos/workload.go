package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/agent"
	"github.com/hitl-dev/hitl/pkg/answerer"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// What the clients were told, for the checks to compare with what the
// recorder saw.
type askView struct {
	Question string              `json:"question"`
	Timed    bool                `json:"timed"`
	Returned time.Time           `json:"returned"`
	Pending  bool                `json:"pending,omitempty"`
	Answers  []hitlv1.AnswerItem `json:"answers,omitempty"`
	Err      string              `json:"err,omitempty"`
}

type admitView struct {
	Question string              `json:"question"`
	Reply    string              `json:"reply"`
	Answers  []hitlv1.AnswerItem `json:"answers,omitempty"`
	Err      string              `json:"err,omitempty"`
}

type replyView struct {
	Question string              `json:"question"`
	Reply    string              `json:"reply,omitempty"`
	Sent     time.Time           `json:"sent"`
	Outcome  hitlv1.ReplyOutcome `json:"outcome,omitempty"`
	Reason   hitlv1.ErrorCode    `json:"reason,omitempty"`
	Err      string              `json:"err,omitempty"`
}

type clientViews struct {
	Asks    []askView
	Admits  []admitView
	Replies []replyView
	// Withdrawn are the replies their answerer withdrew: the API server
	// deleted them, guarded by the version that showed them Queued.
	Withdrawn []string
	// Ops counts operations by kind; Errors the calls that failed
	// without a code (transport errors while the API server was down).
	Ops    map[string]int
	Errors map[string]int
	// ErrorSamples holds the first error of each kind.
	ErrorSamples map[string]string
}

// workload is agents asking and answerers replying, each as its own
// ServiceAccount with the shipped roles, through the SDKs.
type workload struct {
	namespace   string
	agents      []*agent.Agent
	answerers   []*answerer.Answerer
	reader      client.Client
	concurrency int
	seed        uint64

	mu sync.Mutex
	v  clientViews
	wg sync.WaitGroup
	// cancel ends the scenarios still running when wait gives up.
	ctx    context.Context
	cancel context.CancelFunc
}

func newWorkload(ctx context.Context, k *cluster, seed uint64, concurrency int) (*workload, error) {
	w := &workload{namespace: k.namespace, concurrency: concurrency, seed: seed,
		v: clientViews{Ops: map[string]int{}, Errors: map[string]int{}, ErrorSamples: map[string]string{}}}
	for i := range agents {
		c, err := k.client(ctx, k.namespace, agentName(i))
		if err != nil {
			return nil, err
		}
		w.agents = append(w.agents, agent.New(c, k.namespace, agentName(i)))
	}
	var names []string
	for i := range agents {
		names = append(names, agentName(i))
	}
	for i := range answerers {
		c, err := k.client(ctx, k.namespace, answererName(i))
		if err != nil {
			return nil, err
		}
		w.answerers = append(w.answerers, answerer.New(c, k.namespace, answererName(i), names...))
		if w.reader == nil {
			w.reader = c
		}
	}
	w.ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return w, nil
}

// run starts scenarios, concurrency at a time, until end.
func (w *workload) run(ctx context.Context, end time.Time) {
	rng := rand.New(rand.NewPCG(w.seed, 2))
	slots := make(chan struct{}, w.concurrency)
	for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		s := &scenario{w: w, id: i, rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))}
		w.wg.Add(1)
		go func() {
			defer func() { <-slots; w.wg.Done() }()
			sctx, cancel := context.WithTimeout(w.ctx, 150*time.Second)
			defer cancel()
			s.run(sctx)
		}()
		sleep(ctx, time.Duration(20+rng.IntN(200))*time.Millisecond)
	}
}

// wait waits for the running scenarios, at most timeout, then ends them.
func (w *workload) wait(_ context.Context, timeout time.Duration) {
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		fmt.Fprintln(os.Stderr, "chaos: scenarios still running after", timeout, "; ending them")
		w.cancel()
		<-done
	}
}

func (w *workload) views() clientViews {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.v
}

func (w *workload) op(kind string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.v.Ops[kind]++
	if code := validation.CodeOf(err); code != "" {
		w.v.Ops[kind+" "+string(code)]++
	}
	if err != nil && validation.CodeOf(err) == "" {
		w.v.Errors[kind]++
		if w.v.ErrorSamples[kind] == "" {
			w.v.ErrorSamples[kind] = err.Error()
		}
	}
}

// scenario is one question's story; rng is its own.
type scenario struct {
	w   *workload
	id  int
	rng *rand.Rand
	mu  sync.Mutex // guards rng for the goroutines a scenario starts
	tag int
	// governed: the question's agent is governedAgent, so that every
	// reply is a vote and two distinct answerers settle it.
	governed bool
	// bg counts the goroutines the scenario started; run waits for them.
	bg sync.WaitGroup
}

// spawn runs f beside the agent's call; the scenario ends when f has.
func (s *scenario) spawn(f func()) {
	s.bg.Add(1)
	go func() { defer s.bg.Done(); f() }()
}

func (s *scenario) dur(from, to time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Whole milliseconds: a timeout with a fraction of one is BAD_TIMEOUT.
	return (from + time.Duration(s.rng.Int64N(int64(to-from)))).Round(time.Millisecond)
}

func (s *scenario) intn(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.IntN(n)
}

func (s *scenario) answerer() *answerer.Answerer { return s.w.answerers[s.intn(len(s.w.answerers))] }

var kinds = []struct {
	name   string
	weight int
}{
	{"blocking", 12}, {"in-window", 14}, {"late-admit", 14}, {"late-withdraw", 8}, {"late-second-reply", 8},
	{"claimed-reply", 10}, {"claimed-drop", 8}, {"racing", 14}, {"cancelled", 12},
}

func (s *scenario) kind() string {
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	x := s.intn(total)
	for _, k := range kinds {
		if x < k.weight {
			return k.name
		}
		x -= k.weight
	}
	return kinds[0].name
}

func (s *scenario) request(name string) agent.Request {
	return agent.Request{Name: name, Questions: []hitlv1.Question{
		{ID: "go", Question: "Proceed with the rollout?", Options: []hitlv1.QuestionOption{{Label: "yes"}, {Label: "no"}}},
		{ID: "note", Question: "Anything the agent should know?"},
	}}
}

// batch is an answer batch that names the reply attempt, so that every
// batch of the run is different.
func (s *scenario) batch() []hitlv1.AnswerItem {
	s.mu.Lock()
	s.tag++
	tag, pick := s.tag, []string{"yes", "no"}[s.rng.IntN(2)]
	s.mu.Unlock()
	return []hitlv1.AnswerItem{{ID: "go", Selected: []string{pick}}, {ID: "note", Custom: fmt.Sprintf("s%d-r%d", s.id, tag)}}
}

func (s *scenario) run(ctx context.Context) {
	defer s.bg.Wait()
	kind := s.kind()
	ag := s.w.agents[s.intn(len(s.w.agents))]
	s.governed = ag.Name() == governedAgent
	if s.governed {
		s.w.op("scenario:governed", nil)
	}
	name := fmt.Sprintf("q%05d", s.id)
	req := s.request(name)
	s.w.op("scenario:"+kind, nil)
	switch kind {
	case "blocking":
		s.spawn(func() { s.replyAfter(ctx, name, s.dur(200*time.Millisecond, 3*time.Second)) })
		s.ask(ctx, ag, req, 0)
	case "in-window":
		s.spawn(func() { s.replyAfter(ctx, name, s.dur(300*time.Millisecond, 2*time.Second)) })
		s.ask(ctx, ag, req, s.dur(6*time.Second, 10*time.Second))
	case "late-admit", "late-withdraw", "late-second-reply":
		res, ok := s.ask(ctx, ag, req, s.dur(2*time.Second, 4*time.Second))
		if !ok || !res.Pending {
			return
		}
		s.late(ctx, ag, name, kind)
	case "claimed-reply", "claimed-drop":
		s.spawn(func() { s.claim(ctx, name, kind == "claimed-reply") })
		res, ok := s.ask(ctx, ag, req, s.dur(2*time.Second, 4*time.Second))
		if ok && res.Pending && s.intn(2) == 0 {
			s.late(ctx, ag, name, "late-admit")
		}
	case "racing":
		s.spawn(func() { s.race(ctx, name, 2+s.intn(2), s.dur(300*time.Millisecond, 2*time.Second)) })
		if s.intn(2) == 0 {
			s.ask(ctx, ag, req, 0)
		} else {
			res, ok := s.ask(ctx, ag, req, s.dur(2*time.Second, 5*time.Second))
			if ok && res.Pending {
				s.late(ctx, ag, name, "late-admit")
			}
		}
	case "cancelled":
		cut := s.dur(500*time.Millisecond, 3*time.Second)
		// An answer racing the cancellation.
		s.spawn(func() { s.replyAfter(ctx, name, cut-300*time.Millisecond+s.dur(0, 600*time.Millisecond)) })
		actx, cancel := context.WithTimeout(ctx, cut)
		defer cancel()
		s.ask(actx, ag, req, 0)
	}
}

// ask asks as ag (timed when timeout > 0) and records what it returned.
func (s *scenario) ask(ctx context.Context, ag *agent.Agent, req agent.Request, timeout time.Duration) (agent.Result, bool) {
	var res agent.Result
	var err error
	if timeout > 0 {
		res, err = ag.AskTimed(ctx, req, timeout)
	} else {
		res, err = ag.Ask(ctx, req)
	}
	v := askView{Question: req.Name, Timed: timeout > 0, Returned: time.Now(), Pending: res.Pending, Answers: res.Answers}
	if err != nil {
		v.Err = err.Error()
	}
	s.w.mu.Lock()
	s.w.v.Asks = append(s.w.v.Asks, v)
	s.w.mu.Unlock()
	s.w.op("ask", err)
	return res, err == nil
}

// reply answers the question as a: once on a question no policy
// governs; on a governed one, its vote and then, while the question is
// undecided (Open or Continued, nothing queued), the votes of other
// answerers that have not voted yet, until one decides it (Applied or
// Queued) or is refused. It returns what the last reply was told.
func (s *scenario) reply(ctx context.Context, a *answerer.Answerer, question string) replyView {
	v := s.replyOnce(ctx, a, question)
	if !s.governed {
		return v
	}
	return s.complete(ctx, question, v)
}

// complete sends the votes a governed question still needs, each from an
// answerer that has not voted on it, after last was Counted or refused as
// a DUPLICATE_VOTE (the one that sent it had voted already).
func (s *scenario) complete(ctx context.Context, question string, last replyView) replyView {
	for range 2 * answerers {
		duplicate := last.Reason == hitlv1.CodeDuplicateVote || strings.Contains(last.Err, string(hitlv1.CodeDuplicateVote))
		if last.Outcome != hitlv1.OutcomeCounted && !duplicate {
			return last
		}
		var q hitlv1.UserQuestion
		read := false
		for range 20 {
			if ctx.Err() != nil {
				return last
			}
			if err := s.w.reader.Get(ctx, client.ObjectKey{Namespace: s.w.namespace, Name: question}, &q); err == nil {
				read = true
				break
			}
			sleep(ctx, 500*time.Millisecond)
		}
		if !read || q.Status.State.Terminal() || q.Status.QueuedReply != nil || q.Status.Approval == nil {
			return last
		}
		voted := map[string]bool{}
		for _, v := range q.Status.Votes {
			voted[v.By.Username] = true
		}
		var next *answerer.Answerer
		for i, off := 0, s.intn(answerers); i < answerers; i++ {
			j := (off + i) % answerers
			if !voted[serviceAccountUser(s.w.namespace, answererName(j))] {
				next = s.w.answerers[j]
				break
			}
		}
		if next == nil {
			return last
		}
		last = s.replyOnce(ctx, next, question)
	}
	return last
}

// replyOnce replies once, retrying the calls that failed without reaching
// the API server (nothing was created), and records the outcome.
func (s *scenario) replyOnce(ctx context.Context, a *answerer.Answerer, question string) replyView {
	batch := s.batch()
	for attempt := 0; ; attempt++ {
		v := replyView{Question: question, Sent: time.Now()}
		out, err := a.Reply(ctx, question, batch)
		v.Reply, v.Outcome, v.Reason = out.Reply, out.Outcome, out.Reason
		if err != nil {
			v.Err = err.Error()
		}
		s.w.op("reply", err)
		if err != nil && validation.CodeOf(err) == "" && attempt < 8 && ctx.Err() == nil && out.Reply == "" && refusedToConnect(err) {
			sleep(ctx, time.Second)
			continue
		}
		s.w.mu.Lock()
		s.w.v.Replies = append(s.w.v.Replies, v)
		s.w.mu.Unlock()
		return v
	}
}

// refusedToConnect is true for errors of a request that never reached an
// API server (it was down), so that retrying cannot create a duplicate.
func refusedToConnect(err error) bool {
	return strings.Contains(err.Error(), "connection refused")
}

func (s *scenario) replyAfter(ctx context.Context, question string, d time.Duration) {
	sleep(ctx, d)
	if s.waitFor(ctx, question) {
		s.reply(ctx, s.answerer(), question)
	}
}

// waitFor waits until the question exists: the agent creates it
// concurrently, and the API server may be down. It gives up after 30 s
// (the ask failed).
func (s *scenario) waitFor(ctx context.Context, question string) bool {
	for end := time.Now().Add(30 * time.Second); ctx.Err() == nil && time.Now().Before(end); {
		var q hitlv1.UserQuestion
		err := s.w.reader.Get(ctx, client.ObjectKey{Namespace: s.w.namespace, Name: question}, &q)
		if err == nil {
			return true
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return false
}

// late answers a Continued question: the reply is queued; then the agent
// admits it (late-admit), or the answerer withdraws it and replies again
// before the agent admits (late-withdraw), or a second reply races in and
// must be refused with REPLY_QUEUED (late-second-reply).
func (s *scenario) late(ctx context.Context, ag *agent.Agent, question, kind string) {
	sleep(ctx, s.dur(100*time.Millisecond, 2*time.Second))
	first := s.reply(ctx, s.answerer(), question)
	if first.Outcome != hitlv1.OutcomeQueued {
		return
	}
	queued := first.Reply
	switch kind {
	case "late-withdraw":
		a := s.answerer()
		err := a.Withdraw(ctx, queued)
		s.w.op("withdraw", err)
		if err != nil {
			return
		}
		s.w.mu.Lock()
		s.w.v.Withdrawn = append(s.w.v.Withdrawn, queued)
		s.w.mu.Unlock()
		again := s.reply(ctx, a, question)
		if again.Outcome != hitlv1.OutcomeQueued {
			return
		}
		queued = again.Reply
	case "late-second-reply":
		s.replyOnce(ctx, s.answerer(), question)
	}
	sleep(ctx, s.dur(0, 2*time.Second))
	res, err := ag.Admit(ctx, question, queued)
	v := admitView{Question: question, Reply: queued, Answers: res.Answers}
	if err != nil {
		v.Err = err.Error()
	}
	s.w.mu.Lock()
	s.w.v.Admits = append(s.w.v.Admits, v)
	s.w.mu.Unlock()
	s.w.op("admit", err)
}

// claim claims the question as soon as it exists, holds the claim past
// the question's deadline, and then replies (reply) or drops it.
func (s *scenario) claim(ctx context.Context, question string, reply bool) {
	if !s.waitFor(ctx, question) {
		return
	}
	a := s.answerer()
	c, err := a.Claim(ctx, question, s.dur(5*time.Second, 10*time.Second))
	s.w.op("claim", err)
	if err != nil {
		return
	}
	sleep(ctx, s.dur(3*time.Second, 8*time.Second))
	if reply {
		s.reply(ctx, a, question)
	}
	err = c.Close()
	s.w.op("release", err)
}

// race sends n replies to the question at the same moment, from different
// answerers: one may win, the others must be refused.
func (s *scenario) race(ctx context.Context, question string, n int, after time.Duration) {
	sleep(ctx, after)
	if !s.waitFor(ctx, question) {
		return
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	base := s.intn(len(s.w.answerers))
	// On a governed question, the first two racers are sometimes one
	// identity: both pass the SDK's check (no vote yet), and the
	// controller counts one and refuses the other, DUPLICATE_VOTE.
	same := s.governed && s.intn(3) == 0
	results := make([]replyView, n)
	for i := range n {
		k := i
		if same && i == 1 {
			k = 0
		}
		a := s.w.answerers[(base+k)%len(s.w.answerers)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = s.replyOnce(ctx, a, question)
		}()
	}
	close(start)
	wg.Wait()
	if s.governed {
		// The race may leave the question undecided (one vote counted,
		// the others refused): the votes it still needs follow.
		for _, r := range results {
			if r.Outcome == hitlv1.OutcomeCounted {
				s.complete(ctx, question, r)
				return
			}
		}
	}
}
