// Command hitl-mcp serves hitl's MCP tools (ask_user_question,
// wait_for_answer, list_questions, get_queued_replies, admit_reply,
// cancel_question) over
// the streamable HTTP transport at /mcp, for agents running in the cluster.
// Every request carries "Authorization: Bearer <token>", a ServiceAccount
// token for the audience hitl-mcp, which the server verifies with a
// TokenReview; a call then acts as that ServiceAccount (impersonation) and
// asks as the agent named after it, in its namespace. With --tls-cert-file
// and --tls-key-file it serves HTTPS, which it needs outside a service mesh
// that encrypts traffic between pods: the tokens travel in every request.
//
// Sensitive questions are sealed to the server's key: a new one per
// process, or, with --sealing-key-file, the one that file holds (created
// when missing), so that their answers still open after a restart.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
	"github.com/hitl-dev/hitl/pkg/sealed"
)

func main() {
	var (
		addr     = flag.String("bind-address", ":8090", "address of the MCP endpoint (/mcp) and of /healthz")
		audience = flag.String("audience", hitlmcp.DefaultAudience, "the audience a caller's ServiceAccount token must be minted for")
		maxWaits = flag.Int("max-waits", hitlmcp.DefaultMaxWaits, "the most calls one identity may have waiting for an answer at the same time (negative: no cap)")
		progress = flag.Duration("progress-interval", hitlmcp.DefaultProgressInterval, "how often a waiting call reports progress, when its client asks for it")
		maxWait  = flag.Duration("max-wait", hitlmcp.DefaultMaxWait, "the longest one ask_user_question or wait_for_answer call waits before it returns still waiting (below the clients' request timeout; negative: until answered)")
		qps      = flag.Float64("kube-api-qps", 100, "client-side limit of API requests per second, per calling identity")
		burst    = flag.Int("kube-api-burst", 200, "client-side burst of API requests, per calling identity")
		grace    = flag.Duration("shutdown-grace", 15*time.Second, "how long a stopping server gives calls in progress to return (still waiting: their questions stay open)")
		idle     = flag.Duration("session-idle-timeout", hitlmcp.DefaultSessionTimeout, "how long an MCP session may have no request in progress before the server closes it (negative: never)")
		certFile = flag.String("tls-cert-file", "", "serve HTTPS with this PEM certificate (chain); with --tls-key-file. Without both, plain HTTP")
		keyFile  = flag.String("tls-key-file", "", "the PEM private key of --tls-cert-file")
		sealing  = flag.String("sealing-key-file", "", "the file holding the private key sensitive answers are sealed to, created (mode 0600) when missing, so that they still open after a restart; give every replica the same file. Without it, a new key per process")
	)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("hitl-mcp")
	if (*certFile == "") != (*keyFile == "") {
		log.Error(errors.New("--tls-cert-file and --tls-key-file go together"), "Invalid flags")
		os.Exit(2)
	}

	key, created, err := sealingKey(*sealing)
	if err != nil {
		log.Error(err, "Unable to read the sealing key", "file", *sealing)
		os.Exit(1)
	}
	switch {
	case *sealing == "":
		log.Info("Sealing sensitive questions to a key of this process: their answers do not open after a restart (--sealing-key-file)")
	case created:
		log.Info("Created the sealing key", "file", *sealing)
	}

	ctx := ctrl.SetupSignalHandler()
	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	h, err := hitlmcp.NewHTTPHandler(hitlmcp.HTTPOptions{
		Options: hitlmcp.Options{MaxWaits: *maxWaits, ProgressInterval: *progress, MaxWait: *maxWait, Context: ctx,
			SealingKey: key, Logger: slog.New(hitlmcp.Relevel{Handler: logr.ToSlogHandler(log), Map: v1})},
		Config:         cfg,
		Audience:       *audience,
		SessionTimeout: *idle,
	})
	if err != nil {
		log.Error(err, "Unable to set up the MCP server")
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	go func() {
		<-ctx.Done()
		// Calls in progress end with ctx and return still waiting (their
		// questions stay open); give them the grace to say so, then close.
		sctx, cancel := context.WithTimeout(context.Background(), *grace)
		defer cancel()
		done := make(chan struct{})
		go func() { h.Wait(); close(done) }()
		select {
		case <-done:
		case <-sctx.Done():
		}
		_ = srv.Shutdown(sctx)
	}()
	scheme := "https"
	if *certFile == "" {
		scheme = "http"
		log.Info("Warning: plain HTTP, callers' tokens travel in clear; TLS (--tls-cert-file, --tls-key-file) is required outside a service mesh that encrypts traffic between pods")
	}
	log.Info("Serving MCP", "address", *addr, "scheme", scheme, "path", "/mcp", "audience", *audience, "sessionIdleTimeout", *idle)
	if *certFile != "" {
		err = srv.ListenAndServeTLS(*certFile, *keyFile)
	} else {
		err = srv.ListenAndServe()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error(err, "The MCP server stopped")
		os.Exit(1)
	}
}

// sealingKey reads the sealing key of path (sealed.Key.Bytes), or makes it
// and writes it there (mode 0600) when the file does not exist; with no
// path, a new key kept in memory only.
func sealingKey(path string) (key *sealed.Key, created bool, err error) {
	if path == "" {
		key, err = sealed.NewKey()
		return key, false, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if key, err = sealed.NewKey(); err != nil {
			return nil, false, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			// Another process made it first: use that one, once written.
			for range 20 {
				if data, err := os.ReadFile(path); err != nil || len(data) > 0 {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			return sealingKey(path)
		}
		if err != nil {
			return nil, false, err
		}
		_, err = f.Write(key.Bytes())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
			return nil, false, fmt.Errorf("writing %s: %w", path, err)
		}
		return key, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	key, err = sealed.ParseKey(data)
	return key, false, err
}

// v1 hands slog's debug records to the logr logger at V(1), the
// level --zap-log-level=debug enables (logr's bridge makes slog's debug
// V(4)).
func v1(l slog.Level) slog.Level {
	if l < slog.LevelInfo {
		return slog.LevelInfo - 1
	}
	return l
}
