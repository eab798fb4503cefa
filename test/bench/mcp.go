// The MCP workloads: ask latency through kubectl hitl mcp and the Go SDK,
// and blocking MCP asks held open, each a chain of calls that return still
// waiting after a short max wait.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
	"github.com/hitl-dev/hitl/pkg/agent"
	"github.com/hitl-dev/hitl/test/testenv"
)

// The MCP workloads' agents: the responder answers every question of
// instantAgent (the MCP asks) and instantSDKAgent (the Go SDK's) as soon as
// the watch sees it; heldAgent's are never answered. The two paths ask as
// two agents, so that kubectl-hitl's watch of its agent's questions
// carries its own asks only, as the Go SDK's watch of its question does.
const (
	instantAgent    = "instant"
	instantSDKAgent = "instant-sdk"
	heldAgent       = "held"
)

// mcpRounds is how many rounds of MCPAsks interleaved asks of each path
// the latency workload runs: the target is judged on the median of the
// rounds' p99 ratios, since one round's p99 (its slowest ask or two) is
// mostly the noise of the machine.
const mcpRounds = 5

// askQuestions is the ask of both paths, the one the settle workloads ask
// (id q, options yes and no: answer() selects yes).
func askQuestions() []hitlv1.Question {
	return []hitlv1.Question{{ID: "q", Question: "Proceed?", Options: []hitlv1.QuestionOption{{Label: "yes"}, {Label: "no"}}}}
}

func askArgs() map[string]any {
	return map[string]any{"questions": []any{map[string]any{
		"id": "q", "question": "Proceed?", "options": []any{map[string]any{"label": "yes"}, map[string]any{"label": "no"}},
	}}}
}

// adminKubeconfig writes, once, a kubeconfig of an administrator (a client
// certificate in system:masters) for kubectl-hitl.
func (b *bench) adminKubeconfig() (string, error) {
	if b.adminKube != "" {
		return b.adminKube, nil
	}
	u, err := b.env.AddUser(envtest.User{Name: "bench-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	data, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("hitl-bench-admin-%d.kubeconfig", os.Getpid()))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	b.adminKube = path
	return path, nil
}

// mcpSession starts `kubectl-hitl mcp -n bench --agent agent args...`, the
// real binary, and connects the SDK's client to it over stdio.
func (b *bench) mcpSession(ctx context.Context, agentName string, args ...string) (*mcp.ClientSession, *exec.Cmd, *testenv.Output, error) {
	kubeconfig, err := b.adminKubeconfig()
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.Command(b.pluginBin, append([]string{"mcp", "-n", ns, "--agent", agentName, "--kubeconfig", kubeconfig}, args...)...)
	stderr := &testenv.Output{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("starting %s mcp: %w (stderr: %s)", b.pluginBin, err, stderr)
	}
	return cs, cmd, stderr, nil
}

// respondAtOnce has the answerer reply to every question of instantAgent
// and instantSDKAgent as soon as the agents' watch sees it, as settle
// replies right after asking; it returns when the watch saw each question
// (by name), and the function that stops it.
func (b *bench) respondAtOnce(ctx context.Context) (seen *sync.Map, stop func()) {
	seen = &sync.Map{}
	b.obs.respond(func(q *hitlv1.UserQuestion) {
		if q.Spec.Agent != instantAgent && q.Spec.Agent != instantSDKAgent || q.Status.State != "" && q.Status.State != hitlv1.StateOpen {
			return
		}
		seen.LoadOrStore(q.Name, time.Now())
		q = q.DeepCopy()
		go func() {
			if err := b.c.Create(ctx, answer(q)); err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "bench: answering %s: %v\n", q.Name, err)
			}
		}()
	})
	return seen, func() { b.obs.respond(nil) }
}

// callTool calls a tool, and returns an error for a tool error too.
func callTool(ctx context.Context, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, err
	}
	if res.IsError {
		msg := "tool error"
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				msg = t.Text
			}
		}
		return nil, fmt.Errorf("%s: %s", name, msg)
	}
	return res, nil
}

// askResult is the structured result of ask_user_question or
// wait_for_answer.
func askResult(res *mcp.CallToolResult) (hitlmcp.AskResult, error) {
	var out hitlmcp.AskResult
	data, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	return out, err
}

