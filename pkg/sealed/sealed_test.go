package sealed_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hitl-dev/hitl/pkg/sealed"
)

var where = sealed.Binding{Namespace: "team-a", Question: "deploy-1", UID: "0b6f7e1c-uid", ID: "token"}

func TestSealedOpensOnlyWithItsKeyForItsQuestion(t *testing.T) {
	agent, err := sealed.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := sealed.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if got := agent.PublicKey(); len(got) != 87 {
		t.Fatalf("public key %q is %d characters, the CRD takes 87", got, len(got))
	}
	box, err := sealed.Seal(agent.PublicKey(), where, "s3cr3t-ключ")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(box, "s3cr3t") {
		t.Fatalf("sealed value %q shows the plain text", box)
	}
	got, err := agent.Open(box, where)
	if err != nil || got != "s3cr3t-ключ" {
		t.Fatalf("Open = %q, %v; want the value", got, err)
	}
	again, _ := sealed.Seal(agent.PublicKey(), where, "s3cr3t-ключ")
	if again == box {
		t.Fatal("two seals of one value are equal: the ephemeral key or nonce is not fresh")
	}

	for name, b := range map[string]sealed.Binding{
		"another namespace": {Namespace: "team-b", Question: where.Question, UID: where.UID, ID: where.ID},
		"another question":  {Namespace: where.Namespace, Question: "deploy-2", UID: where.UID, ID: where.ID},
		"another UID":       {Namespace: where.Namespace, Question: where.Question, UID: "x", ID: where.ID},
		"another id":        {Namespace: where.Namespace, Question: where.Question, UID: where.UID, ID: "otp"},
	} {
		if _, err := agent.Open(box, b); !errors.Is(err, sealed.ErrNotOpened) {
			t.Errorf("%s: Open = %v, want ErrNotOpened", name, err)
		}
	}
	if _, err := other.Open(box, where); !errors.Is(err, sealed.ErrNotOpened) {
		t.Errorf("another key: Open = %v, want ErrNotOpened", err)
	}
	// Every single flipped character is refused, never a different value.
	for i := range box {
		c := byte('A')
		if box[i] == 'A' {
			c = 'B'
		}
		bad := box[:i] + string(c) + box[i+1:]
		if v, err := agent.Open(bad, where); err == nil && v != "s3cr3t-ключ" {
			t.Fatalf("flipping character %d opened to %q", i, v)
		} else if err == nil && i < len(box)-1 {
			t.Fatalf("flipping character %d still opened", i)
		}
	}
	for _, junk := range []string{"", "AQ", "!!!", strings.Repeat("A", 200)} {
		if _, err := agent.Open(junk, where); !errors.Is(err, sealed.ErrNotOpened) {
			t.Errorf("Open(%q) = %v, want ErrNotOpened", junk, err)
		}
	}
}

func TestKeyRoundTripsAndRefusesBadInput(t *testing.T) {
	k, err := sealed.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	back, err := sealed.ParseKey(k.Bytes())
	if err != nil || back.PublicKey() != k.PublicKey() {
		t.Fatalf("ParseKey(Bytes) = %v, %v", back, err)
	}
	box, _ := sealed.Seal(k.PublicKey(), where, "v")
	if v, err := back.Open(box, where); err != nil || v != "v" {
		t.Fatalf("a parsed key opens %q, %v", v, err)
	}
	if _, err := sealed.ParseKey([]byte("not a key")); err == nil {
		t.Error("ParseKey accepted junk")
	}
	if _, err := sealed.Seal("AAAA", where, "v"); err == nil {
		t.Error("Seal accepted a key that is no P-256 point")
	}
	if _, err := sealed.Seal(k.PublicKey(), where, strings.Repeat("x", sealed.MaxValue+1)); err == nil {
		t.Error("Seal accepted a value above MaxValue")
	}
	long, err := sealed.Seal(k.PublicKey(), where, strings.Repeat("x", sealed.MaxValue))
	if err != nil || len(long) > 11264 {
		t.Fatalf("the longest value seals to %d characters (%v); the CRD takes 11264", len(long), err)
	}
}
