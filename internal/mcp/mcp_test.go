package mcp_test

import (
	"context"
	"encoding/json"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
)

func TestToolsAndSchemas(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{}, nil)
	tools, err := cs.ListTools(e.ctx, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]*mcp.Tool{}
	for _, tool := range tools.Tools {
		byName[tool.Name] = tool
	}
	e.g.Expect(byName).To(HaveLen(6))
	e.g.Expect(byName).To(HaveKey("ask_user_question"))
	for _, name := range []string{"wait_for_answer", "list_questions", "get_queued_replies", "admit_reply", "cancel_question"} {
		e.g.Expect(byName).To(HaveKey(name))
		e.g.Expect(byName[name].OutputSchema).NotTo(BeNil(), name)
	}
	data, err := json.Marshal(byName["ask_user_question"].InputSchema)
	e.g.Expect(err).NotTo(HaveOccurred())
	var schema struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type  string `json:"type"`
			Items struct {
				Required   []string       `json:"required"`
				Properties map[string]any `json:"properties"`
			} `json:"items"`
		} `json:"properties"`
	}
	e.g.Expect(json.Unmarshal(data, &schema)).To(Succeed())
	e.g.Expect(schema.Required).To(ConsistOf("questions"))
	e.g.Expect(schema.Properties).To(HaveKey("timeout"))
	e.g.Expect(schema.Properties).To(HaveKey("callID"))
	q := schema.Properties["questions"]
	e.g.Expect(q.Type).To(Equal("array"))
	e.g.Expect(q.Items.Required).To(ConsistOf("id", "question"))
	e.g.Expect(q.Items.Properties).To(HaveKey("options"))
	e.g.Expect(q.Items.Properties).To(HaveKey("multiSelect"))
	e.g.Expect(q.Items.Properties).To(HaveKey("intent"))
}

func TestAskAnsweredInWindow(t *testing.T) {
	e := newEnv(t)
	var progress atomic.Int32
	cs, srv := e.session(e.adminAs("bot"), hitlmcp.Options{ProgressInterval: 50 * time.Millisecond}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if req.Params.ProgressToken == "tok-1" {
				progress.Add(1)
			}
		},
	})
	params := &mcp.CallToolParams{Name: "ask_user_question", Arguments: func() map[string]any {
		a := whereArgs("")
		a["callID"] = "call-1"
		return a
	}()}
	params.SetProgressToken("tok-1")
	done := e.async(cs, e.ctx, params)

	q := e.asked("bot")
	e.g.Expect(q.Spec.CallID).To(Equal("call-1"))
	e.g.Expect(q.Spec.Timeout).To(BeNil(), "no timeout: a blocking ask")
	e.g.Expect(q.Spec.Questions[0].Options).To(HaveLen(2))
	// The call waits, and says so.
	e.g.Eventually(progress.Load).Should(BeNumerically(">=", 2))
	e.g.Expect(srv.Waits("admin")).To(Equal(1))
	e.g.Consistently(done, 100*time.Millisecond).ShouldNot(Receive())

	e.answer(q.Name, "r1", "prod")
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred())
	res := structured[hitlmcp.AskResult](e.g, got.res)
	e.g.Expect(res).To(Equal(hitlmcp.AskResult{Question: q.Name, CallID: "call-1",
		Answers: []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}}))
	e.g.Expect(text(got.res)).To(ContainSubstring("env (Where to deploy?): prod"))
	e.g.Expect(srv.Waits("admin")).To(Equal(0), "the wait is released")

	// list_questions shows it settled, in window.
	list := structured[hitlmcp.ListResult](e.g, e.call(cs, e.ctx, "list_questions", nil))
	e.g.Expect(list.Active).To(BeEmpty())
	e.g.Expect(list.Settled).To(HaveLen(1))
	e.g.Expect(list.Settled[0].Question).To(Equal(q.Name))
	e.g.Expect(list.Settled[0].Late).To(BeFalse())
	e.g.Expect(list.Settled[0].Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}))
}

