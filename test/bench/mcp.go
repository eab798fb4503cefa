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
// instantAgent as soon as the watch sees it; heldAgent's are never answered.
const (
	instantAgent = "instant"
	heldAgent    = "held"
)

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

// respondAtOnce has the answerer reply to every question of instantAgent as
// soon as the agents' watch sees it, as settle replies right after asking;
// it returns the function that stops it.
func (b *bench) respondAtOnce(ctx context.Context) (stop func()) {
	b.obs.respond(func(q *hitlv1.UserQuestion) {
		if q.Spec.Agent != instantAgent || q.Status.State != "" && q.Status.State != hitlv1.StateOpen {
			return
		}
		q = q.DeepCopy()
		go func() {
			if err := b.c.Create(ctx, answer(q)); err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "bench: answering %s: %v\n", q.Name, err)
			}
		}()
	})
	return func() { b.obs.respond(nil) }
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

// mcpLatency asks MCPAsks questions through the MCP client and
// kubectl-hitl mcp, and as many through pkg/agent's Ask, one at a time and
// interleaved (which path goes first alternates), each answered at once;
// each ask is timed from the call until the answer is returned.
func (b *bench) mcpLatency(ctx context.Context) error {
	stop := b.respondAtOnce(ctx)
	defer stop()
	cs, _, stderr, err := b.mcpSession(ctx, instantAgent)
	if err != nil {
		return err
	}
	defer func() { _ = cs.Close() }()
	sdk := agent.New(b.c, ns, instantAgent)
	viaMCP := func() (time.Duration, error) {
		start := time.Now()
		res, err := callTool(ctx, cs, "ask_user_question", askArgs())
		took := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("%w (stderr: %s)", err, stderr)
		}
		r, err := askResult(res)
		if err != nil {
			return 0, err
		}
		if r.Pending || r.Waiting || len(r.Answers) != 1 {
			return 0, fmt.Errorf("ask_user_question returned %+v", r)
		}
		return took, nil
	}
	viaSDK := func() (time.Duration, error) {
		start := time.Now()
		r, err := sdk.Ask(ctx, agent.Request{Questions: askQuestions()})
		if err != nil {
			return 0, err
		}
		if r.Pending || len(r.Answers) != 1 {
			return 0, fmt.Errorf("the Go SDK's ask returned %+v", r)
		}
		return time.Since(start), nil
	}
	// One of each first, not counted: the session's and the clients' first
	// requests (discovery, connections).
	if _, err := viaMCP(); err != nil {
		return err
	}
	if _, err := viaSDK(); err != nil {
		return err
	}
	var mcpTimes, sdkTimes []time.Duration
	for i := range b.s.MCPAsks {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, m := range order {
			if m {
				d, err := viaMCP()
				if err != nil {
					return err
				}
				mcpTimes = append(mcpTimes, d)
			} else {
				d, err := viaSDK()
				if err != nil {
					return err
				}
				sdkTimes = append(sdkTimes, d)
			}
		}
	}
	mp50, mp99, _ := percentiles(mcpTimes)
	sp50, sp99, _ := percentiles(sdkTimes)
	label := fmt.Sprintf("ask answered at once, %d asks", b.s.MCPAsks)
	b.r.set("mcp: "+label+", MCP stdio ms p50", ms(mp50))
	b.r.set("mcp: "+label+", MCP stdio ms p99", ms(mp99))
	b.r.set("mcp: "+label+", Go SDK ms p50", ms(sp50))
	b.r.set("mcp: "+label+", Go SDK ms p99", ms(sp99))
	ratio := float64(mp99) / float64(sp99)
	b.r.set("mcp: ask p99, MCP / Go SDK", ratio)
	b.r.check("MCP ask p99 vs Go SDK p99", "<= 1.20 x", fmt.Sprintf("%.2f x (%.1f/%.1fms)", ratio, ms(mp99), ms(sp99)), ratio <= 1.2)
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
