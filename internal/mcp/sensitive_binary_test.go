package mcp_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
	"github.com/hitl-dev/hitl/test/testenv"
)

// TestHTTPBinarySealingKeyFile runs cmd/hitl-mcp with --sealing-key-file,
// logging everything (every tool call, the MCP SDK's log): it creates the
// key file (mode 0600) and seals a sensitive question to that key; another
// hitl-mcp process with the same file (a restart) opens the answer for
// wait_for_answer, while one without it (a key of its own) cannot; and no
// process's log holds the answer.
func TestHTTPBinarySealingKeyFile(t *testing.T) {
	e := newEnv(t)
	e.serviceAccount("vault-bot")
	keyFile := filepath.Join(t.TempDir(), "sealing.key")
	debug := []string{"--max-wait", "1s", "--zap-log-level", "debug"}
	base, first := e.httpBinary(http.DefaultClient, "http", append([]string{"--sealing-key-file", keyFile}, debug...)...)
	info, err := os.Stat(keyFile)
	e.g.Expect(err).NotTo(HaveOccurred(), "the key file is created")
	e.g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	e.g.Expect(first.String()).To(ContainSubstring("Created the sealing key"))

	token := e.mcpToken("vault-bot")
	cs := e.httpSession(base+"/mcp", token)
	args := map[string]any{"callID": "vault-1", "questions": []any{map[string]any{"id": "token", "question": "Which token?", "sensitive": true}}}
	waiting := structured[hitlmcp.AskOutput](e.g, e.call(cs, e.ctx, "ask_user_question", args))
	e.g.Expect(waiting.Waiting).To(BeTrue())
	q := e.asked("vault-bot")
	e.g.Expect(e.admin.Create(e.ctx, e.sealedReply("r1", q, "token", secret))).To(Succeed())
	e.g.Eventually(e.state(q.Name)).Should(Equal(hitlv1.StateSettled))

	// Another process with the same key file.
	base, second := e.httpBinary(http.DefaultClient, "http", append([]string{"--sealing-key-file", keyFile}, debug...)...)
	e.g.Expect(second.String()).NotTo(ContainSubstring("Created the sealing key"), "it reads the file")
	wargs := map[string]any{"callID": "vault-1", "question": q.Name}
	res := e.call(e.httpSession(base+"/mcp", token), e.ctx, "wait_for_answer", wargs)
	e.g.Expect(answersOf(e.g, res)["token"]["value"]).To(Equal(secret))
	e.g.Expect(text(res)).To(ContainSubstring(secret))

	// One without it has a key of its own.
	base, third := e.httpBinary(http.DefaultClient, "http", debug...)
	e.g.Expect(third.String()).To(ContainSubstring("--sealing-key-file"), "it warns that its key dies with it")
	res = e.call(e.httpSession(base+"/mcp", token), e.ctx, "wait_for_answer", wargs)
	e.g.Expect(answersOf(e.g, res)["token"]).NotTo(HaveKey("value"))
	e.g.Expect(text(res)).To(ContainSubstring("sealed to another key"))

	for i, log := range []*testenv.Output{first, second, third} {
		// A process's stderr reaches the test a little after its calls.
		e.g.Eventually(log.String).Should(ContainSubstring("Tool call"), "process %d logs its calls", i+1)
		e.g.Expect(log.String()).NotTo(ContainSubstring(secret), "process %d's log", i+1)
	}
}
