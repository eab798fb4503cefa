// Command hitl-inbox serves hitl's web inbox in the cluster, behind an
// authenticating proxy (oauth2-proxy, say). It trusts the proxy's user and
// group headers only on requests that prove they come from the proxy (a
// shared secret header, or mTLS with the proxy's client certificate), and
// acts as that person through impersonation, so that RBAC and hitl's
// admission rules apply to them and answeredBy names them. A request
// without the proof or the user header, or with an identity header given
// twice, gets 401.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/hitl-dev/hitl/internal/inbox"
)

func main() {
	var (
		addr         = flag.String("bind-address", ":8080", "address of the inbox (and of /healthz)")
		namespaces   = flag.String("namespaces", "", "comma-separated namespaces whose questions are listed (default: every namespace; people then need to list questions cluster-wide)")
		agents       = flag.String("agents", "", "comma-separated agents whose questions are listed (default: all)")
		userHeader   = flag.String("user-header", inbox.DefaultUserHeader, "the proxy's header that names the user")
		groupsHeader = flag.String("groups-header", inbox.DefaultGroupsHeader, "the proxy's header that lists the user's groups, comma-separated in one header (a request that repeats it is refused)")
		secretHeader = flag.String("proxy-secret-header", inbox.DefaultSecretHeader, "the header in which the proxy sends the shared secret")
		secretFile   = flag.String("proxy-secret-file", "", "file holding the secret shared with the proxy (at least 16 bytes)")
		certFile     = flag.String("tls-cert-file", "", "serve TLS with this certificate (needed for mTLS)")
		keyFile      = flag.String("tls-key-file", "", "the key of --tls-cert-file")
		clientCA     = flag.String("client-ca-file", "", "mTLS: require a client certificate signed by this CA")
		clientNames  = flag.String("proxy-client-names", "", "mTLS: comma-separated names (common name or DNS SAN), one of which the proxy's client certificate must carry")
		title        = flag.String("title", "hitl inbox", "the page's title")
		maxStreams   = flag.Int("max-streams-per-person", 8, "live event streams (open inbox pages) one person may hold at once; one more is answered 429")
		qps          = flag.Float64("kube-api-qps", 50, "client-side limit of API requests per second, per person")
		burst        = flag.Int("kube-api-burst", 100, "client-side burst of API requests, per person")
	)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("hitl-inbox")
	if err := run(log, *addr, *namespaces, *agents, *title, *qps, *burst, *maxStreams, &inbox.ProxyAuth{
		UserHeader: *userHeader, GroupsHeader: *groupsHeader, SecretHeader: *secretHeader, ClientNames: split(*clientNames),
	}, *secretFile, *certFile, *keyFile, *clientCA); err != nil {
		log.Error(err, "The inbox stopped")
		os.Exit(1)
	}
}

func run(log logr.Logger, addr, namespaces, agents, title string, qps float64, burst, maxStreams int, auth *inbox.ProxyAuth, secretFile, certFile, keyFile, clientCA string) error {
	if secretFile != "" {
		secret, err := os.ReadFile(secretFile)
		if err != nil {
			return fmt.Errorf("reading --proxy-secret-file: %w", err)
		}
		auth.Secret = []byte(strings.TrimSpace(string(secret)))
	}
	if err := auth.Check(); err != nil {
		return err
	}
	if maxStreams < 1 {
		return errors.New("--max-streams-per-person must be at least 1")
	}
	if len(auth.ClientNames) > 0 && (clientCA == "" || certFile == "") {
		return errors.New("--proxy-client-names needs --client-ca-file and --tls-cert-file: mTLS is how the proxy's certificate is verified")
	}
	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(qps), burst
	srv, err := inbox.New(inbox.Options{
		Auth: auth, Clients: inbox.ImpersonatingClients(cfg),
		Namespaces: split(namespaces), Agents: split(agents), MaxStreams: maxStreams, Title: title, Log: ctrl.Log.WithName("inbox"),
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	hs := &http.Server{Addr: addr, Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return fmt.Errorf("reading --client-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return errors.New("--client-ca-file holds no PEM certificate")
		}
		hs.TLSConfig = &tls.Config{ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	}
	ctx := ctrl.SetupSignalHandler()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	log.Info("Serving the web inbox", "address", addr, "userHeader", auth.UserHeader, "tls", certFile != "")
	if certFile != "" {
		err = hs.ListenAndServeTLS(certFile, keyFile)
	} else {
		err = hs.ListenAndServe()
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
