package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// replica is one manager process, run like a Pod's container: started
// again after it exits (after a delay the faults may set), talking to the
// API server through its own proxy, which can make its watches lag.
type replica struct {
	name  string
	bin   string
	args  []string
	out   string
	proxy *lagProxy
	tl    *timeline

	mu        sync.Mutex
	cmd       *exec.Cmd
	stopped   bool      // SIGSTOPped
	downUntil time.Time // not started again before
	leading   bool      // its log said it acquired the lease, and it has not exited since
	leadSince time.Time // when it acquired the lease
	done      chan struct{}
	quit      bool
}

type replicas struct {
	all []*replica
	tl  *timeline
	wg  sync.WaitGroup
}

// startReplicas starts two replicas of the manager binary, with the flags
// it ships with (leader election on, default timings), as the manager's
// ServiceAccount. Each is a copy of the binary named manager-a or
// manager-b, so that its requests carry its own user agent in the audit log.
func startReplicas(ctx context.Context, k *cluster, o options, tl *timeline) (*replicas, error) {
	saNS, saName := k.install.ManagerServiceAccount()
	cfg, err := k.tokenConfig(ctx, saNS, saName)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(k.cfg.CAData) {
		return nil, fmt.Errorf("the API server's CA is not PEM")
	}
	target, err := url.Parse(k.cfg.Host)
	if err != nil {
		return nil, err
	}
	rs := &replicas{tl: tl}
	for _, name := range []string{"manager-a", "manager-b"} {
		bin := filepath.Join(o.out, name)
		if err := copyFile(o.managerBin, bin); err != nil {
			return nil, err
		}
		p, err := startProxy(target, pool)
		if err != nil {
			return nil, err
		}
		kc := clientcmdapi.NewConfig()
		kc.Clusters["local"] = &clientcmdapi.Cluster{Server: "https://" + p.addr, CertificateAuthorityData: p.caPEM}
		kc.AuthInfos["manager"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
		kc.Contexts["manager"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "manager"}
		kc.CurrentContext = "manager"
		kubeconfig := filepath.Join(o.out, name+".kubeconfig")
		if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
			return nil, err
		}
		_ = os.Remove(filepath.Join(o.out, name+".log"))
		r := &replica{name: name, bin: bin, out: o.out, proxy: p, tl: tl, done: make(chan struct{}), args: []string{
			"--kubeconfig", kubeconfig,
			"--leader-elect",
			"--leader-election-namespace", k.install.Namespace,
			"--metrics-bind-address", "0",
			"--health-probe-bind-address", "0",
		}}
		rs.all = append(rs.all, r)
		rs.wg.Add(1)
		go func() { defer rs.wg.Done(); r.supervise() }()
	}
	return rs, nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	_ = os.Remove(to)
	return os.WriteFile(to, data, 0o755)
}

// supervise runs the replica until quit, starting it again a second after
// it exits (or at downUntil, when a fault set it), as the kubelet restarts
// a container.
func (r *replica) supervise() {
	defer close(r.done)
	for {
		r.mu.Lock()
		if r.quit {
			r.mu.Unlock()
			return
		}
		wait := time.Until(r.downUntil)
		r.mu.Unlock()
		if wait > 0 {
			time.Sleep(wait)
			continue // downUntil may have moved
		}
		if err := r.runOnce(); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %s: %v\n", r.name, err)
		}
		r.mu.Lock()
		if r.downUntil.Before(time.Now()) {
			r.downUntil = time.Now().Add(time.Second)
		}
		r.mu.Unlock()
	}
}

func (r *replica) runOnce() error {
	logf, err := os.OpenFile(filepath.Join(r.out, r.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(r.bin, r.args...)
	// The replica dies with the harness, however the harness ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = logf
	r.mu.Lock()
	if r.quit {
		r.mu.Unlock()
		return nil
	}
	if err := cmd.Start(); err != nil {
		r.mu.Unlock()
		return err
	}
	r.cmd, r.stopped, r.leading = cmd, false, false
	r.tl.add(r.name, "start", fmt.Sprint(cmd.Process.Pid))
	r.mu.Unlock()
	workers := false
	s := bufio.NewScanner(stderr)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		fmt.Fprintln(logf, line)
		lower := strings.ToLower(line)
		switch {
		case strings.Contains(lower, "successfully acquired lease"):
			r.mu.Lock()
			r.leading, r.leadSince = true, time.Now()
			r.mu.Unlock()
			r.tl.add(r.name, "acquired", "")
		case !workers && strings.Contains(line, "Starting workers"):
			workers = true
			r.tl.add(r.name, "workers", "")
		case strings.Contains(lower, "leader election lost") || strings.Contains(lower, "failed to renew lease"):
			r.tl.add(r.name, "lost", "")
		}
	}
	err = cmd.Wait()
	r.mu.Lock()
	r.cmd, r.leading, r.stopped = nil, false, false
	r.mu.Unlock()
	r.tl.add(r.name, "exit", fmt.Sprint(err))
	return nil
}

// signal sends sig to the running process, if any, and records it.
func (r *replica) signal(sig syscall.Signal, kind string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		return false
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		return false
	}
	switch sig {
	case syscall.SIGSTOP:
		r.stopped = true
	case syscall.SIGCONT:
		r.stopped = false
	}
	r.tl.add(r.name, kind, "")
	return true
}

