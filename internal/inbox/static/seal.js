// hitl web inbox: seals the answer of a sensitive question in the browser,
// with WebCrypto, exactly as pkg/sealed's Seal does, so that only the
// asking agent (the holder of spec.sealingKey's private key) can read it
// and the inbox server never sees it:
//
//   version 1 || ephemeral P-256 public key (65 bytes, uncompressed)
//   || 12-byte nonce || AES-256-GCM ciphertext, in unpadded base64url;
//   key = HKDF-SHA256(ECDH shared secret, salt = ephemeral || recipient
//   public key, info), info = "hitl.dev/sealed/v1" NUL namespace NUL
//   question NUL uid NUL question id, also the AEAD's additional data.
(function () {
  'use strict';

  var maxValue = 8192; // sealed.MaxValue, in bytes

  function b64url(bytes) {
    var s = '';
    bytes.forEach(function (b) { s += String.fromCharCode(b); });
    return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  function fromB64url(s) {
    var bin = atob(s.replace(/-/g, '+').replace(/_/g, '/'));
    return Uint8Array.from(bin, function (c) { return c.charCodeAt(0); });
  }

  function concat() {
    var parts = Array.prototype.slice.call(arguments).map(function (p) { return new Uint8Array(p); });
    var out = new Uint8Array(parts.reduce(function (n, p) { return n + p.length; }, 0));
    var at = 0;
    parts.forEach(function (p) { out.set(p, at); at += p.length; });
    return out;
  }

  // available reports whether the browser can seal: WebCrypto exists only
  // in a secure context (HTTPS, or a page on localhost).
  function available() {
    return !!(window.isSecureContext && window.crypto && window.crypto.subtle);
  }

  // seal seals value to publicKey for binding {namespace, question, uid,
  // id}; the promise fails with a message for the person.
  function seal(publicKey, binding, value) {
    if (!available()) {
      return Promise.reject(new Error('this browser cannot seal a sensitive answer here: WebCrypto needs a secure ' +
        'context (the inbox over HTTPS, or on localhost)'));
    }
    var plain = new TextEncoder().encode(value);
    if (plain.length > maxValue) {
      return Promise.reject(new Error('a sensitive answer is at most ' + maxValue + ' bytes, not ' + plain.length));
    }
    var subtle = window.crypto.subtle;
    var ecdh = {name: 'ECDH', namedCurve: 'P-256'};
    var info = new TextEncoder().encode(['hitl.dev/sealed/v1', binding.namespace, binding.question, binding.uid, binding.id].join('\0'));
    var recipient;
    try {
      recipient = fromB64url(publicKey);
    } catch (e) {
      return Promise.reject(new Error("the question's sealing key is not unpadded base64url"));
    }
    var ephemeral, ephemeralPub;
    return Promise.all([
      subtle.importKey('raw', recipient, ecdh, false, []).catch(function () {
        throw new Error("the question's sealing key is not a P-256 point");
      }),
      subtle.generateKey(ecdh, true, ['deriveBits'])
    ]).then(function (keys) {
      ephemeral = keys[1];
      return Promise.all([
        subtle.exportKey('raw', ephemeral.publicKey),
        subtle.deriveBits({name: 'ECDH', public: keys[0]}, ephemeral.privateKey, 256)
      ]);
    }).then(function (r) {
      ephemeralPub = new Uint8Array(r[0]);
      return subtle.importKey('raw', r[1], 'HKDF', false, ['deriveKey']);
    }).then(function (secret) {
      return subtle.deriveKey({name: 'HKDF', hash: 'SHA-256', salt: concat(ephemeralPub, recipient), info: info},
        secret, {name: 'AES-GCM', length: 256}, false, ['encrypt']);
    }).then(function (aes) {
      var nonce = window.crypto.getRandomValues(new Uint8Array(12));
      return subtle.encrypt({name: 'AES-GCM', iv: nonce, additionalData: info}, aes, plain).then(function (ct) {
        return b64url(concat([1], ephemeralPub, nonce, ct));
      });
    });
  }

  window.hitlSeal = {available: available, seal: seal};
})();