func TestPendingLateReplyAdmitted(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{}, nil)

	start := time.Now()
	res := structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "ask_user_question", whereArgs("1s")))
	e.g.Expect(time.Since(start)).To(BeNumerically(">=", time.Second), "the window is never shorter than the timeout")
	e.g.Expect(res.Pending).To(BeTrue())
	e.g.Expect(res.Answers).To(BeEmpty())
	e.g.Expect(res.CallID).To(Equal(res.Question), "without a callID, the question's name")
	e.g.Expect(e.state(res.Question)()).To(Equal(hitlv1.StateContinued))

	list := structured[hitlmcp.ListResult](e.g, e.call(cs, e.ctx, "list_questions", nil))
	e.g.Expect(list.Active).To(HaveLen(1))
	e.g.Expect(list.Active[0].State).To(Equal("Continued"))
	e.g.Expect(list.Active[0].Questions[0].ID).To(Equal("env"))

	// Nothing queued yet.
	queued := structured[hitlmcp.QueuedResult](e.g, e.call(cs, e.ctx, "get_queued_replies", map[string]any{}))
	e.g.Expect(queued.Replies).To(BeEmpty())

	e.answer(res.Question, "late-1", "staging")
	e.g.Eventually(e.queuedReply(res.Question)).Should(Equal("late-1"))
	queued = structured[hitlmcp.QueuedResult](e.g, e.call(cs, e.ctx, "get_queued_replies", nil))
	e.g.Expect(queued.Replies).To(HaveLen(1))
	r := queued.Replies[0]
	e.g.Expect(r.Question).To(Equal(res.Question))
	e.g.Expect(r.Reply).To(Equal("late-1"))
	e.g.Expect(r.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}}))
	e.g.Expect(r.AnsweredBy).NotTo(BeEmpty())
	e.g.Expect(r.QueuedAt).NotTo(BeEmpty())

	admitted := structured[hitlmcp.AdmitResult](e.g, e.call(cs, e.ctx, "admit_reply", map[string]any{"question": res.Question, "reply": "late-1"}))
	e.g.Expect(admitted).To(Equal(hitlmcp.AdmitResult{Question: res.Question, CallID: res.CallID,
		Answers: []hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}}}))
	e.g.Expect(e.state(res.Question)()).To(Equal(hitlv1.StateSettled))

	list = structured[hitlmcp.ListResult](e.g, e.call(cs, e.ctx, "list_questions", nil))
	e.g.Expect(list.Active).To(BeEmpty())
	e.g.Expect(list.Settled).To(HaveLen(1))
	e.g.Expect(list.Settled[0].Late).To(BeTrue())

	// The queue is empty again, and the reply cannot be admitted elsewhere.
	queued = structured[hitlmcp.QueuedResult](e.g, e.call(cs, e.ctx, "get_queued_replies", nil))
	e.g.Expect(queued.Replies).To(BeEmpty())
	toolError(e.g, e.call(cs, e.ctx, "admit_reply", map[string]any{"question": "nope", "reply": "late-1"}), string(hitlv1.CodeNotAnswerable), "nope")
}

func TestCancelByTool(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{}, nil)
	done := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("")})
	q := e.asked("bot")

	res := structured[hitlmcp.CancelResult](e.g, e.call(cs, e.ctx, "cancel_question", map[string]any{"question": q.Name}))
	e.g.Expect(res).To(Equal(hitlmcp.CancelResult{Question: q.Name, Cancelled: true}))
	e.g.Eventually(e.state(q.Name)).Should(Equal(hitlv1.StateCancelled))

	// The waiting ask returns ASK_ABORTED.
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred())
	toolError(e.g, got.res, string(hitlv1.CodeAskAborted), q.Name)

	// A question that is gone, or settled, cannot be cancelled.
	toolError(e.g, e.call(cs, e.ctx, "cancel_question", map[string]any{"question": "missing"}), string(hitlv1.CodeNotAnswerable), "missing")
	settled := structured[hitlmcp.AskResult](e.g, func() *mcp.CallToolResult {
		done := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("1m")})
		var q2 *hitlv1.UserQuestion
		e.g.Eventually(func() bool {
			list := structured[hitlmcp.ListResult](e.g, e.call(cs, e.ctx, "list_questions", nil))
			if len(list.Active) == 1 {
				q2 = &hitlv1.UserQuestion{}
				q2.Name = list.Active[0].Question
			}
			return q2 != nil
		}).Should(BeTrue())
		e.answer(q2.Name, "r2", "prod")
		var got called
		e.g.Eventually(done).Should(Receive(&got))
		e.g.Expect(got.err).NotTo(HaveOccurred())
		return got.res
	}())
	toolError(e.g, e.call(cs, e.ctx, "cancel_question", map[string]any{"question": settled.Question}), string(hitlv1.CodeNotAnswerable), "Settled")
}

