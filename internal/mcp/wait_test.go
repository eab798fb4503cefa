package mcp_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
)

// A call waits at most the max wait, then says the question is still
// waiting and how to go on; wait_for_answer waits on, with progress, and
// returns the answer, then the same answer again at once.
func TestAskStillWaiting(t *testing.T) {
	e := newEnv(t)
	const maxWait = time.Second
	var progress atomic.Int32
	cs, srv := e.session(e.adminAs("bot"), hitlmcp.Options{MaxWait: maxWait, ProgressInterval: 50 * time.Millisecond}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if req.Params.ProgressToken == "tok-wait" {
				progress.Add(1)
			}
		},
	})
	args := whereArgs("")
	args["callID"] = "call-7"
	start := time.Now()
	res := e.call(cs, e.ctx, "ask_user_question", args)
	took := time.Since(start)
	e.g.Expect(took).To(BeNumerically(">=", maxWait), "the call waits its max wait")
	e.g.Expect(took).To(BeNumerically("<", maxWait+5*time.Second), "and no longer")
	q := e.asked("bot")
	e.g.Expect(structured[hitlmcp.AskResult](e.g, res)).To(Equal(hitlmcp.AskResult{Question: q.Name, CallID: "call-7", Waiting: true}))
	e.g.Expect(text(res)).To(HavePrefix("still waiting: nobody has answered question " + q.Name + " (callID call-7) yet"))
	e.g.Expect(text(res)).To(ContainSubstring(`call wait_for_answer with {"callID":"call-7","question":"` + q.Name + `"} (one call waits up to 1s)`))
	e.g.Expect(text(res)).To(ContainSubstring(`call cancel_question with {"question": "` + q.Name + `"}`))
	e.g.Expect(e.state(q.Name)()).To(Equal(hitlv1.StateOpen), "the question stays open")
	e.g.Expect(srv.Waits("admin")).To(BeZero(), "the call returned its wait")

	// Nobody answers during the next call either.
	res = e.call(cs, e.ctx, "wait_for_answer", map[string]any{"callID": "call-7", "question": q.Name})
	e.g.Expect(structured[hitlmcp.AskResult](e.g, res).Waiting).To(BeTrue())

	// A person answers during the third, which reports progress meanwhile.
	params := &mcp.CallToolParams{Name: "wait_for_answer", Arguments: map[string]any{"callID": "call-7"}}
	params.SetProgressToken("tok-wait")
	done := e.async(cs, e.ctx, params)
	e.g.Eventually(progress.Load).Should(BeNumerically(">=", 2))
	e.answer(q.Name, "r1", "prod")
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred())
	answered := hitlmcp.AskResult{Question: q.Name, CallID: "call-7", Answers: []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}}
	e.g.Expect(structured[hitlmcp.AskResult](e.g, got.res)).To(Equal(answered))
	e.g.Expect(text(got.res)).To(Equal("env (Where to deploy?): prod"))

	// Settled: the answer again, at once.
	start = time.Now()
	e.g.Expect(structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "wait_for_answer", map[string]any{"callID": "call-7"}))).To(Equal(answered))
	e.g.Expect(time.Since(start)).To(BeNumerically("<", maxWait))
}

// The ask's own timeout is the question's window, apart from the max wait
// of one call: an ask whose window outlasts the max wait returns still
// waiting, and wait_for_answer returns pending once the window closed.
func TestWaitForAnswerWindowCloses(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{MaxWait: time.Second}, nil)
	res := e.call(cs, e.ctx, "ask_user_question", whereArgs("3s"))
	waiting := structured[hitlmcp.AskResult](e.g, res)
	e.g.Expect(waiting.Waiting).To(BeTrue())
	e.g.Expect(text(res)).To(MatchRegexp(`Its 3s window closes at \S+Z; after that wait_for_answer returns pending\.`))

	var last hitlmcp.AskResult
	for i := 0; i < 10 && !last.Pending; i++ {
		last = structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "wait_for_answer", map[string]any{"callID": waiting.CallID}))
		e.g.Expect(last.Answers).To(BeEmpty())
	}
	e.g.Expect(last).To(Equal(hitlmcp.AskResult{Question: waiting.Question, CallID: waiting.CallID, Pending: true}))
	e.g.Expect(e.state(waiting.Question)()).To(Equal(hitlv1.StateContinued))
}

