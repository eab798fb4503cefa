package mcp_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
	"github.com/hitl-dev/hitl/test/testenv"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// binary builds cmd/kubectl-hitl and cmd/hitl-mcp, the real binaries, once
// per run, and returns the path of name.
func binary(t *testing.T, name string) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "hitl-mcp-bin-"); binErr != nil {
			return
		}
		build := exec.Command("go", "build", "-o", binDir+"/", "./cmd/kubectl-hitl", "./cmd/hitl-mcp")
		build.Dir = testenv.Root()
		if out, err := build.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("building the binaries: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, name)
}

func plugin(t *testing.T) string { return binary(t, "kubectl-hitl") }

// writeKubeconfig writes data to a file of the test's and returns its path.
func (e *env) writeKubeconfig(data []byte) string {
	e.t.Helper()
	path := filepath.Join(e.t.TempDir(), "kubeconfig")
	e.g.Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
	return path
}

func (e *env) adminKubeconfig() string {
	e.t.Helper()
	u, err := e.k.Env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	data, err := u.KubeConfig()
	e.g.Expect(err).NotTo(HaveOccurred())
	return e.writeKubeconfig(data)
}

// stdio starts `kubectl-hitl mcp args...` and connects the SDK's client to
// it over its stdin and stdout.
func (e *env) stdio(args ...string) (*mcp.ClientSession, *exec.Cmd, *testenv.Output) {
	e.t.Helper()
	cmd := exec.Command(plugin(e.t), append([]string{"mcp"}, args...)...)
	stderr := &testenv.Output{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "v0"}, nil).Connect(e.ctx, &mcp.CommandTransport{Command: cmd}, nil)
	e.g.Expect(err).NotTo(HaveOccurred(), "stderr: %s", stderr)
	e.t.Cleanup(func() { _ = cs.Close() })
	return cs, cmd, stderr
}

func TestStdioBinary(t *testing.T) {
	e := newEnv(t)
	kubeconfig := e.adminKubeconfig()
	cs, _, stderr := e.stdio("-n", e.ns, "--agent", "desk-bot", "--kubeconfig", kubeconfig)

	tools, err := cs.ListTools(e.ctx, nil)
	e.g.Expect(err).NotTo(HaveOccurred(), "stderr: %s", stderr)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	e.g.Expect(names).To(ConsistOf("ask_user_question", "wait_for_answer", "list_questions", "get_queued_replies", "admit_reply", "cancel_question"))

	done := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("5m")})
	q := e.asked("desk-bot")
	e.g.Expect(q.Spec.Agent).To(Equal("desk-bot"))
	e.answer(q.Name, "r1", "prod")
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred(), "stderr: %s", stderr)
	res := structured[hitlmcp.AskResult](e.g, got.res)
	e.g.Expect(res.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}))
	e.g.Expect(stderr.String()).To(ContainSubstring("as agent desk-bot in namespace " + e.ns))
}

func TestStdioBinaryInterrupted(t *testing.T) {
	e := newEnv(t)
	cs, cmd, stderr := e.stdio("-n", e.ns, "--agent", "desk-bot", "--kubeconfig", e.adminKubeconfig())
	call := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("")})
	q := e.asked("desk-bot")

	// SIGINT: the waiting ask cancels its question, and the server exits.
	e.g.Expect(cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	e.g.Eventually(e.state(q.Name)).Should(Equal(hitlv1.StateCancelled))
	// The process exits: its stdout closes, and with it the session.
	exited := make(chan error, 1)
	go func() { exited <- cs.Wait() }()
	e.g.Eventually(exited, 15*time.Second).Should(Receive(), "stderr: %s", stderr)
	e.g.Eventually(call).Should(Receive())
}

func TestStdioBinaryServiceAccount(t *testing.T) {
	e := newEnv(t)
	e.serviceAccount("helper")
	token, _, err := testenv.RequestToken(e.ctx, e.admin, e.ns, "helper", time.Hour)
	e.g.Expect(err).NotTo(HaveOccurred())
	data, err := testenv.TokenKubeconfig(e.k.Config, "helper", token, "")
	e.g.Expect(err).NotTo(HaveOccurred())
	kubeconfig := e.writeKubeconfig(data)

	// Without --agent and -n: the ServiceAccount, in its namespace.
	cs, _, stderr := e.stdio("--kubeconfig", kubeconfig)
	res := structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "ask_user_question", whereArgs("1s")))
	e.g.Expect(res.Pending).To(BeTrue())
	e.g.Expect(e.asked("helper").Spec.Agent).To(Equal("helper"))
	e.g.Expect(stderr.String()).To(ContainSubstring("as agent helper in namespace " + e.ns))
}

func TestStdioBinaryNeedsAgent(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, plugin(t), "mcp", "-n", e.ns, "--kubeconfig", e.adminKubeconfig())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	e.g.Expect(err).To(HaveOccurred())
	e.g.Expect(stderr.String()).To(ContainSubstring("--agent is required"))
	e.g.Expect(stderr.String()).To(ContainSubstring("not as a ServiceAccount"))
	e.g.Expect(stdout.String()).To(BeEmpty(), "nothing but MCP on stdout")
}

