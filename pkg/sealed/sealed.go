// Package sealed seals the answers of sensitive questions to the asking
// agent, so that only the agent can read them: not the API server's
// storage, not the manager, not another reader of the question or reply.
//
// The agent makes a Key and asks with its public key in spec.sealingKey;
// an answerer seals the value with Seal, and the reply carries only the
// result (AnswerItem.Sealed); the agent opens it with Key.Open.
//
// A sealed value is, in unpadded base64url: the version byte 1, the
// sender's ephemeral ECDH P-256 public key (65 bytes, uncompressed), a
// 12-byte nonce, and the AES-256-GCM ciphertext of the value. The AES key
// is HKDF-SHA256 of the ECDH shared secret, salted with the ephemeral and
// the recipient public keys; the HKDF info, also the AEAD's additional
// data, binds the value to its question (Binding), so a sealed value copied
// into a reply for another question, or another question id, does not open.
// The web inbox seals in the browser with WebCrypto the same way.
package sealed

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

const (
	version   = 1
	pointSize = 65
	nonceSize = 12
	// MaxValue is the longest value, in bytes, that may be sealed: the
	// limit of a free-text answer.
	MaxValue = 8192
)

var enc = base64.RawURLEncoding

// Binding names what a sealed value answers: the question (namespace, name
// and UID) and the question id within its ask.
type Binding struct {
	Namespace string
	Question  string
	UID       string
	ID        string
}

// info is the HKDF info and the AEAD's additional data.
func (b Binding) info() []byte {
	return []byte(strings.Join([]string{"hitl.dev/sealed/v1", b.Namespace, b.Question, b.UID, b.ID}, "\x00"))
}

// Key is an agent's sealing key pair. Keep it in memory for as long as
// the agent may read its answers, or persist it with Bytes and ParseKey.
type Key struct {
	priv *ecdh.PrivateKey
}

// NewKey makes a new key pair.
func NewKey() (*Key, error) {
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("making a sealing key: %w", err)
	}
	return &Key{priv: priv}, nil
}

// ParseKey reads a key written by Bytes.
func ParseKey(b []byte) (*Key, error) {
	raw, err := enc.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("reading a sealing key: %w", err)
	}
	priv, err := ecdh.P256().NewPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("reading a sealing key: %w", err)
	}
	return &Key{priv: priv}, nil
}

// Bytes is the private key, to be kept as a secret (unpadded base64url).
func (k *Key) Bytes() []byte { return []byte(enc.EncodeToString(k.priv.Bytes())) }

// PublicKey is the value for spec.sealingKey.
func (k *Key) PublicKey() string { return enc.EncodeToString(k.priv.PublicKey().Bytes()) }

// Seal seals value to the public key of a question's spec.sealingKey, for
// the question and id of b.
func Seal(publicKey string, b Binding, value string) (string, error) {
	if len(value) > MaxValue {
		return "", fmt.Errorf("a sensitive answer is at most %d bytes, not %d", MaxValue, len(value))
	}
	raw, err := enc.DecodeString(publicKey)
	if err != nil {
		return "", fmt.Errorf("the question's sealing key is not unpadded base64url: %w", err)
	}
	recipient, err := ecdh.P256().NewPublicKey(raw)
	if err != nil {
		return "", fmt.Errorf("the question's sealing key is not a P-256 point: %w", err)
	}
	eph, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	shared, err := eph.ECDH(recipient)
	if err != nil {
		return "", err
	}
	aead, err := aeadFor(shared, eph.PublicKey(), recipient, b)
	if err != nil {
		return "", err
	}
	out := make([]byte, 0, 1+pointSize+nonceSize+len(value)+aead.Overhead())
	out = append(out, version)
	out = append(out, eph.PublicKey().Bytes()...)
	nonce := make([]byte, nonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out = append(out, nonce...)
	out = aead.Seal(out, nonce, []byte(value), b.info())
	return enc.EncodeToString(out), nil
}

// ErrNotOpened is returned when a sealed value does not open with the key
// for the binding: sealed to another key, for another question or id, or
// changed.
var ErrNotOpened = errors.New("the sealed answer does not open with this key for this question")

// Open opens a sealed value of b's question and id.
func (k *Key) Open(sealedValue string, b Binding) (string, error) {
	raw, err := enc.DecodeString(sealedValue)
	if err != nil || len(raw) < 1+pointSize+nonceSize+16 || raw[0] != version {
		return "", ErrNotOpened
	}
	sender, err := ecdh.P256().NewPublicKey(raw[1 : 1+pointSize])
	if err != nil {
		return "", ErrNotOpened
	}
	shared, err := k.priv.ECDH(sender)
	if err != nil {
		return "", ErrNotOpened
	}
	aead, err := aeadFor(shared, sender, k.priv.PublicKey(), b)
	if err != nil {
		return "", ErrNotOpened
	}
	nonce := raw[1+pointSize : 1+pointSize+nonceSize]
	plain, err := aead.Open(nil, nonce, raw[1+pointSize+nonceSize:], b.info())
	if err != nil {
		return "", ErrNotOpened
	}
	return string(plain), nil
}

// aeadFor derives the AES-256-GCM of a sealed value from the ECDH shared
// secret, the sender's ephemeral and the recipient's public keys, and b.
func aeadFor(shared []byte, ephemeral, recipient *ecdh.PublicKey, b Binding) (cipher.AEAD, error) {
	salt := append(append([]byte{}, ephemeral.Bytes()...), recipient.Bytes()...)
	key, err := hkdf.Key(sha256.New, shared, salt, string(b.info()), 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