// kill kills the replica with SIGKILL and keeps it down for down.
func (r *replica) kill(down time.Duration) bool {
	r.mu.Lock()
	r.downUntil = time.Now().Add(down)
	r.mu.Unlock()
	return r.signal(syscall.SIGKILL, "kill")
}

func (r *replica) isLeading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leading && r.cmd != nil && !r.stopped
}

func (r *replica) isStopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// leader is the replica that acquired the lease last, if it still runs
// (a deposed one may still believe it leads until its renewal fails).
func (rs *replicas) leader() *replica {
	var last *replica
	var since time.Time
	for _, r := range rs.all {
		r.mu.Lock()
		if r.leading && r.leadSince.After(since) {
			last, since = r, r.leadSince
		}
		r.mu.Unlock()
	}
	if last == nil || !last.isLeading() {
		return nil
	}
	return last
}

func (rs *replicas) other(r *replica) *replica {
	for _, o := range rs.all {
		if o != r {
			return o
		}
	}
	return nil
}

func (rs *replicas) waitForLeader(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for rs.leader() == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("no replica became the leader within %s (logs in manager-a.log, manager-b.log)", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// healAll ends every fault still in effect: stopped replicas continue,
// lagging proxies catch up, and killed replicas come back now.
func (rs *replicas) healAll() {
	for _, r := range rs.all {
		if r.isStopped() {
			r.signal(syscall.SIGCONT, "cont")
		}
		if r.proxy.setLag(0) {
			rs.tl.add(r.name, "lag-off", "")
		}
		r.mu.Lock()
		r.downUntil = time.Now()
		r.mu.Unlock()
	}
}

func (rs *replicas) stop() {
	for _, r := range rs.all {
		r.mu.Lock()
		r.quit = true
		cmd := r.cmd
		r.mu.Unlock()
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	done := make(chan struct{})
	go func() { rs.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		for _, r := range rs.all {
			r.signal(syscall.SIGKILL, "kill")
		}
		<-done
	}
	for _, r := range rs.all {
		r.proxy.close()
	}
}

// lagProxy forwards a replica's requests to the API server, and holds
// back what its watches receive by lag: a replica whose cache serves stale
// reads, as one behind a slow or partitioned link.
type lagProxy struct {
	addr  string
	caPEM []byte
	srv   *http.Server
	lag   atomic.Int64
}

func startProxy(target *url.URL, pool *x509.CertPool) (*lagProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	cert, caPEM, err := selfSigned()
	if err != nil {
		return nil, err
	}
	p := &lagProxy{addr: l.Addr().String(), caPEM: caPEM}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 100,
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.Out.Host = target.Host },
		Transport:     transport,
		FlushInterval: -1,
		// The API server may be down: the replica sees a 502.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
		ErrorLog:     log.New(io.Discard, "", 0),
		ModifyResponse: func(resp *http.Response) error {
			q := resp.Request.URL.Query()
			if w := q.Get("watch"); w == "true" || w == "1" {
				resp.Body = newLaggedBody(resp.Body, &p.lag)
			}
			return nil
		},
	}
	// TLS, because client-go sends no bearer token over plain HTTP.
	p.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() { _ = p.srv.ServeTLS(l, "", "") }()
	return p, nil
}

// setLag sets the lag and reports whether it changed.
func (p *lagProxy) setLag(d time.Duration) bool { return p.lag.Swap(int64(d)) != int64(d) }

func (p *lagProxy) close() { _ = p.srv.Close() }

// laggedBody delivers each chunk of a watch stream lag after it arrived.
type laggedBody struct {
	rc     io.ReadCloser
	lag    *atomic.Int64
	chunks chan chunk
	rest   []byte
	err    error
}

type chunk struct {
	data []byte
	at   time.Time
	err  error
}

func newLaggedBody(rc io.ReadCloser, lag *atomic.Int64) *laggedBody {
	b := &laggedBody{rc: rc, lag: lag, chunks: make(chan chunk, 4096)}
	go func() {
		for {
			buf := make([]byte, 32<<10)
			n, err := rc.Read(buf)
			b.chunks <- chunk{data: buf[:n], at: time.Now(), err: err}
			if err != nil {
				close(b.chunks)
				return
			}
		}
	}()
	return b
}

func (b *laggedBody) Read(p []byte) (int, error) {
	for len(b.rest) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		c, ok := <-b.chunks
		if !ok {
			return 0, io.EOF
		}
		if wait := time.Until(c.at.Add(time.Duration(b.lag.Load()))); wait > 0 {
			time.Sleep(wait)
		}
		b.rest, b.err = c.data, c.err
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

func (b *laggedBody) Close() error { return b.rc.Close() }

// selfSigned makes a serving certificate for 127.0.0.1 that is its own CA.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "hitl-chaos-proxy"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
