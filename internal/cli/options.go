// Package cli implements `kubectl hitl`: list, show, answer, approve, deny,
// inbox, ask, wait, admit, withdraw, mcp and notify test, following
// kubectl's conventions (kubeconfig flags, -n, --context, -o, IOStreams,
// and the Complete, Validate, Run pattern of each command's options).
package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Exit codes of the plugin beyond 0 (success) and 1 (error).
const (
	// ExitAborted: `ask` was interrupted (SIGINT, SIGTERM) and cancelled
	// its question. It is 1, as the help has always said; the message
	// starts with ASK_ABORTED.
	ExitAborted = 1
	// ExitPending: `ask` or `wait` ended with the question Continued (pending).
	ExitPending = 3
	// ExitCancelled: the question was cancelled.
	ExitCancelled = 4
	// ExitRejected: a reply was rejected.
	ExitRejected = 5
)

// ExitError carries an exit code out of a command.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// common holds what every command needs: the kubeconfig flags, the streams,
// and, after complete, a client and the namespace.
type common struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams

	client    client.WithWatch
	namespace string

	// qps and burst limit the client's requests (client-go's defaults of 5
	// and 10 would make a waiting command, or an MCP server with many calls
	// waiting, queue behind itself).
	qps   float32
	burst int

	// me is who the API server authenticates the client as, asked once
	// (whoAmI); meErr says why it could not tell.
	meOnce sync.Once
	me     string
	meErr  error
}

// Client-side request limits of kubectl hitl's commands (kubectl hitl mcp
// has flags for its own).
const (
	defaultQPS   = 50
	defaultBurst = 100
)

func (c *common) complete() error {
	if c.client != nil {
		return nil // completed already (a shell completion first, or a test)
	}
	cfg, err := c.flags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	c.client, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	c.namespace, _, err = c.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return fmt.Errorf("reading the namespace: %w", err)
	}
	return nil
}

// whoAmI asks the API server, once per command, whom the client
// authenticates as (a SelfSubjectReview): the username it stamps on the
// replies and claims the command creates.
func (c *common) whoAmI(ctx context.Context) (string, error) {
	c.meOnce.Do(func() {
		r := &authenticationv1.SelfSubjectReview{}
		if err := c.client.Create(ctx, r); err != nil {
			c.meErr = fmt.Errorf("asking the API server who you are (a SelfSubjectReview): %w", err)
			return
		}
		if c.me = r.Status.UserInfo.Username; c.me == "" {
			c.meErr = errors.New("asking the API server who you are: its SelfSubjectReview names no user")
		}
	})
	return c.me, c.meErr
}

// scheme is the one scheme of the plugin's clients and printers, built on
// first use: every printed object has its kinds set from it.
var scheme = sync.OnceValue(hitlv1.NewScheme)

// exitCodesHelp is the exit codes' part of `kubectl hitl --help`.
const exitCodesHelp = `Exit codes:
  0  success
  1  an error (the message starts with the specification's code when there
     is one, e.g. NOT_ANSWERABLE, FORBIDDEN, BAD_ANSWER), or an ask
     interrupted by Ctrl-C or SIGTERM (ASK_ABORTED)
  3  ask, wait: the question is pending (Continued: the window closed
     unanswered)
  4  ask, wait: the question was cancelled
  5  answer, approve, deny, inbox: the reply was rejected`