// httpBinary runs cmd/hitl-mcp with args on a free local port, as the
// admin, and waits until its /healthz answers at base (scheme://addr)
// through c.
func (e *env) httpBinary(c *http.Client, scheme string, args ...string) (base string, stderr *testenv.Output) {
	e.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	e.g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	e.g.Expect(l.Close()).To(Succeed())

	args = append([]string{"--bind-address", addr, "--kubeconfig", e.adminKubeconfig()}, args...)
	cmd := exec.Command(binary(e.t, "hitl-mcp"), args...)
	stderr = &testenv.Output{}
	cmd.Stderr = stderr
	e.g.Expect(cmd.Start()).To(Succeed())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	base = scheme + "://" + addr
	// A minute: a loaded machine (the suite builds in parallel) starts it slowly.
	e.g.Eventually(func() int {
		resp, err := c.Get(base + "/healthz")
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}).WithTimeout(time.Minute).Should(Equal(http.StatusOK), func() string { return stderr.String() })
	return base, stderr
}

// TestHTTPBinary runs cmd/hitl-mcp and asks through it with a
// ServiceAccount's hitl-mcp token.
func TestHTTPBinary(t *testing.T) {
	e := newEnv(t)
	e.serviceAccount("http-bot")
	base, stderr := e.httpBinary(http.DefaultClient, "http")
	e.g.Expect(stderr.String()).To(ContainSubstring("tokens travel in clear"), "plain HTTP is logged as a warning")

	resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader("{}"))
	e.g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	e.g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "no token")

	cs := e.httpSession(base+"/mcp", e.mcpToken("http-bot"))
	done := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: whereArgs("")})
	q := e.asked("http-bot")
	e.answer(q.Name, "r1", "staging")
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred())
	e.g.Expect(structured[hitlmcp.AskResult](e.g, got.res).Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}}))
}

// TestHTTPSBinary runs cmd/hitl-mcp with a certificate: the SDK's client
// asks through it over TLS, and plain HTTP to its port is refused.
func TestHTTPSBinary(t *testing.T) {
	e := newEnv(t)
	e.serviceAccount("http-bot")
	certFile, keyFile, roots := e.selfSigned()
	tlsTransport := http.DefaultTransport.(*http.Transport).Clone()
	tlsTransport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	tlsClient := &http.Client{Transport: tlsTransport}
	base, stderr := e.httpBinary(tlsClient, "https", "--tls-cert-file", certFile, "--tls-key-file", keyFile)
	e.g.Expect(stderr.String()).NotTo(ContainSubstring("tokens travel in clear"))

	t2 := &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{e.mcpToken("http-bot"), tlsTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "https-test", Version: "v0"}, nil).Connect(e.ctx, t2, nil)
	e.g.Expect(err).NotTo(HaveOccurred(), "stderr: %s", stderr)
	t.Cleanup(func() { _ = cs.Close() })
	res := structured[hitlmcp.AskResult](e.g, e.call(cs, e.ctx, "ask_user_question", whereArgs("1s")))
	e.g.Expect(res.Pending).To(BeTrue())
	e.g.Expect(e.asked("http-bot").Spec.Agent).To(Equal("http-bot"))

	// Plain HTTP to the TLS port: the server answers with a TLS error
	// page, never the endpoint.
	plain := "http" + strings.TrimPrefix(base, "https")
	code, err := initialize(e.ctx, plain+"/mcp", "Bearer "+e.mcpToken("http-bot"))
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(code).To(Equal(http.StatusBadRequest), "plain HTTP to the HTTPS port")
	// And a client that does not trust the certificate does not connect.
	_, err = http.Get(base + "/healthz")
	e.g.Expect(err).To(HaveOccurred())
}

// TestHTTPSBinaryNeedsBoth: a certificate without its key (or the key
// alone) is a usage error, not a silent fallback to plain HTTP.
func TestHTTPSBinaryNeedsBoth(t *testing.T) {
	e := newEnv(t)
	certFile, keyFile, _ := e.selfSigned()
	for _, args := range [][]string{{"--tls-cert-file", certFile}, {"--tls-key-file", keyFile}} {
		ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
		cmd := exec.CommandContext(ctx, binary(t, "hitl-mcp"), append([]string{"--bind-address", "127.0.0.1:0", "--kubeconfig", e.adminKubeconfig()}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		e.g.Expect(err).To(HaveOccurred(), "%v", args)
		e.g.Expect(stderr.String()).To(ContainSubstring("--tls-cert-file and --tls-key-file go together"), "%v", args)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key to
// files of the test's, and returns them with a pool that trusts it.
func (e *env) selfSigned() (certFile, keyFile string, roots *x509.CertPool) {
	e.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	e.g.Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "hitl-mcp"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	e.g.Expect(err).NotTo(HaveOccurred())
	cert, err := x509.ParseCertificate(der)
	e.g.Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	e.g.Expect(err).NotTo(HaveOccurred())
	dir := e.t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	e.g.Expect(os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)).To(Succeed())
	e.g.Expect(os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)).To(Succeed())
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}