// A call the client cancels (notifications/cancelled, as the TypeScript
// SDK sends when its request timeout fires) stops waiting, and its question
// stays open: the agent takes the answer with wait_for_answer.
func TestCancelledCallLeavesQuestion(t *testing.T) {
	e := newEnv(t)
	cs, srv := e.session(e.adminAs("bot"), hitlmcp.Options{}, nil)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := e.async(cs, ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("10m")})
	q := e.asked("bot")
	e.g.Eventually(func() int { return srv.Waits("admin") }).Should(Equal(1))
	// The controller has opened it (on a loaded machine, not always by the
	// time the call waits).
	e.g.Eventually(e.state(q.Name)).Should(Equal(hitlv1.StateOpen))

	// The client cancels its call: notifications/cancelled.
	cancel()
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(got.err).To(HaveOccurred())
	e.g.Eventually(func() int { return srv.Waits("admin") }).Should(Equal(0), "the call returned")
	e.g.Consistently(e.state(q.Name), 500*time.Millisecond).Should(Equal(hitlv1.StateOpen))
	e.g.Expect(e.spec(q.Name)().Cancelled).To(BeFalse())

	// The agent goes on waiting, and a person's answer reaches it.
	wait := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "wait_for_answer", Arguments: map[string]any{"callID": q.CallID()}})
	e.g.Eventually(func() int { return srv.Waits("admin") }).Should(Equal(1))
	e.answer(q.Name, "r1", "prod")
	e.g.Eventually(wait).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred())
	e.g.Expect(structured[hitlmcp.AskResult](e.g, got.res)).To(Equal(hitlmcp.AskResult{Question: q.Name, CallID: q.Name,
		Answers: []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}}))
}

// A session that is the agent's process (stdio) ending while a call waits
// is the agent going away: the question is cancelled.
func TestCancelWhenClientGoes(t *testing.T) {
	e := newEnv(t)
	// A connection the test can cut, as a client process that dies does.
	serverEnd, clientEnd := net.Pipe()
	ss, err := hitlmcp.NewServer(e.adminAs("bot"), hitlmcp.Options{}).Connect(e.ctx, &mcp.IOTransport{Reader: serverEnd, Writer: serverEnd}, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(e.ctx, &mcp.IOTransport{Reader: clientEnd, Writer: clientEnd}, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	_ = e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("")})
	q := e.asked("bot")
	e.g.Consistently(e.state(q.Name), 200*time.Millisecond).ShouldNot(Equal(hitlv1.StateCancelled))

	e.g.Expect(clientEnd.Close()).To(Succeed())
	e.g.Eventually(e.state(q.Name)).Should(Equal(hitlv1.StateCancelled))
	e.g.Expect(ss.Wait()).To(Or(Succeed(), HaveOccurred()))
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{}, nil)
	question := func(extra map[string]any) map[string]any {
		q := map[string]any{"id": "env", "question": "Where?", "options": []any{map[string]any{"label": "a"}, map[string]any{"label": "b"}}}
		for k, v := range extra {
			q[k] = v
		}
		return q
	}
	approval := question(map[string]any{"intent": map[string]any{"type": "Approval", "approval": map[string]any{"approve": "a", "reject": "b"}}})
	for _, c := range []struct {
		name, tool  string
		args        any
		code, field string
	}{
		{"no questions", "ask_user_question", map[string]any{}, "EMPTY_QUESTIONS", "questions"},
		{"empty questions", "ask_user_question", map[string]any{"questions": []any{}}, "EMPTY_QUESTIONS", "questions"},
		{"negative timeout", "ask_user_question", map[string]any{"questions": []any{question(nil)}, "timeout": "-5s"}, "BAD_TIMEOUT", "timeout"},
		{"fractional milliseconds", "ask_user_question", map[string]any{"questions": []any{question(nil)}, "timeout": "1.5ms"}, "BAD_TIMEOUT", "timeout"},
		{"not a duration", "ask_user_question", map[string]any{"questions": []any{question(nil)}, "timeout": "soon"}, "BAD_TIMEOUT", "timeout"},
		{"timeout as a number", "ask_user_question", map[string]any{"questions": []any{question(nil)}, "timeout": 30}, "BAD_ARGUMENTS", "timeout"},
		{"questions as a string", "ask_user_question", map[string]any{"questions": "where?"}, "BAD_ARGUMENTS", "questions"},
		{"options as a string", "ask_user_question", map[string]any{"questions": []any{question(map[string]any{"options": "a,b"})}}, "BAD_ARGUMENTS", "questions[0].options"},
		{"multiSelect as a string", "ask_user_question", map[string]any{"questions": []any{question(map[string]any{"multiSelect": "yes"})}}, "BAD_ARGUMENTS", "questions[0].multiSelect"},
		{"unknown field", "ask_user_question", map[string]any{"questions": []any{question(nil)}, "agent": "other"}, "BAD_ARGUMENTS", "agent"},
		{"no id", "ask_user_question", map[string]any{"questions": []any{question(map[string]any{"id": ""})}}, "BAD_ARGUMENTS", "questions[0].id"},
		{"approval with a timeout", "ask_user_question", map[string]any{"questions": []any{approval}, "timeout": "1m"}, "BAD_INTENT", "timeout"},
		{"plan review without a plan", "ask_user_question", map[string]any{"questions": []any{question(map[string]any{"intent": map[string]any{"type": "PlanReview", "planReview": map[string]any{"approve": "a"}}})}}, "BAD_INTENT", "questions[0]"},
		{"admit without a reply", "admit_reply", map[string]any{"question": "q"}, "BAD_ARGUMENTS", "reply"},
		{"admit a missing question", "admit_reply", map[string]any{"question": "q", "reply": "r"}, "NOT_ANSWERABLE", "q"},
		{"cancel with a number", "cancel_question", map[string]any{"question": 7}, "BAD_ARGUMENTS", "question"},
		{"list with arguments", "list_questions", map[string]any{"all": true}, "BAD_ARGUMENTS", "all"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			res, err := cs.CallTool(e.ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			g.Expect(err).NotTo(HaveOccurred())
			toolError(g, res, c.code, c.field)
		})
	}
	// Arguments that are not even an object.
	res, err := cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: json.RawMessage(`[1,2]`)})
	e.g.Expect(err).NotTo(HaveOccurred())
	toolError(e.g, res, "BAD_ARGUMENTS", "arguments")
	// Nothing was asked, and the server still serves.
	list := structured[hitlmcp.ListResult](e.g, e.call(cs, e.ctx, "list_questions", nil))
	e.g.Expect(list.Active).To(BeEmpty())
	e.g.Expect(list.Settled).To(BeEmpty())
}