// mcpLatency asks, in each of mcpRounds rounds, MCPAsks questions
// through the MCP client and kubectl-hitl mcp, and as many through
// pkg/agent's Ask, one at a time and interleaved in pairs (which path goes
// first alternates), each answered at once; each ask is timed from the
// call until the answer is returned. The figures of the first round are
// those the workload has always reported; the target is judged on the
// median of the rounds' p99 ratios, and the pairs' median ratio and the
// p99 over every round are reported beside it, with each ask's three
// parts as the bench's watch sees them: from the call to the question
// seen (the path's request and the create), from that to the question
// seen Settled (the answering, the same for both paths), and from that to
// the call returning the answer (the path's own way back). The first and
// the last are the path's own; the answering, in the middle, is where most
// of the machine's noise lands, on both paths alike.
func (b *bench) mcpLatency(ctx context.Context) error {
	added, stop := b.respondAtOnce(ctx)
	defer stop()
	cs, _, stderr, err := b.mcpSession(ctx, instantAgent)
	if err != nil {
		return err
	}
	defer func() { _ = cs.Close() }()
	sdk := agent.New(b.c, ns, instantSDKAgent)
	type asked struct {
		took       time.Duration
		name       string
		start, end time.Time
	}
	viaMCP := func() (asked, error) {
		start := time.Now()
		res, err := callTool(ctx, cs, "ask_user_question", askArgs())
		end := time.Now()
		if err != nil {
			return asked{}, fmt.Errorf("%w (stderr: %s)", err, stderr)
		}
		r, err := askResult(res)
		if err != nil {
			return asked{}, err
		}
		if r.Pending || r.Waiting || len(r.Answers) != 1 {
			return asked{}, fmt.Errorf("ask_user_question returned %+v", r)
		}
		return asked{end.Sub(start), r.Question, start, end}, nil
	}
	viaSDK := func() (asked, error) {
		start := time.Now()
		r, err := sdk.Ask(ctx, agent.Request{Questions: askQuestions()})
		end := time.Now()
		if err != nil {
			return asked{}, err
		}
		if r.Pending || len(r.Answers) != 1 {
			return asked{}, fmt.Errorf("the Go SDK's ask returned %+v", r)
		}
		return asked{end.Sub(start), r.Question, start, end}, nil
	}
	// One of each first, not counted: the session's and the clients' first
	// requests (discovery, connections), and kubectl-hitl's watch of the
	// agent's questions, which its later calls share.
	if _, err := viaMCP(); err != nil {
		return err
	}
	if _, err := viaSDK(); err != nil {
		return err
	}
	var allMCP, allSDK []asked
	var roundRatios, pairRatios []float64
	for ri := range mcpRounds {
		var mcpTimes, sdkTimes []time.Duration
		for i := range b.s.MCPAsks {
			var m, s asked
			if i%2 == 0 {
				if m, err = viaMCP(); err == nil {
					s, err = viaSDK()
				}
			} else {
				if s, err = viaSDK(); err == nil {
					m, err = viaMCP()
				}
			}
			if err != nil {
				return err
			}
			mcpTimes, sdkTimes = append(mcpTimes, m.took), append(sdkTimes, s.took)
			allMCP, allSDK = append(allMCP, m), append(allSDK, s)
			pairRatios = append(pairRatios, float64(m.took)/float64(s.took))
		}
		mp50, mp99, _ := percentiles(mcpTimes)
		sp50, sp99, _ := percentiles(sdkTimes)
		ratio := float64(mp99) / float64(sp99)
		roundRatios = append(roundRatios, ratio)
		b.r.set(fmt.Sprintf("mcp: ask p99, MCP / Go SDK, round %d", ri+1), ratio)
		if ri == 0 {
			label := fmt.Sprintf("ask answered at once, %d asks", b.s.MCPAsks)
			b.r.set("mcp: "+label+", MCP stdio ms p50", ms(mp50))
			b.r.set("mcp: "+label+", MCP stdio ms p99", ms(mp99))
			b.r.set("mcp: "+label+", Go SDK ms p50", ms(sp50))
			b.r.set("mcp: "+label+", Go SDK ms p99", ms(sp99))
			b.r.set("mcp: ask p99, MCP / Go SDK", ratio)
		}
	}
	median := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	took := func(a []asked) []time.Duration {
		out := make([]time.Duration, 0, len(a))
		for _, x := range a {
			out = append(out, x.took)
		}
		return out
	}
	// Each ask's parts, as the bench's watch saw its question: created,
	// then Settled (the call may return before the watch saw either).
	type parts struct{ toSeen, answering, back, own []time.Duration }
	split := func(a []asked) (parts, error) {
		var p parts
		for _, x := range a {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			settled, err := b.obs.wait(wctx, x.name, hitlv1.StateSettled)
			cancel()
			if err != nil {
				return p, fmt.Errorf("the bench's watch never saw %s settled: %w", x.name, err)
			}
			v, ok := added.Load(x.name)
			if !ok {
				return p, fmt.Errorf("the bench's watch never saw %s asked", x.name)
			}
			seen := v.(time.Time)
			p.toSeen = append(p.toSeen, seen.Sub(x.start))
			p.answering = append(p.answering, settled.Sub(seen))
			p.back = append(p.back, x.end.Sub(settled))
			p.own = append(p.own, seen.Sub(x.start)+x.end.Sub(settled))
		}
		return p, nil
	}
	mcpParts, err := split(allMCP)
	if err != nil {
		return err
	}
	sdkParts, err := split(allSDK)
	if err != nil {
		return err
	}
	all := fmt.Sprintf("ask answered at once, %d rounds of %d asks", mcpRounds, b.s.MCPAsks)
	mp50, mp99, _ := percentiles(took(allMCP))
	sp50, sp99, _ := percentiles(took(allSDK))
	b.r.set("mcp: "+all+", MCP stdio ms p50", ms(mp50))
	b.r.set("mcp: "+all+", MCP stdio ms p99", ms(mp99))
	b.r.set("mcp: "+all+", Go SDK ms p50", ms(sp50))
	b.r.set("mcp: "+all+", Go SDK ms p99", ms(sp99))
	b.r.set(fmt.Sprintf("mcp: ask p99 over %d rounds, MCP / Go SDK", mcpRounds), float64(mp99)/float64(sp99))
	medianRatio := median(roundRatios)
	b.r.set(fmt.Sprintf("mcp: ask p99, MCP / Go SDK, median of %d rounds", mcpRounds), medianRatio)
	b.r.set(fmt.Sprintf("mcp: ask, MCP / Go SDK, median of %d interleaved pairs", len(pairRatios)), median(pairRatios))
	for _, part := range []struct {
		name     string
		mcp, sdk []time.Duration
	}{
		{"part: asked to seen", mcpParts.toSeen, sdkParts.toSeen},
		{"part: seen to settled seen", mcpParts.answering, sdkParts.answering},
		{"part: settled seen to returned", mcpParts.back, sdkParts.back},
		{"part: the path's own (asked to seen, settled seen to returned)", mcpParts.own, sdkParts.own},
	} {
		p50, p99, _ := percentiles(part.mcp)
		b.r.set("mcp: "+all+", "+part.name+", MCP stdio ms p50", ms(p50))
		b.r.set("mcp: "+all+", "+part.name+", MCP stdio ms p99", ms(p99))
		p50, p99, _ = percentiles(part.sdk)
		b.r.set("mcp: "+all+", "+part.name+", Go SDK ms p50", ms(p50))
		b.r.set("mcp: "+all+", "+part.name+", Go SDK ms p99", ms(p99))
	}
	_, ownMCP, _ := percentiles(mcpParts.own)
	_, ownSDK, _ := percentiles(sdkParts.own)
	b.r.set("mcp: "+all+", the path's own part p99, MCP / Go SDK", float64(ownMCP)/float64(ownSDK))
	rounds := make([]string, 0, len(roundRatios))
	for _, r := range roundRatios {
		rounds = append(rounds, fmt.Sprintf("%.2f", r))
	}
	b.r.check("MCP ask p99 vs Go SDK p99", fmt.Sprintf("<= 1.20 x, median of %d rounds", mcpRounds),
		fmt.Sprintf("%.2f x (rounds %s; all %d asks %.2f x, %.1f/%.1fms)", medianRatio, strings.Join(rounds, " "), len(allMCP),
			float64(mp99)/float64(sp99), ms(mp99), ms(sp99)), medianRatio <= 1.2)
	return nil
}