// cancel_question still cancels: a wait_for_answer in progress ends with
// ASK_ABORTED, and a later one says so at once.
func TestCancelQuestionEndsWait(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{MaxWait: 500 * time.Millisecond}, nil)
	waiting := structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "ask_user_question", whereArgs("")))
	e.g.Expect(waiting.Waiting).To(BeTrue())

	// A max wait long enough for the cancel to come first.
	cs2, _ := e.session(e.adminAs("bot"), hitlmcp.Options{}, nil)
	done := e.async(cs2, e.ctx, &mcp.CallToolParams{Name: "wait_for_answer", Arguments: map[string]any{"callID": waiting.CallID}})
	e.g.Consistently(done, 200*time.Millisecond).ShouldNot(Receive())
	structured[hitlmcp.CancelResult](e.g, e.call(cs, e.ctx, "cancel_question", map[string]any{"question": waiting.Question}))
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred())
	toolError(e.g, got.res, string(hitlv1.CodeAskAborted), waiting.Question)
	e.g.Eventually(e.state(waiting.Question)).Should(Equal(hitlv1.StateCancelled))
	toolError(e.g, e.call(cs, e.ctx, "wait_for_answer", map[string]any{"callID": waiting.CallID}), string(hitlv1.CodeAskAborted), "was cancelled")
}

func TestWaitForAnswerFindsTheCall(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{MaxWait: 300 * time.Millisecond}, nil)
	ask := func(callID string) hitlmcp.AskResult {
		args := whereArgs("")
		args["callID"] = callID
		res := structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "ask_user_question", args))
		e.g.Expect(res.Waiting).To(BeTrue())
		return res
	}
	first := ask("same")
	// Ask order has a resolution of one second.
	time.Sleep(1100 * time.Millisecond)
	second := ask("same")
	other := ask("other")
	e.answer(first.Question, "r1", "staging")
	e.g.Eventually(e.state(first.Question)).Should(Equal(hitlv1.StateSettled))

	// A callID alone is the newest question with it; with a name, that one.
	e.g.Expect(structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "wait_for_answer", map[string]any{"callID": "same"})).Question).To(Equal(second.Question))
	res := structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "wait_for_answer", map[string]any{"callID": "same", "question": first.Question}))
	e.g.Expect(res.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}}))

	for _, c := range []struct {
		name        string
		args        map[string]any
		code, field string
	}{
		{"no callID", map[string]any{"question": first.Question}, hitlmcp.CodeBadArguments, "(callID)"},
		{"an unknown callID", map[string]any{"callID": "never"}, hitlmcp.CodeUnknownCall, "no question with callID never"},
		{"an unknown question", map[string]any{"callID": "same", "question": "nope"}, hitlmcp.CodeUnknownCall, "no question nope"},
		{"another call's question", map[string]any{"callID": "same", "question": other.Question}, hitlmcp.CodeUnknownCall, "has callID other, not same"},
		{"an unknown argument", map[string]any{"callID": "same", "timeout": "1m"}, hitlmcp.CodeBadArguments, "timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			toolError(NewWithT(t), e.call(cs, e.ctx, "wait_for_answer", c.args), c.code, c.field)
		})
	}
	// Another agent's question is unknown to this one.
	botTwo, _ := e.session(e.adminAs("bot-two"), hitlmcp.Options{}, nil)
	toolError(e.g, e.call(botTwo, e.ctx, "wait_for_answer", map[string]any{"callID": "same"}), hitlmcp.CodeUnknownCall, "agent bot-two")
	toolError(e.g, e.call(botTwo, e.ctx, "wait_for_answer", map[string]any{"callID": "same", "question": first.Question}), hitlmcp.CodeUnknownCall, first.Question)
}
