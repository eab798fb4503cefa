package cli

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
)

// The help names every tool the server serves, and the max wait's default.
func TestMCPHelpListsEveryTool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := hitlmcp.New(hitlmcp.Static(hitlmcp.Caller{Key: "test", Namespace: "agents", Agent: "bot"}), hitlmcp.Options{})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCPServer().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ss.Close() }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}

	out, _, err := runWith(t, nil, "mcp", "--help")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Join(strings.Fields(out), " ")
	for _, tool := range tools.Tools {
		if !strings.Contains(long, tool.Name) {
			t.Errorf("mcp --help does not name the tool %s:\n%s", tool.Name, out)
		}
	}
	flag := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "--max-wait duration") {
			flag = line
		}
	}
	if !strings.Contains(flag, "(default "+hitlmcp.DefaultMaxWait.String()+")") {
		t.Errorf("mcp --help lacks --max-wait with the default %s:\n%s", hitlmcp.DefaultMaxWait, out)
	}
}

// --max-wait bounds a call of the server the command serves on stdio: an
// unanswered ask returns still waiting, and its question stays open.
func TestMCPMaxWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The agent's wait lists its question by name.
	c := fake.NewClientBuilder().WithScheme(scheme()).
		WithIndex(&hitlv1.UserQuestion{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
		Build()
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	// An explicit kubeconfig that does not exist: the command does not
	// find out who it is, and asks as --agent with the test's client.
	cmd := newRootCommand(&common{flags: genericclioptions.NewConfigFlags(true), client: c, namespace: "agents",
		streams: genericiooptions.IOStreams{In: stdinR, Out: stdoutW, ErrOut: io.Discard}})
	cmd.SetArgs([]string{"mcp", "--agent", "bot", "--kubeconfig", filepath.Join(t.TempDir(), "none"), "--max-wait", "1s"})
	served := make(chan error, 1)
	go func() {
		served <- cmd.ExecuteContext(ctx)
		_ = stdoutW.Close()
	}()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, &mcp.IOTransport{Reader: stdoutR, Writer: stdinW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: map[string]any{
		"questions": []any{map[string]any{"id": "env", "question": "Where?", "options": []any{map[string]any{"label": "prod"}}}},
	}})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("ask_user_question failed: %s", res.Content[0].(*mcp.TextContent).Text)
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var got hitlmcp.AskResult
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if !got.Waiting || got.Question == "" || len(got.Answers) != 0 {
		t.Errorf("ask_user_question returned %s, want still waiting", data)
	}
	if took < time.Second || took > 20*time.Second {
		t.Errorf("ask_user_question returned after %s, want the max wait of 1s", took)
	}

	// The client leaving ends the command, with no call waiting.
	if err := cs.Close(); err != nil {
		t.Errorf("closing the session: %v", err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("kubectl hitl mcp: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("kubectl hitl mcp did not return when its client left")
	}
	q := &hitlv1.UserQuestion{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "agents", Name: got.Question}, q); err != nil {
		t.Fatal(err)
	}
	if q.Spec.Cancelled || q.LeftOpen() {
		t.Errorf("question %s is cancelled %t, in state %s; want it left Open", q.Name, q.Spec.Cancelled, q.State())
	}
}
