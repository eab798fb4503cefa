package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/hitl-dev/hitl/internal/inbox"
)

// webOptions are kubectl hitl inbox's flags for the web inbox.
type webOptions struct {
	enabled       bool
	address       string
	allNamespaces bool
}

func (w *webOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&w.enabled, "web", false, "serve the inbox in your browser instead of the terminal (loopback only; prints a URL with a one-time token)")
	cmd.Flags().StringVar(&w.address, "address", "127.0.0.1:0", "with --web: the loopback address to listen on (port 0: any free port)")
	cmd.Flags().BoolVarP(&w.allNamespaces, "all-namespaces", "A", false, "with --web: list the questions of every namespace")
}

// runWeb serves the web inbox on loopback, acting with the kubeconfig's
// identity, until ctx ends.
func (o *inboxOptions) runWeb(ctx context.Context) error {
	host, _, err := net.SplitHostPort(o.web.address)
	if err != nil {
		return fmt.Errorf("--address %q: %w", o.web.address, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--address %q: the web inbox acts with your kubeconfig's identity and listens on loopback only (127.0.0.1, ::1 or localhost)", o.web.address)
	}
	user := o.user(ctx)
	auth, err := inbox.NewTokenAuth(inbox.Person{Username: user})
	if err != nil {
		return err
	}
	var namespaces []string
	if !o.web.allNamespaces {
		namespaces = []string{o.namespace}
	}
	srv, err := inbox.New(inbox.Options{
		Auth: auth, Clients: inbox.StaticClient(o.client), Namespaces: namespaces, Agents: o.agents,
		ClaimDuration: claimDuration,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	l, err := net.Listen("tcp", o.web.address)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	fmt.Fprintf(o.streams.Out, "Open %s\n", auth.URL(l.Addr().String()))
	fmt.Fprintf(o.streams.ErrOut, "Answering as %s. The link works once, in one browser; Ctrl-C stops the inbox and releases its claims.\n", user)
	if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// user names the kubeconfig's user as the API server authenticates it
// (common.whoAmI), for the page; the API server stamps the same identity
// as the claims' holder. $USER when the API server cannot tell.
func (o *inboxOptions) user(ctx context.Context) string {
	if me, err := o.whoAmI(ctx); err == nil {
		return me
	}
	return os.Getenv("USER")
}
