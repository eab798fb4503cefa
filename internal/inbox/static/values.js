// hitl web inbox: the rules of a free-text answer, as CheckValue of
// api/v1alpha1/validation writes them, to the message. The page refuses
// what the server would refuse before anything is sent, and checks the
// value of a sensitive answer, which the server only ever sees sealed.
// CheckValue leans on Go's parsers (time.Parse, net/mail, net/url,
// regexp); each is followed here as far as an answer can reach it. A
// pattern JavaScript cannot express is left to the server.
(function () {
  'use strict';

  // goQuote quotes s as Go's strconv.Quote (%q) does.
  function goQuote(s) {
    var out = '"';
    for (var ch of s) {
      var c = ch.codePointAt(0);
      if (ch === '"' || ch === '\\') { out += '\\' + ch; continue; }
      var esc = {7: '\\a', 8: '\\b', 12: '\\f', 10: '\\n', 13: '\\r', 9: '\\t', 11: '\\v'}[c];
      if (esc) { out += esc; continue; }
      if (c === 0x20 || /[\p{L}\p{M}\p{N}\p{P}\p{S}]/u.test(ch)) { out += ch; continue; }
      if (c < 0x80) { out += '\\x' + c.toString(16).padStart(2, '0'); continue; }
      if (c < 0x10000) { out += '\\u' + c.toString(16).padStart(4, '0'); continue; }
      out += '\\U' + c.toString(16).padStart(8, '0');
    }
    return out + '"';
  }

  // quote shows a value in a message, cut to 64 characters.
  function quote(v) {
    var r = Array.from(v);
    return r.length > 64 ? goQuote(r.slice(0, 64).join('')) + '…' : goQuote(v);
  }

  // ---- CheckValue ----
  var numberText = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/;
  var integerText = /^-?(0|[1-9][0-9]*)$/;
  var boundText = /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/;
  var int64Min = BigInt('-9223372036854775808');
  var int64Max = BigInt('9223372036854775807');

  // checkValue returns the rule a free-text answer breaks, in words, or ''
  // when the value fits. secret: the value is a sensitive answer's, which
  // a message calls "the answer" instead of showing it.
  function checkValue(input, value, secret) {
    if (!input) { return ''; }
    var shown = secret ? 'the answer' : quote(value);
    switch (input.type) {
    case 'number':
    case 'integer':
      return checkNumber(input, value, secret);
    case 'boolean':
      if (value !== 'true' && value !== 'false') { return shown + ' is not a boolean: answer true or false'; }
      break;
    case 'date':
      if (!isDate(value)) { return shown + ' is not a date (YYYY-MM-DD, e.g. 2026-12-24)'; }
      break;
    case 'dateTime':
      if (!isDateTime(value)) {
        return shown + ' is not a date and time with an offset (RFC 3339, e.g. 2026-12-24T18:00:00Z)';
      }
      break;
    case 'email':
      if (!isEmail(value)) { return shown + ' is not an email address (name@example.com, no display name)'; }
      break;
    case 'uri':
      if (!isURI(value)) { return shown + ' is not an absolute URI (with a scheme, e.g. https://example.com/x)'; }
      break;
    }
    return checkText(input, value);
  }

  function checkText(input, value) {
    var n = Array.from(value).length;
    if (input.minLength != null && n < input.minLength) {
      return 'the answer has ' + n + ' characters, fewer than minLength ' + input.minLength;
    }
    if (input.maxLength != null && n > input.maxLength) {
      return 'the answer has ' + n + ' characters, more than maxLength ' + input.maxLength;
    }
    if (input.pattern) {
      var re = patternRegExp(input.pattern);
      if (re && !re.test(value)) { return 'the answer does not match pattern ' + goQuote(input.pattern); }
    }
    return '';
  }

  // bound reads a minimum or maximum (a JSON integer, or a decimal as a
  // string) as validation.Bound does; null when there is none.
  function bound(b) {
    if (b === undefined || b === null) { return null; }
    var text = String(b);
    if (typeof b === 'string' && !boundText.test(text)) { return null; }
    var v = Number(text);
    return isFinite(v) ? {v: v, text: text} : null;
  }

  function checkNumber(input, value, secret) {
    var shown = secret ? 'the answer' : quote(value);
    var raw = secret ? 'the answer' : value;
    if (input.type === 'integer') {
      if (!integerText.test(value)) { return shown + ' is not an integer (decimal digits, e.g. 42)'; }
    } else if (!numberText.test(value)) {
      return shown + ' is not a number (e.g. 42, -1.5, 2e3)';
    }
    // Number rounds a decimal to the nearest float64, as strconv.ParseFloat
    // does.
    var v = Number(value);
    if (!isFinite(v)) { return shown + ' is out of range'; }
    if (input.type === 'integer') {
      var i = BigInt(value);
      if (i < int64Min || i > int64Max) { return shown + ' is out of the range of a 64-bit integer'; }
    }
    var lo = bound(input.minimum);
    if (lo && v < lo.v) { return raw + ' is below minimum ' + lo.text; }
    var hi = bound(input.maximum);
    if (hi && v > hi.v) { return raw + ' is above maximum ' + hi.text; }
    return '';
  }

  // ---- time.Parse ----
  function daysIn(month, year) {
    if (month === 2) { return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28; }
    return [31, 0, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
  }

  function validDay(year, month, day) {
    return month >= 1 && month <= 12 && day >= 1 && day <= daysIn(month, year);
  }

  // isDate: time.Parse(time.DateOnly, v) succeeds.
  function isDate(v) {
    var m = /^([0-9]{4})-([0-9]{2})-([0-9]{2})$/.exec(v);
    return !!m && validDay(+m[1], +m[2], +m[3]);
  }

  // isDateTime: validation.ParseDateTime succeeds: RFC 3339, each field
  // its full width, an offset up to 23:59.
  function isDateTime(v) {
    var m = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(Z|[-+]([0-9]{2}):([0-9]{2}))$/.exec(v);
    if (!m || !validDay(+m[1], +m[2], +m[3]) || +m[4] > 23 || +m[5] > 59 || +m[6] > 59) { return false; }
    return m[8] === 'Z' || (+m[9] <= 23 && +m[10] <= 59);
  }

  // ---- net/mail ----
  var whiteSpace = /\p{White_Space}/u; // unicode.IsSpace

  function isAtext(ch) {
    var c = ch.charCodeAt(0);
    return c >= 0x21 && c <= 0x7e && '()<>[]:;@\\,"'.indexOf(ch) < 0;
  }

  // dotAtom is the length of the dot-atom s starts with, or -1.
  function dotAtom(s) {
    var n = 0;
    while (n < s.length && isAtext(s[n])) { n++; }
    var atom = s.slice(0, n);
    if (n === 0 || atom[0] === '.' || atom.indexOf('..') >= 0 || atom[n - 1] === '.') { return -1; }
    return n;
  }

  // isEmail: validation's isEmail, the dot-atom form in ASCII. Without
  // the characters it refuses, all that mail.ParseAddress reads is a
  // dot-atom, @, and a dot-atom, with nothing after it.
  function isEmail(v) {
    if (v === '' || /[^\x00-\x7f]/.test(v) || whiteSpace.test(v) || /[<>"(),;[\]\\:]/.test(v)) { return false; }
    var n = dotAtom(v);
    if (n < 0 || v[n] !== '@') { return false; }
    var domain = v.slice(n + 1);
    return domain !== '' && dotAtom(domain) === domain.length;
  }

  // ---- net/netip ----
  // parseAddr reads an IP address as netip.ParseAddr does, for a URL's
  // host in brackets: {bytes (16), is4, zone}, or null.
  function parseAddr(s) {
    for (var i = 0; i < s.length; i++) {
      switch (s[i]) {
      case '.': return parseIPv4(s);
      case ':': return parseIPv6(s);
      case '%': return null;
      }
    }
    return null;
  }

  function ipv4Fields(s) {
    var fields = [];
    var val = 0;
    var digits = 0;
    for (var i = 0; i < s.length; i++) {
      var c = s.charCodeAt(i);
      if (c >= 0x30 && c <= 0x39) {
        if (digits === 1 && val === 0) { return null; }
        val = val * 10 + c - 0x30;
        digits++;
        if (val > 255) { return null; }
      } else if (s[i] === '.') {
        if (i === 0 || i === s.length - 1 || s[i - 1] === '.' || fields.length === 3) { return null; }
        fields.push(val);
        val = 0;
        digits = 0;
      } else {
        return null;
      }
    }
    if (fields.length < 3) { return null; }
    fields.push(val);
    return fields;
  }

  function parseIPv4(s) {
    var f = ipv4Fields(s);
    return f && {bytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255].concat(f), is4: true, zone: ''};
  }

  function parseIPv6(s) {
    var zone = '';
    var z = s.indexOf('%');
    if (z >= 0) {
      zone = s.slice(z + 1);
      s = s.slice(0, z);
      if (zone === '') { return null; }
    }
    var ip = new Array(16).fill(0);
    var ellipsis = -1;
    if (s.startsWith('::')) {
      ellipsis = 0;
      s = s.slice(2);
      if (s === '') { return {bytes: ip, is4: false, zone: zone}; }
    }
    var i = 0;
    while (i < 16) {
      var off = 0;
      var acc = 0;
      for (; off < s.length; off++) {
        var h = parseInt(s[off], 16);
        if (isNaN(h)) { break; }
        acc = acc * 16 + h;
        if (off > 3 || acc > 0xffff) { return null; }
      }
      if (off === 0) { return null; }
      if (s[off] === '.') {
        if ((ellipsis < 0 && i !== 12) || i + 4 > 16) { return null; }
        var f = ipv4Fields(s);
        if (!f) { return null; }
        ip.splice(i, 4, f[0], f[1], f[2], f[3]);
        s = '';
        i += 4;
        break;
      }
      ip[i] = acc >> 8;
      ip[i + 1] = acc & 0xff;
      i += 2;
      s = s.slice(off);
      if (s === '') { break; }
      if (s[0] !== ':' || s.length === 1) { return null; }
      s = s.slice(1);
      if (s[0] === ':') {
        if (ellipsis >= 0) { return null; }
        ellipsis = i;
        s = s.slice(1);
        if (s === '') { break; }
      }
    }
    if (s !== '') { return null; }
    if (i < 16) {
      if (ellipsis < 0) { return null; }
      var n = 16 - i;
      for (var j = i - 1; j >= ellipsis; j--) { ip[j + n] = ip[j]; }
      ip.fill(0, ellipsis, ellipsis + n);
    } else if (ellipsis >= 0) {
      return null;
    }
    return {bytes: ip, is4: false, zone: zone};
  }

  // ---- net/url ----
  var controlOrSpace = /[\p{White_Space}\p{Cc}]/u; // unicode.IsSpace or unicode.IsControl
  var hostByte = /[A-Za-z0-9\-_.~!$&'()*+,;=:[\]<>"]/;

  // isURI: validation's isURI: url.Parse takes it, with a scheme and
  // something after it other than an empty authority, and its escapes
  // are all whole.
  function isURI(v) {
    if (v === '' || controlOrSpace.test(v)) { return false; }
    var colon = parseURL(v);
    var rest = v.slice(colon + 1);
    return colon > 0 && rest !== '' && rest !== '//' && !/%(?![0-9A-Fa-f]{2})/.test(v);
  }

  // parseURL follows url.Parse for a URL with a scheme: the index of the
  // colon after the scheme, or -1 for a URL without one, or one url.Parse
  // refuses.
  function parseURL(raw) {
    var hash = raw.indexOf('#');
    var frag = hash < 0 ? '' : raw.slice(hash + 1);
    var rest = hash < 0 ? raw : raw.slice(0, hash);
    var colon = schemeEnd(rest);
    if (colon <= 0 || unescape(frag, '') === null) { return -1; }
    rest = rest.slice(colon + 1);
    if (rest.endsWith('?') && rest.indexOf('?') === rest.length - 1) {
      rest = rest.slice(0, -1);
    } else if (rest.indexOf('?') >= 0) {
      rest = rest.slice(0, rest.indexOf('?'));
    }
    if (rest.startsWith('//')) {
      var authority = rest.slice(2);
      var slash = authority.indexOf('/');
      rest = slash < 0 ? '' : authority.slice(slash);
      if (parseAuthority(slash < 0 ? authority : authority.slice(0, slash)) === null) { return -1; }
    }
    // An opaque part (a rest without a leading slash) is not unescaped.
    if (rest.startsWith('/') && unescape(rest, '') === null) { return -1; }
    return colon;
  }

  // schemeEnd is the index of the colon that ends raw's scheme: -1 when
  // raw has no scheme, 0 when it starts with a colon (an error).
  function schemeEnd(raw) {
    for (var i = 0; i < raw.length; i++) {
      var c = raw[i];
      if (/[A-Za-z]/.test(c)) { continue; }
      if (/[0-9+\-.]/.test(c) && i > 0) { continue; }
      return c === ':' ? i : -1;
    }
    return -1;
  }

  function parseAuthority(authority) {
    var at = authority.lastIndexOf('@');
    var host = parseHost(at < 0 ? authority : authority.slice(at + 1));
    if (host === null || at < 0) { return host; }
    var userinfo = authority.slice(0, at);
    if (!/^[A-Za-z0-9\-._:~!$&'()*+,;=%@]*$/.test(userinfo)) { return null; }
    var sep = userinfo.indexOf(':');
    var parts = sep < 0 ? [userinfo] : [userinfo.slice(0, sep), userinfo.slice(sep + 1)];
    return parts.every(function (p) { return unescape(p, '') !== null; }) ? host : null;
  }

  function parseHost(host) {
    var open = host.lastIndexOf('[');
    if (open > 0) { return null; }
    if (open === 0) {
      var close = host.lastIndexOf(']');
      if (close < 0) { return null; }
      var port = host.slice(close + 1);
      if (!validOptionalPort(port)) { return null; }
      var name = host.slice(1, close);
      var z = name.indexOf('%25');
      var plain = z < 0 ? unescape(name, 'host') : join(unescape(name.slice(0, z), 'host'), unescape(name.slice(z), 'zone'));
      if (plain === null) { return null; }
      var ip = parseAddr(plain);
      return ip && !ip.is4 ? '[' + plain + ']' + port : null;
    }
    // A host name holds no colon (validation refuses the ones url.Parse
    // takes before the port of a URL other than http and https).
    var i = host.indexOf(':');
    if (i >= 0 && !validOptionalPort(host.slice(i))) { return null; }
    return unescape(host, 'host');
  }

  function join(a, b) { return a === null || b === null ? null : a + b; }

  function validOptionalPort(port) { return /^(:[0-9]*)?$/.test(port); }

  // unescape decodes s's %-escapes as url's unescape does, checking them,
  // and in a host or zone its characters; null when url refuses them.
  function unescape(s, mode) {
    var out = '';
    for (var i = 0; i < s.length;) {
      var c = s[i];
      if (c !== '%') {
        if (mode && c.charCodeAt(0) < 0x80 && !hostByte.test(c)) { return null; }
        out += c;
        i++;
        continue;
      }
      var hex = s.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) { return null; }
      var v = parseInt(hex, 16);
      var pct25 = hex === '25';
      // A host escapes only non-ASCII bytes (and % in a zone); a zone
      // only what a host could hold as is, or a space.
      if (mode === 'host' && v < 0x80 && !pct25) { return null; }
      if (mode === 'zone' && !pct25 && v !== 0x20 && !(v < 0x80 && hostByte.test(String.fromCharCode(v)))) { return null; }
      out += String.fromCharCode(v);
      i += 3;
    }
    return out;
  }

  // ---- regexp ----
  // A pattern is RE2's syntax; JavaScript's differs in places. toRegExp
  // writes a pattern for JavaScript, or returns null when it cannot say
  // it the same way (flags inside the pattern, say): then the server is
  // the only one to check it.
  var patterns = new Map();

  function patternRegExp(p) {
    if (!patterns.has(p)) {
      var re = null;
      try { re = toRegExp(p); } catch (e) { re = null; }
      patterns.set(p, re);
    }
    return patterns.get(p);
  }

  var posixClasses = {
    alnum: '0-9A-Za-z', alpha: 'A-Za-z', ascii: '\\x00-\\x7f', blank: '\\t ', cntrl: '\\x00-\\x1f\\x7f',
    digit: '0-9', graph: '!-~', lower: 'a-z', print: ' -~', punct: '!-\\/:-@\\[-`{-~',
    space: '\\t\\n\\v\\f\\r ', upper: 'A-Z', word: '0-9A-Za-z_', xdigit: '0-9A-Fa-f'
  };
  // RE2's \s: JavaScript's also holds Unicode spaces.
  var re2Space = '\\t\\n\\f\\r ';

  function literal(s, inClass) {
    var special = inClass ? '\\]^-[' : '\\^$.*+?()[]{}|/';
    var out = '';
    for (var ch of s) { out += special.indexOf(ch) >= 0 ? '\\' + ch : ch; }
    return out;
  }

  function toRegExp(p) {
    var flags = 'u';
    var dotAll = false;
    var multiLine = false;
    var i = 0;
    var lead = /^\(\?([ims]+)\)/.exec(p);
    if (lead) {
      if (lead[1].indexOf('i') >= 0) { flags += 'i'; }
      dotAll = lead[1].indexOf('s') >= 0;
      multiLine = lead[1].indexOf('m') >= 0;
      i = lead[0].length;
    }
    var out = '';
    var inClass = false;
    var classStart = false;
    while (i < p.length) {
      var c = p[i];
      var first = classStart;
      classStart = false;
      if (c === '\\') {
        var e = escape(p, i, inClass);
        if (!e) { return null; }
        out += e.js;
        i = e.end;
        continue;
      }
      if (inClass) {
        var posix = /^\[:(\^?[a-z]+):\]/.exec(p.slice(i));
        if (posix) {
          if (!(posix[1] in posixClasses)) { return null; } // a negated one too
          out += posixClasses[posix[1]];
          i += posix[0].length;
        } else if (c === ']' && !first) {
          inClass = false;
          out += ']';
          i++;
        } else {
          // A ] first in a class is in it, for RE2.
          out += c === ']' ? '\\]' : c;
          i++;
        }
        continue;
      }
      var rep;
      switch (c) {
      case '[':
        inClass = classStart = true;
        out += '[';
        i++;
        if (p[i] === '^') { out += '^'; i++; }
        continue;
      case '.':
        out += dotAll ? '[\\s\\S]' : '[^\\n]';
        break;
      case '^':
        out += multiLine ? '(?<![^\\n])' : '^';
        break;
      case '$':
        out += multiLine ? '(?![^\\n])' : '$';
        break;
      case '(':
        if (p[i + 1] !== '?') {
          out += '(';
        } else if (p.startsWith('(?:', i)) {
          out += '(?:';
          i += 2;
        } else if (p.startsWith('(?P<', i) || p.startsWith('(?<', i)) {
          out += '(?<';
          i = p.indexOf('<', i);
        } else {
          return null;
        }
        break;
      case '{':
        rep = /^\{[0-9]+(,[0-9]*)?\}/.exec(p.slice(i));
        if (rep && out !== '') {
          out += rep[0];
          i += rep[0].length;
          continue;
        }
        out += '\\{';
        break;
      case '}':
      case ']':
        out += '\\' + c;
        break;
      default:
        out += c;
      }
      i++;
    }
    return new RegExp(out, flags);
  }

  // escape translates the escape at p[i]: {js, end} or null.
  function escape(p, i, inClass) {
    var n = p[i + 1];
    var close;
    if (n === undefined) { return null; }
    switch (n) {
    case 'Q':
      close = p.indexOf('\\E', i + 2);
      return {js: literal(close < 0 ? p.slice(i + 2) : p.slice(i + 2, close), inClass), end: close < 0 ? p.length : close + 2};
    case 'A':
      return inClass ? null : {js: '(?<![\\s\\S])', end: i + 2};
    case 'z':
      return inClass ? null : {js: '(?![\\s\\S])', end: i + 2};
    case 's':
      return {js: inClass ? re2Space : '[' + re2Space + ']', end: i + 2};
    case 'S':
      return inClass ? null : {js: '[^' + re2Space + ']', end: i + 2};
    case 'a':
      return {js: '\\x07', end: i + 2};
    case 'p':
    case 'P':
      var name = p[i + 2];
      var end = i + 3;
      if (name === '{') {
        close = p.indexOf('}', i + 3);
        if (close < 0) { return null; }
        name = p.slice(i + 3, close);
        end = close + 1;
      }
      var negated = n === 'P';
      if (name[0] === '^') {
        negated = !negated;
        name = name.slice(1);
      }
      // A one- or two-letter name is a general category, any other a script.
      if (name !== 'Any' && !/^[A-Z][a-z]?$/.test(name)) { name = 'Script=' + name; }
      return {js: (negated ? '\\P{' : '\\p{') + name + '}', end: end};
    case 'x':
      if (p[i + 2] !== '{') { return {js: '\\x', end: i + 2}; }
      close = p.indexOf('}', i + 3);
      return close < 0 ? null : {js: '\\u{' + p.slice(i + 3, close) + '}', end: close + 1};
    }
    if (/[0-7]/.test(n)) {
      // An octal character code, up to three digits; \1 to \7 alone are
      // backreferences, which RE2 does not have.
      var oct = /^[0-7]{1,3}/.exec(p.slice(i + 1))[0];
      if (n !== '0' && oct.length === 1) { return null; }
      return {js: '\\u{' + parseInt(oct, 8).toString(16) + '}', end: i + 1 + oct.length};
    }
    if (/[0-9A-Za-z]/.test(n)) { return {js: '\\' + n, end: i + 2}; }
    // Escaped punctuation is itself.
    return {js: literal(n, inClass), end: i + 2};
  }

  window.hitlValues = {checkValue: checkValue, goQuote: goQuote};
})();
