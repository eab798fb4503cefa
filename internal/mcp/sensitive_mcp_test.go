package mcp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
	"github.com/hitl-dev/hitl/pkg/sealed"
	. "github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

const secret = "the-secret"

// sealedReply is a reply to q that answers its sensitive question id with
// value, sealed to the question's key, as the inbox seals it.
func (e *env) sealedReply(name string, q *hitlv1.UserQuestion, id, value string) *hitlv1.QuestionReply {
	e.t.Helper()
	s, err := sealed.Seal(q.Spec.SealingKey, sealed.Binding{Namespace: q.Namespace, Question: q.Name, UID: string(q.UID), ID: id}, value)
	e.g.Expect(err).NotTo(HaveOccurred())
	r := Reply(name, e.ns, q.Name).Obj()
	r.Spec.Answers = []hitlv1.AnswerItem{{ID: id, Sealed: s}}
	return r
}

// heard is what a client was told besides its results: progress
// notifications.
type heard struct {
	mu       sync.Mutex
	messages []string
}

func (h *heard) add(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.messages = append(h.messages, s)
}

func (h *heard) all() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.messages, "\n")
}

// A sensitive question is asked sealed to the server's key; its answer,
// sealed by the answerer, comes back opened in the tool's result only
// (structuredContent and text), through wait_for_answer on another session
// of a server with the same key, and through admit_reply; it never reaches
// the server's log (the MCP SDK's included, at debug level), the default
// logger or a progress notification. A server with
// another key (a restart without --sealing-key-file) returns the answer
// still sealed, saying so, without failing the call.
func TestSensitiveAnswer(t *testing.T) {
	e := newEnv(t)
	key, err := sealed.NewKey()
	e.g.Expect(err).NotTo(HaveOccurred())
	logs := &testenv.Output{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	defaults := &testenv.Output{}
	previous := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(defaults, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(previous) })
	told := &heard{}
	copts := &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			told.add(req.Params.Message)
		},
	}
	opts := hitlmcp.Options{SealingKey: key, Logger: logger, MaxWait: 500 * time.Millisecond, ProgressInterval: 50 * time.Millisecond}
	cs, _ := e.session(e.adminAs("bot"), opts, copts)
	sch := e.schemas(cs)

	args := map[string]any{"callID": "secret-1", "questions": []any{map[string]any{
		"id": "token", "question": "Which API token may I use?", "sensitive": true, "input": map[string]any{"type": "string", "minLength": 8}}}}
	params := &mcp.CallToolParams{Name: "ask_user_question", Arguments: args}
	params.SetProgressToken("p-1")
	res, err := cs.CallTool(e.ctx, params)
	e.g.Expect(err).NotTo(HaveOccurred())
	sch.conforms(e.g, "ask_user_question", args, res)
	waiting := structured[hitlmcp.AskOutput](e.g, res)
	e.g.Expect(waiting.Waiting).To(BeTrue())

	q := e.asked("bot")
	e.g.Expect(q.Spec.SealingKey).To(Equal(key.PublicKey()), "sealed to the server's key")
	e.g.Expect(q.Spec.Questions[0].Sensitive).To(BeTrue())
	e.g.Expect(q.Spec.Questions[0].Input).To(Equal(&hitlv1.AnswerInput{Type: hitlv1.InputString, MinLength: ptr.To[int32](8)}))
	e.g.Expect(e.admin.Create(e.ctx, e.sealedReply("r1", q, "token", secret))).To(Succeed())
	e.g.Eventually(e.state(q.Name)).Should(Equal(hitlv1.StateSettled))
	stored := &hitlv1.UserQuestion{}
	e.g.Expect(e.admin.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: q.Name}, stored)).To(Succeed())
	data, err := json.Marshal(stored)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(string(data)).NotTo(ContainSubstring(secret), "the cluster holds only the ciphertext")

	// Another session, of another server with the same key (a restart
	// with --sealing-key-file), opens it.
	again, _ := e.session(e.adminAs("bot"), opts, copts)
	wargs := map[string]any{"callID": "secret-1", "question": q.Name}
	wparams := &mcp.CallToolParams{Name: "wait_for_answer", Arguments: wargs}
	wparams.SetProgressToken("p-2")
	res, err = again.CallTool(e.ctx, wparams)
	e.g.Expect(err).NotTo(HaveOccurred())
	sch.conforms(e.g, "wait_for_answer", wargs, res)
	answers := answersOf(e.g, res)
	e.g.Expect(answers["token"]).To(Equal(map[string]any{"id": "token", "custom": secret, "value": secret, "sensitive": true}))
	e.g.Expect(text(res)).To(ContainSubstring(`token (Which API token may I use?): "` + secret + `"`))

	// list_questions shows it sealed, never opened.
	list := e.call(cs, e.ctx, "list_questions", nil)
	data, err = json.Marshal(list)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(string(data)).NotTo(ContainSubstring(secret))
	e.g.Expect(text(list)).To(ContainSubstring("token: (sensitive answer, sealed)"))

	// A server with a key of its own (a restart without the key file)
	// cannot open it, and says so.
	other, _ := e.session(e.adminAs("bot"), hitlmcp.Options{Logger: logger}, copts)
	res = e.call(other, e.ctx, "wait_for_answer", wargs)
	sch.conforms(e.g, "wait_for_answer", wargs, res)
	unopened := answersOf(e.g, res)["token"]
	e.g.Expect(unopened).NotTo(HaveKey("value"))
	e.g.Expect(unopened).NotTo(HaveKey("custom"))
	e.g.Expect(unopened["sensitive"]).To(BeTrue())
	e.g.Expect(unopened["sealed"]).To(Equal(stored.Status.Answers[0].Sealed))
	e.g.Expect(text(res)).To(ContainSubstring("sealed to another key"))

	// A late sensitive answer, admitted.
	args = map[string]any{"timeout": "300ms", "questions": []any{map[string]any{"id": "otp", "question": "One-time code?", "sensitive": true,
		"input": map[string]any{"type": "integer"}}}}
	pending := structured[hitlmcp.AskOutput](e.g, e.call(cs, e.ctx, "ask_user_question", args))
	if pending.Waiting {
		pending = structured[hitlmcp.AskOutput](e.g, e.waitOn(cs, map[string]any{"callID": pending.CallID, "question": pending.Question}))
	}
	e.g.Expect(pending.Pending).To(BeTrue())
	late := &hitlv1.UserQuestion{}
	e.g.Expect(e.admin.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: pending.Question}, late)).To(Succeed())
	e.g.Expect(e.admin.Create(e.ctx, e.sealedReply("late", late, "otp", "123456"))).To(Succeed())
	e.g.Eventually(e.queuedReply(late.Name)).Should(Equal("late"))
	queued := e.call(cs, e.ctx, "get_queued_replies", nil)
	e.g.Expect(text(queued)).NotTo(ContainSubstring("123456"))
	aargs := map[string]any{"question": late.Name, "reply": "late"}
	res = e.call(cs, e.ctx, "admit_reply", aargs)
	sch.conforms(e.g, "admit_reply", aargs, res)
	e.g.Expect(answersOf(e.g, res)["otp"]).To(Equal(map[string]any{"id": "otp", "custom": "123456", "value": float64(123456), "sensitive": true}),
		"opened, and typed as its input says")

	// Not a word of either in a log line or a notification; the log was
	// written all along.
	e.g.Expect(logs.String()).To(ContainSubstring("Tool call"), "the server logs its calls")
	e.g.Expect(told.all()).To(ContainSubstring("waiting for a person"), "progress was sent")
	for _, where := range []struct{ name, text string }{{"the server's log", logs.String()}, {"the default log", defaults.String()}, {"the notifications", told.all()}} {
		e.g.Expect(where.text).NotTo(ContainSubstring(secret), where.name)
		e.g.Expect(where.text).NotTo(ContainSubstring("123456"), where.name)
	}
}
