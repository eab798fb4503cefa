package channel_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	netmail "net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify/channel"
)

// mailpit is a running mailpit: an SMTP server whose HTTP API lists what
// arrived.
type mailpit struct {
	smtp, api string
}

// startMailpit runs bin/mailpit (make mailpit builds it; MAILPIT names
// another) on free loopback ports with args, until the test ends.
func startMailpit(t *testing.T, args ...string) *mailpit {
	t.Helper()
	bin := os.Getenv("MAILPIT")
	if bin == "" {
		bin = filepath.Join("..", "..", "..", "bin", "mailpit")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no mailpit at %s (run `make mailpit`): %v", bin, err)
	}
	m := &mailpit{smtp: freeAddr(t), api: freeAddr(t)}
	cmd := exec.Command(bin, append([]string{"--smtp", m.smtp, "--listen", m.api,
		"--database", filepath.Join(t.TempDir(), "mail.db"), "--smtp-disable-rdns", "--quiet"}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + m.api + "/livez")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if c, err := net.Dial("tcp", m.smtp); err == nil {
					c.Close()
					return m
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("mailpit did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// mail is a message as mailpit's API shows it.
type mail struct {
	ID, Subject, Text, HTML string
	To                      []struct{ Address string }
}

// messages lists what arrived, newest first, each read in full.
func (m *mailpit) messages(t *testing.T) []mail {
	t.Helper()
	var list struct{ Messages []mail }
	m.get(t, "/api/v1/messages", &list)
	for i := range list.Messages {
		m.get(t, "/api/v1/message/"+list.Messages[i].ID, &list.Messages[i])
	}
	return list.Messages
}

func (m *mailpit) get(t *testing.T, path string, into any) {
	t.Helper()
	resp, err := http.Get("http://" + m.api + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatal(err)
	}
}

func TestEmailArrivesWithTheDeepLink(t *testing.T) {
	mp := startMailpit(t)
	e := &channel.Email{Address: mp.smtp, From: "hitl@example.com", To: []string{"oncall@example.com", "sre@example.com"}}
	m := channel.NewMessage(settled(), hitlv1.EventSettled, "uid-1/settled/mail", t0, "https://inbox.example.com")
	if err := e.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got := mp.messages(t)
	if len(got) != 1 {
		t.Fatalf("%d messages arrived", len(got))
	}
	g := got[0]
	link := "https://inbox.example.com/q/team-a/deploy"
	if !strings.Contains(g.Subject, "[hitl] release-bot's question was answered by alice") || len(g.To) != 2 {
		t.Errorf("subject %q, to %v", g.Subject, g.To)
	}
	if !strings.Contains(g.Text, "Open it: "+link) || !strings.Contains(g.Text, `notes: "ship <it> & go"`) {
		t.Errorf("text:\n%s", g.Text)
	}
	if !strings.Contains(g.HTML, `<a href="`+link+`">`) || !strings.Contains(g.HTML, "ship &lt;it&gt; &amp; go") {
		t.Errorf("HTML:\n%s", g.HTML)
	}
}

func TestEmailStartTLSAndAuth(t *testing.T) {
	dir := t.TempDir()
	pool := selfSigned(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "auth"), []byte("notifier:pa55word\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mp := startMailpit(t, "--smtp-tls-cert", filepath.Join(dir, "cert.pem"), "--smtp-tls-key", filepath.Join(dir, "key.pem"),
		"--smtp-require-starttls", "--smtp-auth-file", filepath.Join(dir, "auth"))
	m := channel.NewMessage(settled(), hitlv1.EventAsked, "id", t0, "https://inbox.example.com")
	e := &channel.Email{Address: mp.smtp, From: "hitl@example.com", To: []string{"oncall@example.com"}, StartTLS: true,
		Username: "notifier", Password: "pa55word", TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	if err := e.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	e.Password = "wrong"
	if err := e.Send(context.Background(), m); err == nil || channel.Transient(err) {
		t.Errorf("a wrong password: %v", err)
	}
	// A server whose certificate is not trusted gets nothing.
	e.Password, e.TLSConfig = "pa55word", nil
	if err := e.Send(context.Background(), m); err == nil {
		t.Error("sent to an unverified server")
	}
	if got := mp.messages(t); len(got) != 1 {
		t.Errorf("%d messages arrived, want 1", len(got))
	}
}

func TestEmailRefusesAServerWithoutStartTLS(t *testing.T) {
	mp := startMailpit(t)
	e := &channel.Email{Address: mp.smtp, From: "hitl@example.com", To: []string{"a@example.com"}, StartTLS: true, Username: "u", Password: "p"}
	err := e.Send(context.Background(), channel.NewMessage(settled(), hitlv1.EventAsked, "id", t0, ""))
	if err == nil || !strings.Contains(err.Error(), "does not offer STARTTLS") {
		t.Errorf("err %v", err)
	}
	if got := mp.messages(t); len(got) != 0 {
		t.Errorf("%d messages arrived", len(got))
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key to dir and
// returns a pool that trusts it.
func selfSigned(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mailpit"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{"cert.pem": {Type: "CERTIFICATE", Bytes: der}, "key.pem": {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(fmt.Errorf("parsing the certificate: %w", err))
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// parts are the decoded bodies of an email message, by content type.
func parts(t *testing.T, raw []byte) map[string]string {
	t.Helper()
	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart() // decodes quoted-printable
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		out[strings.SplitN(p.Header.Get("Content-Type"), ";", 2)[0]] = strings.ReplaceAll(string(b), "\r\n", "\n")
	}
}

func TestEmailShowsTheVotes(t *testing.T) {
	raw, err := channel.EmailMessage(progress("https://inbox.example.com"), "hitl@example.com", []string{"oncall@example.com"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	p := parts(t, raw)
	if text := p["text/plain"]; !strings.Contains(text, "Votes, approvals 1/2 (1 no):\n  alice: Approve\n  bob: Reject\n") || strings.Contains(text, "ship") {
		t.Errorf("text:\n%s", text)
	}
	html := p["text/html"]
	if !strings.Contains(html, "Votes, approvals 1/2 (1 no)") || !strings.Contains(html, `<th align="left">alice</th><td>Approve</td>`) ||
		!strings.Contains(html, `<th align="left">bob</th><td>Reject</td>`) || strings.Contains(html, "ship") {
		t.Errorf("HTML:\n%s", html)
	}
}