// heldMaxWait is the max wait of the held calls' server: short, so that
// every call returns still waiting and goes on with wait_for_answer several
// times while the workload holds it (the chunked waiting of issue 34),
// instead of once per 50 s.
const heldMaxWait = 10 * time.Second

// heldFor is how long the calls are held once every question exists: each
// call goes on with wait_for_answer at least twice in it.
const heldFor = 3 * heldMaxWait

// mcpHeld holds MCPHeld blocking asks open at once in one stdio session of
// kubectl-hitl mcp --max-wait heldMaxWait: each is an ask_user_question
// that returns still waiting after the max wait, then wait_for_answer
// calls, one after the other, as a client on a request timeout does. Once
// every question exists it holds them heldFor. It reads the process's RSS
// all along and reports the highest, and the highest before any call went
// on (what the single read of the workload before the max wait measured).
// Then it cancels the calls (their questions stay open, as a cancelled call
// leaves them) and ends the session.
func (b *bench) mcpHeld(ctx context.Context) error {
	n := b.s.MCPHeld
	cs, cmd, stderr, err := b.mcpSession(ctx, heldAgent, "--max-waits", fmt.Sprint(n+100), "--max-wait", heldMaxWait.String())
	if err != nil {
		return err
	}
	defer func() { _ = cs.Close() }()
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var early atomic.Int64 // asks that ended before they were cancelled
	var firstErr atomic.Value
	continued := make([]atomic.Int64, n) // each ask's wait_for_answer calls
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := holdAsk(callCtx, cs, &continued[i])
			if callCtx.Err() == nil {
				early.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Sprint(err))
			}
		}()
	}
	// The process's RSS, read from the first ask to the end of the hold:
	// the highest before any call went on with wait_for_answer, and the
	// highest in all.
	wentOn := func() (total, least int64) {
		least = -1
		for i := range continued {
			c := continued[i].Load()
			total += c
			if least < 0 || c < least {
				least = c
			}
		}
		return total, least
	}
	var beforeChunks, peak int64
	sample := func() error {
		total, _ := wentOn()
		rss, err := rssBytes(cmd.Process.Pid)
		if err != nil {
			return err
		}
		if total == 0 {
			beforeChunks = max(beforeChunks, rss)
		}
		peak = max(peak, rss)
		return nil
	}
	for {
		if err := sample(); err != nil {
			return err
		}
		var list hitlv1.UserQuestionList
		if err := b.c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{hitlv1.AgentLabel: heldAgent}); err != nil {
			return err
		}
		if len(list.Items) >= n {
			break
		}
		if early.Load() > 0 {
			return fmt.Errorf("%d of %d asks ended while they should wait (first: %v; stderr: %s)", early.Load(), n, firstErr.Load(), stderr)
		}
		if time.Since(start) > 3*time.Minute {
			return fmt.Errorf("only %d of %d questions asked after 3m (stderr: %s)", len(list.Items), n, stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	allAsked := time.Since(start)
	// Held for heldFor, across the max waits' ends, when every call
	// returns and the next one starts.
	for held := time.Now(); time.Since(held) < heldFor; time.Sleep(200 * time.Millisecond) {
		if err := sample(); err != nil {
			return err
		}
	}
	waiting := int64(n) - early.Load()
	total, least := wentOn()
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	b.r.set(fmt.Sprintf("mcp: %d blocking calls, s until every question existed", n), allAsked.Seconds())
	b.r.set(fmt.Sprintf("mcp: %d blocking calls, calls still waiting", n), float64(waiting))
	b.r.set(fmt.Sprintf("mcp: %d blocking calls, max wait s", n), heldMaxWait.Seconds())
	b.r.set(fmt.Sprintf("mcp: %d blocking calls, wait_for_answer calls", n), float64(total))
	b.r.set(fmt.Sprintf("mcp: %d blocking calls, wait_for_answer calls per ask, fewest", n), float64(least))
	b.r.set(fmt.Sprintf("mcp: %d blocking calls, kubectl-hitl RSS MiB before the first max wait", n), mib(beforeChunks))
	b.r.set(fmt.Sprintf("mcp: %d blocking calls, kubectl-hitl RSS MiB", n), mib(peak))
	b.r.check(fmt.Sprintf("kubectl-hitl mcp RSS, %d calls waiting", n), "<= 150MiB",
		fmt.Sprintf("%.0fMiB (%d waiting, each went on %d+ times)", mib(peak), waiting, least),
		peak <= 150<<20 && waiting == int64(n) && least >= 1)
	if early.Load() > 0 {
		fmt.Fprintf(os.Stderr, "bench: %d of %d asks ended while they should wait (first: %v)\n", early.Load(), n, firstErr.Load())
	}

	// Cancel every call: the client sends notifications/cancelled, and the
	// server leaves the questions open.
	cancel()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("the cancelled calls did not return within 2m")
	}
	// Closing stdin ends the session, with no call waiting: kubectl-hitl
	// exits once its handlers have returned, or is killed by the
	// CommandTransport after its grace.
	closed := time.Now()
	if err := cs.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: closing the MCP session after %s: %v\n", time.Since(closed).Round(time.Millisecond), err)
	}
	return nil // runAll deletes the questions and waits for the manager to be quiet
}

// holdAsk asks a question nobody answers and waits for it as a client
// whose calls must end before its request timeout does: ask_user_question,
// then wait_for_answer again each time a call returns still waiting,
// counting those in continued. It returns when ctx ends (the error of the
// cancelled call), or with what ended the wait otherwise: an error, or a
// result that is not waiting.
func holdAsk(ctx context.Context, cs *mcp.ClientSession, continued *atomic.Int64) error {
	res, err := callTool(ctx, cs, "ask_user_question", askArgs())
	for err == nil {
		var r hitlmcp.AskResult
		if r, err = askResult(res); err != nil {
			return err
		}
		if !r.Waiting {
			return fmt.Errorf("a call returned %+v, not waiting", r)
		}
		continued.Add(1)
		res, err = callTool(ctx, cs, "wait_for_answer", hitlmcp.WaitArgs{CallID: r.CallID, Question: r.Question})
	}
	return err
}
