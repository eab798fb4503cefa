package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hitl-dev/hitl/internal/access"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
)

type mcpOptions struct {
	*common
	agent    string
	maxWaits int
	maxWait  time.Duration
	progress time.Duration
	qps      float64
	burst    int
}

func newMCPCommand(c *common) *cobra.Command {
	o := &mcpOptions{common: c}
	cmd := &cobra.Command{
		Use:   "mcp [-n NAMESPACE] [--agent NAME]",
		Short: "Serve hitl's tools to an agent over MCP (stdio)",
		Long: `Serve the Model Context Protocol over stdin and stdout, so that an agent built
with any MCP client can ask people questions through hitl: the tools
ask_user_question, wait_for_answer, list_questions, get_queued_replies,
admit_reply and cancel_question act with the kubeconfig's identity, as agent
NAME in the namespace. Without --agent, a kubeconfig that authenticates as a
ServiceAccount asks as that ServiceAccount (in its namespace unless -n is
given); any other identity needs --agent. Nothing but MCP messages is
written to stdout; diagnostics go to stderr.

One ask_user_question or wait_for_answer call waits at most --max-wait (below
the clients' request timeout), then returns {"waiting": true} with the
question still open, and the agent goes on with wait_for_answer. A call its
client cancels leaves its question open; cancel_question withdraws it. When
the client goes away or the command is interrupted while calls wait, their
questions are cancelled.`,
		Example: `  kubectl hitl mcp -n agents --agent deploy-bot
  # an MCP client config: {"command": "kubectl", "args": ["hitl", "mcp", "-n", "agents", "--agent", "deploy-bot"]}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	cmd.Flags().StringVar(&o.agent, "agent", "", "the agent to ask as (default: the kubeconfig's ServiceAccount)")
	cmd.Flags().IntVar(&o.maxWaits, "max-waits", hitlmcp.DefaultMaxWaits, "the most calls that may wait for an answer at the same time (negative: no cap)")
	cmd.Flags().DurationVar(&o.maxWait, "max-wait", hitlmcp.DefaultMaxWait, "the longest one ask_user_question or wait_for_answer call waits before it returns still waiting (below the client's request timeout; negative: until answered)")
	cmd.Flags().DurationVar(&o.progress, "progress-interval", hitlmcp.DefaultProgressInterval, "how often a waiting call reports progress, when the client asks for it")
	cmd.Flags().Float64Var(&o.qps, "kube-api-qps", 200, "client-side limit of API requests per second, for all calls together")
	cmd.Flags().IntVar(&o.burst, "kube-api-burst", 1000, "client-side burst of API requests, for all calls together")
	return cmd
}

// mcpUser is who the kubeconfig authenticates as; the fields are empty when
// it could not be told.
type mcpUser struct {
	name           string
	saNamespace    string
	serviceAccount string
}

func (o *mcpOptions) Complete() error {
	o.common.qps, o.common.burst = float32(o.qps), o.burst
	return o.complete()
}

func (o *mcpOptions) Validate() error { return nil }

func (o *mcpOptions) Run(ctx context.Context) error {
	u, err := o.whoAmI(ctx)
	agent, namespace := o.agent, o.namespace
	if agent == "" {
		if err != nil {
			return fmt.Errorf("--agent is required: the kubeconfig's identity could not be read to default it: %w", err)
		}
		if u.serviceAccount == "" {
			return fmt.Errorf("--agent is required: the kubeconfig authenticates as %s, not as a ServiceAccount, so there is no agent to default to", u.name)
		}
		agent = u.serviceAccount
		if !o.namespaceGiven() {
			namespace = u.saNamespace
		}
	}
	key := u.name
	if key == "" {
		key = "kubeconfig"
	}
	srv := hitlmcp.New(hitlmcp.Static(hitlmcp.Caller{Key: key, Client: o.client, Namespace: namespace, Agent: agent}),
		hitlmcp.Options{MaxWaits: o.maxWaits, ProgressInterval: o.progress, MaxWait: o.maxWait, Context: ctx})
	fmt.Fprintf(o.streams.ErrOut, "serving MCP on stdio as agent %s in namespace %s\n", agent, namespace)
	t := &mcp.IOTransport{Reader: readCloser(o.streams.In), Writer: writeCloser{o.streams.Out}}
	// Interrupted (ctx ends) or left by its client (stdin closes), the
	// server aborts the calls in progress; each cancels its question
	// before the command returns.
	err = srv.MCPServer().Run(ctx, t)
	srv.Wait()
	if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil && !strings.Contains(err.Error(), "closed") {
		return err
	}
	return nil
}

// namespaceGiven reports whether -n was on the command line.
func (o *mcpOptions) namespaceGiven() bool {
	return o.flags.Namespace != nil && *o.flags.Namespace != ""
}

// whoAmI asks the API server who the kubeconfig authenticates as (a
// SelfSubjectReview).
func (o *mcpOptions) whoAmI(ctx context.Context) (mcpUser, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return mcpUser{}, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return mcpUser{}, err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return mcpUser{}, fmt.Errorf("asking the API server who the kubeconfig is: %w", err)
	}
	u := mcpUser{name: r.Status.UserInfo.Username}
	u.saNamespace, u.serviceAccount, _ = access.ServiceAccountOf(u.name)
	return u, nil
}

func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

// writeCloser is stdout for the transport, which closes it when the session
// ends; the process's stdout is left open.
type writeCloser struct{ io.Writer }

func (writeCloser) Close() error { return nil }
