package manager

import (
	"crypto/x509"
	"slices"
	"testing"
	"time"
)

func TestRenew(t *testing.T) {
	hosts := []string{"hitl-webhook-service.hitl-system.svc", "hitl-webhook-service.hitl-system.svc.cluster.local"}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	first, changed, err := renew(nil, hosts, now)
	if err != nil || !changed {
		t.Fatalf("an empty Secret: changed %t, %v", changed, err)
	}
	ca, cert := verify(t, first, hosts[0], now)

	if _, changed, _ := renew(first, hosts, now.Add(24*time.Hour)); changed {
		t.Error("a valid certificate was replaced")
	}

	// Less than a third of its life left: a new serving certificate from
	// the same CA, so the injected bundle stays valid throughout.
	later := now.Add(250 * 24 * time.Hour)
	renewed, changed, err := renew(first, hosts, later)
	if err != nil || !changed {
		t.Fatalf("an ageing certificate: changed %t, %v", changed, err)
	}
	ca2, cert2 := verify(t, renewed, hosts[0], later)
	if !ca2.Equal(ca) || cert2.Equal(cert) {
		t.Error("want a new serving certificate from the same CA")
	}

	// Another Service (a new namePrefix): a certificate that names it.
	other := []string{"qa-hitl-webhook-service.team-a.svc"}
	moved, changed, err := renew(first, other, now)
	if err != nil || !changed {
		t.Fatalf("other hosts: changed %t, %v", changed, err)
	}
	verify(t, moved, other[0], now)

	// The CA nearing its end (less than a serving certificate's life left):
	// both are new.
	late := now.Add(caLifetime - 300*24*time.Hour)
	both, changed, err := renew(first, hosts, late)
	if err != nil || !changed {
		t.Fatalf("an ageing CA: changed %t, %v", changed, err)
	}
	if ca3, _ := verify(t, both, hosts[0], late); ca3.Equal(ca) {
		t.Error("the CA was kept past its renewal time")
	}

	// Garbage in the Secret (hand-edited, truncated): replaced.
	broken := map[string][]byte{keyCACert: []byte("x"), keyCAKey: first[keyCAKey], keyCert: first[keyCert], keyKey: []byte("y")}
	fixed, changed, err := renew(broken, hosts, now)
	if err != nil || !changed {
		t.Fatalf("a broken Secret: changed %t, %v", changed, err)
	}
	verify(t, fixed, hosts[0], now)
}

// verify checks that the serving certificate of data is valid for host at
// now under the CA of data, and returns both.
func verify(t *testing.T, data map[string][]byte, host string, now time.Time) (ca, cert *x509.Certificate) {
	t.Helper()
	ca, _, err := parsePair(data[keyCACert], data[keyCAKey])
	if err != nil {
		t.Fatalf("CA: %v", err)
	}
	cert, _, err = parsePair(data[keyCert], data[keyKey])
	if err != nil {
		t.Fatalf("serving certificate: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: now}); err != nil {
		t.Errorf("the serving certificate does not verify for %s: %v", host, err)
	}
	if !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Error("not a server certificate")
	}
	return ca, cert
}