func TestAgentMismatch(t *testing.T) {
	e := newEnv(t)
	worker := e.clientFor(e.serviceAccount("worker"))
	as := func(agent string) hitlmcp.CallerFunc {
		return hitlmcp.Static(hitlmcp.Caller{Key: "worker", Client: worker, Namespace: e.ns, Agent: agent})
	}
	// The ServiceAccount may ask as itself...
	cs, _ := e.session(as("worker"), hitlmcp.Options{}, nil)
	res := structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "ask_user_question", whereArgs("1s")))
	e.g.Expect(res.Pending).To(BeTrue())

	// ...but not as another agent.
	cs, _ = e.session(as("bot"), hitlmcp.Options{}, nil)
	toolError(e.g, e.call(cs, e.ctx, "ask_user_question", whereArgs("")), string(hitlv1.CodeAgentMismatch), "agent")
	list := structured[hitlmcp.ListResult](e.g, e.call(cs, e.ctx, "list_questions", nil))
	e.g.Expect(list.Active).To(BeEmpty(), "nothing was asked as bot")
}

func TestWaitCapPerIdentity(t *testing.T) {
	e := newEnv(t)
	callers := func(_ context.Context, req *mcp.CallToolRequest) (*hitlmcp.Caller, error) {
		// Two identities, told apart by the client's name.
		key := req.Session.InitializeParams().ClientInfo.Name
		return &hitlmcp.Caller{Key: key, Client: e.admin, Namespace: e.ns, Agent: "bot"}, nil
	}
	srv := hitlmcp.New(callers, hitlmcp.Options{MaxWaits: 1})
	connect := func(name string) *mcp.ClientSession {
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.MCPServer().Connect(e.ctx, st, nil)
		e.g.Expect(err).NotTo(HaveOccurred())
		cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "v0"}, nil).Connect(e.ctx, ct, nil)
		e.g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
		return cs
	}
	alice, bob := connect("alice"), connect("bob")

	first := e.async(alice, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("")})
	q := e.asked("bot")
	e.g.Eventually(func() int { return srv.Waits("alice") }).Should(Equal(1))

	// A second wait of the same identity is refused at once, and asks nothing.
	toolError(e.g, e.call(alice, e.ctx, "ask_user_question", whereArgs("")), hitlmcp.CodeTooManyWaits, "alice")
	e.asked("bot")
	// Another identity is not held back.
	res := structured[hitlmcp.AskResult](e.g, e.call(bob, e.ctx, "ask_user_question", whereArgs("1s")))
	e.g.Expect(res.Pending).To(BeTrue())

	// Once the first wait returns, alice may wait again.
	e.answer(q.Name, "r1", "staging")
	var got called
	e.g.Eventually(first).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred())
	e.g.Expect(structured[hitlmcp.AskResult](e.g, got.res).Answers).To(HaveLen(1))
	e.g.Expect(srv.Waits("alice")).To(Equal(0))
	res = structured[hitlmcp.AskResult](e.g, e.call(alice, e.ctx, "ask_user_question", whereArgs("1s")))
	e.g.Expect(res.Pending).To(BeTrue())
}
