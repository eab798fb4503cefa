// hitl web inbox: keeps the list of questions live from the server's
// events, holds a claim while a timed card is open and its person active,
// checks an answer batch with the rules of pkg/validation, seals the
// answers of sensitive questions (seal.js), and sends it.
// No dependencies, no build step: the server embeds this file, values.js
// and seal.js as they are.
(function () {
  'use strict';

  var goQuote = window.hitlValues.goQuote;
  var checkValue = window.hitlValues.checkValue;

  // ---- The answer-batch rules of pkg/validation (ValidateAnswers) ----
  // questions: [{id, options: [label], multiSelect, approval, input, sensitive}]
  // answers:   [{id, selected: [label], custom, sealed}]
  // Returns null, or {code, questionID, field, rule, message} where message
  // reads exactly as the Go error's Error(). The page's own answers may
  // instead carry plain, the value of a sensitive answer before it is
  // sealed, which the page checks as the server cannot.

  function badAnswer(questionID, field, rule) {
    var msg = 'BAD_ANSWER: ';
    if (questionID) { msg += 'question ' + questionID + ': '; }
    msg += rule;
    if (field) { msg += ' (' + field + ')'; }
    return {code: 'BAD_ANSWER', questionID: questionID, field: field, rule: rule, message: msg};
  }

  function skipped(a) { return (a.selected || []).length === 0 && !a.custom && !a.sealed && !a.plain; }

  function validateItem(q, a, field) {
    var selected = a.selected || [];
    if (q.approval && (selected.length !== 1 || a.custom)) {
      return badAnswer(q.id, field, 'an Approval question takes exactly one selected label and no custom text');
    }
    if (q.options.length === 0 && selected.length > 0) {
      return badAnswer(q.id, field + '.selected', 'the question has no options: answer with custom text or skip it');
    }
    if (q.sensitive) {
      if (selected.length > 0 || a.custom) {
        return badAnswer(q.id, field,
          'the question is sensitive: its answer is sealed (sealed), never plain text in selected or custom');
      }
    } else if (a.sealed || a.plain) {
      return badAnswer(q.id, field + '.sealed', 'the question is not sensitive: answer it in selected or custom, not sealed');
    }
    if (skipped(a) && q.input && q.input.required) {
      return badAnswer(q.id, field, 'the question is required (input.required): it may not be skipped');
    }
    var why = a.custom ? checkValue(q.input, a.custom) : '';
    if (why) {
      return badAnswer(q.id, field + '.custom', why + ' (input.type ' + q.input.type + ')');
    }
    why = a.plain ? checkValue(q.input, a.plain, true) : '';
    if (why) {
      return badAnswer(q.id, field + '.sealed', why + ' (input.type ' + q.input.type + ')');
    }
    var picked = new Set();
    for (var j = 0; j < selected.length; j++) {
      var s = selected[j];
      if (q.options.indexOf(s) < 0) {
        return badAnswer(q.id, field + '.selected[' + j + ']', goQuote(s) + ' is not an option of the question');
      }
      if (picked.has(s)) {
        return badAnswer(q.id, field + '.selected[' + j + ']', goQuote(s) + ' is selected more than once');
      }
      picked.add(s);
    }
    if (!q.multiSelect) {
      if (selected.length > 1) {
        return badAnswer(q.id, field + '.selected', 'the question is single-select: select at most one label');
      }
      if (a.custom && selected.length > 0) {
        return badAnswer(q.id, field + '.selected',
          'the question is single-select: custom text replaces the choice, so selected must be empty');
      }
    }
    return null;
  }

  function validateAnswers(questions, answers) {
    var byID = new Map();
    questions.forEach(function (q) { byID.set(q.id, q); });
    var seen = new Set();
    var skips = 0;
    for (var i = 0; i < answers.length; i++) {
      var a = answers[i];
      var field = 'spec.answers[' + i + ']';
      var q = byID.get(a.id);
      if (!q) { return badAnswer(a.id, field + '.id', 'not a question of the ask'); }
      if (seen.has(a.id)) { return badAnswer(a.id, field + '.id', 'answered more than once'); }
      seen.add(a.id);
      var err = validateItem(q, a, field);
      if (err) { return err; }
      if (skipped(a)) { skips++; }
    }
    for (var k = 0; k < questions.length; k++) {
      if (!seen.has(questions[k].id)) {
        return badAnswer(questions[k].id, 'spec.answers',
          'not answered: a batch names every question of the ask exactly once ' +
          '(skip it with an item that has no selected and no custom)');
      }
    }
    if (answers.length > 0 && skips === answers.length) {
      return badAnswer('', 'spec.answers', 'a batch may skip some questions, not all of them');
    }
    return null;
  }
  window.hitlValidateAnswers = validateAnswers;

  // badInput says what a control holds that it cannot make a value of
  // (its value is then empty): "1e" in a number field, a date half
  // filled in.
  var badInput = {
    number: 'the field does not hold a number (e.g. 42, -1.5, 2e3)',
    integer: 'the field does not hold an integer (decimal digits, e.g. 42)',
    date: 'the field does not hold a whole date: fill in its day, month and year',
    dateTime: 'the field does not hold a whole date and time: fill in each of its parts'
  };

  // checkControls returns, as validateAnswers does, the first answer
  // whose control holds no value it can send.
  function checkControls(questions, answers) {
    for (var i = 0; i < answers.length; i++) {
      var a = answers[i];
      if (a.bad) {
        var q = questions.find(function (q) { return q.id === a.id; });
        var type = q && q.input ? q.input.type : '';
        return badAnswer(a.id, 'spec.answers[' + i + '].custom',
          (badInput[type] || 'the field does not hold a value') + (type ? ' (input.type ' + type + ')' : ''));
      }
    }
    return null;
  }

  var list = document.querySelector('[data-cards]');
  if (!list) { return; } // loaded for its validator only

  // ---- Page state ----
  function meta(name) {
    var m = document.querySelector('meta[name="' + name + '"]');
    return m ? m.content : '';
  }
  // The page's calls are relative to the inbox's root, which a question's
  // deep link (/q/<namespace>/<name>) is two levels below.
  var root = meta('hitl-root');
  // The key (namespace/name) of the question a deep link names, until its
  // card is shown.
  var focusKey = meta('hitl-focus');
  var csrf = meta('hitl-csrf');
  var heartbeatMs = Number(meta('hitl-heartbeat')) || 10000;
  var inactiveMs = Number(meta('hitl-inactive')) || 120000;
  var skew = 0; // server clock - local clock, ms
  var cards = new Map(); // key -> card state
  var lastActivity = Date.now();
  ['keydown', 'pointerdown', 'pointermove', 'focusin', 'input', 'wheel', 'touchstart'].forEach(function (t) {
    window.addEventListener(t, function () { lastActivity = Date.now(); }, {passive: true, capture: true});
  });
  function now() { return Date.now() + skew; }
  function personActive() {
    return document.visibilityState === 'visible' && Date.now() - lastActivity < inactiveMs;
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function post(path, body, keepalive) {
    return fetch(root + path, {
      method: 'POST', credentials: 'same-origin', keepalive: !!keepalive,
      headers: {'Content-Type': 'application/json', 'X-Hitl-Csrf': csrf},
      body: JSON.stringify(body)
    }).then(function (res) {
      if (res.status === 204) { return {status: res.status, body: {}}; }
      return res.json().then(function (b) { return {status: res.status, body: b}; },
        function () { return {status: res.status, body: {message: 'HTTP ' + res.status}}; });
    });
  }

  // ---- Time ----
  function clockText(ms) {
    var s = Math.max(0, Math.round(ms / 1000));
    var m = Math.floor(s / 60);
    if (m >= 60) { return Math.floor(m / 60) + 'h' + String(m % 60).padStart(2, '0') + 'm'; }
    return m + ':' + String(s % 60).padStart(2, '0');
  }
  function ageText(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) { return s + 's'; }
    if (s < 3600) { return Math.floor(s / 60) + 'm'; }
    if (s < 86400) { return Math.floor(s / 3600) + 'h'; }
    return Math.floor(s / 86400) + 'd';
  }
  function tick() {
    list.querySelectorAll('[data-since]').forEach(function (e) {
      e.textContent = ageText(now() - Number(e.dataset.since));
    });
    list.querySelectorAll('[data-deadline]').forEach(function (e) {
      var left = Number(e.dataset.deadline) - now();
      e.textContent = left > 0 ? clockText(left) + ' left' : 'window closing';
    });
    cards.forEach(function (c) { if (c.claim) { showClaim(c); } });
  }
  setInterval(tick, 1000);

  // ---- The list ----
  function setConnection(text, problem) {
    var e = document.querySelector('[data-connection]');
    e.textContent = text;
    e.classList.toggle('problem', !!problem);
  }
  function updateEmpty() {
    document.querySelector('[data-empty]').hidden = list.children.length > 0;
  }

  function insertCard(item) {
    var t = document.createElement('template');
    t.innerHTML = item.card; // rendered and escaped by the server's html/template
    var li = t.content.firstElementChild;
    var before = null;
    for (var n = list.firstElementChild; n; n = n.nextElementSibling) {
      if (n.dataset.order > item.order) { before = n; break; }
    }
    list.insertBefore(li, before);
    var c = {key: item.key, li: li, rv: item.rv, state: item.state, claim: null, answered: false, done: false, voted: false,
      spec: JSON.parse(li.dataset.spec), namespace: li.dataset.namespace, name: li.dataset.name, uid: li.dataset.uid,
      digest: li.dataset.digest, sealingKey: li.dataset.sealingKey || ''};
    cards.set(item.key, c);
    if (!window.hitlSeal.available()) {
      li.querySelectorAll('fieldset[data-sensitive] [data-field-error]').forEach(function (e) {
        e.before(el('p', 'problem', noSealing));
      });
    }
    return c;
  }

  function upsert(item) {
    var c = cards.get(item.key);
    if (!c) {
      if (!item.active || !item.card) { return; }
      c = insertCard(item);
    } else if (c.rv === item.rv) {
      return;
    } else {
      c.li.querySelector('[data-status]').innerHTML = item.status; // server-rendered, escaped
    }
    var was = c.state;
    c.rv = item.rv;
    c.state = item.state;
    c.li.dataset.state = item.state;
    // The reply is bound to the question the card shows: a card made
    // before the controller wrote the question's digest takes it now.
    if (!c.digest && item.digest) { c.digest = item.digest; }
    setVoted(c, !!item.voted);
    if (!item.active) {
      finish(c, item.state === 'Cancelled' ? 'The agent cancelled this question.' :
        'This question was settled' + (c.answered ? '.' : ' by another answer.'));
    } else if (was === 'Open' && item.state === 'Continued' && c.claim) {
      dropClaim(c, 'The window has closed: your answer will be queued until the agent takes it.');
    }
    if (item.key === focusKey) { showLinked(item); }
    tick();
  }

  // ---- A deep link ----
  // showLinked shows the card a deep link names, opened (which claims a
  // timed question, as opening it by hand does), once the person's list
  // has it; until then, or when the list has it only as finished, the
  // note says why it is not there.
  function showLinked(item) {
    var c = cards.get(focusKey);
    if (c && !c.done) {
      focusKey = '';
      focusNote('');
      c.li.classList.add('linked');
      c.li.scrollIntoView({block: 'start'});
      if (c.voted) {
        c.li.tabIndex = -1;
        c.li.focus();
      } else if (!c.li.classList.contains('open')) {
        open(c, true);
      }
      return;
    }
    var name = focusKey;
    if (item && !item.active && item.state === 'Cancelled') {
      focusNote('Question ' + name + ' is no longer open: its agent cancelled it.');
    } else if (item && !item.active) {
      focusNote('Question ' + name + ' is no longer open: it has been answered.');
    } else {
      focusNote('Question ' + name + ' is not open in your inbox: it does not exist (any more), ' +
        'or you may not see it. Your other questions are below.');
    }
  }

  function focusNote(text) {
    var note = document.querySelector('[data-focus-note]');
    if (!note) { return; }
    note.querySelector('[data-focus-text]').textContent = text;
    note.classList.toggle('problem', !!text);
    note.hidden = !text;
  }

  // setVoted shows that the person has voted on a governed question (its
  // status says how), and takes the answer controls away: each person
  // votes once. A card left open keeps showing the outcome of the vote
  // until it is closed. A vote that goes (a queued one withdrawn) gives
  // them back.
  function setVoted(c, voted) {
    if (c.voted === voted) { return; }
    c.voted = voted;
    c.li.classList.toggle('voted', voted);
    c.li.querySelector('[data-form]').hidden = voted;
    var toggle = c.li.querySelector('[data-action="toggle"]');
    if (voted) {
      releaseClaim(c);
      toggle.hidden = !c.li.classList.contains('open');
    } else {
      toggle.hidden = false;
    }
  }

  function remove(key) {
    var c = cards.get(key);
    if (!c) { return; }
    if (c.answered) { finish(c, 'This question is gone.'); return; }
    releaseClaim(c);
    cards.delete(key);
    c.li.remove();
    updateEmpty();
  }

  function handle(msg) {
    if (msg.now) { skew = msg.now - Date.now(); }
    if (msg.csrf) { csrf = msg.csrf; }
    switch (msg.type) {
    case 'reset':
      var keys = new Set();
      var linked = null;
      (msg.items || []).forEach(function (it) {
        keys.add(it.key);
        upsert(it);
        if (it.key === focusKey) { linked = it; }
      });
      Array.from(cards.keys()).forEach(function (k) { if (!keys.has(k)) { remove(k); } });
      // The whole list is in: a linked question it lacks is not there.
      if (focusKey) { showLinked(linked); }
      setConnection('Live');
      problem('');
      break;
    case 'upsert': upsert(msg.item); break;
    case 'delete': remove(msg.key); break;
    case 'problem':
      problem(msg.problem);
      // The list cannot be had: the linked question is not shown either.
      if (focusKey && msg.problem) { showLinked(null); }
      break;
    }
    updateEmpty();
  }

  function problem(text) {
    var e = document.querySelector('[data-problem]');
    if (!e) {
      e = el('p', 'problem');
      e.setAttribute('role', 'alert');
      e.dataset.problem = '';
      document.querySelector('header.top').appendChild(e);
    }
    e.textContent = text;
    e.hidden = !text;
  }

  function connect() {
    var es = new EventSource(root + 'events' + location.search);
    es.onmessage = function (ev) { handle(JSON.parse(ev.data)); };
    es.onerror = function () {
      setConnection('Reconnecting…', true);
      // An answer other than a stream (429: this person has too many
      // inbox pages open; a proxy's 5xx) closes an EventSource for good:
      // open another later.
      if (es.readyState === EventSource.CLOSED) { setTimeout(connect, 10000); }
    };
  }

  // ---- A card ----
  function open(c, yes) {
    var btn = c.li.querySelector('[data-action="toggle"]');
    btn.setAttribute('aria-expanded', String(yes));
    btn.textContent = yes ? 'Close' : 'Answer';
    c.li.querySelector('.card-body').hidden = !yes;
    c.li.classList.toggle('open', yes);
    if (!yes && c.voted) { btn.hidden = true; }
    if (yes) {
      var first = c.li.querySelector('form input:not([type=hidden]):not([disabled]), form textarea, form [tabindex="0"], form button');
      if (first) { first.focus(); }
      takeClaim(c);
    } else {
      releaseClaim(c);
    }
  }

  // finish shows that a card's question left the list; the person closes it.
  function finish(c, why) {
    if (c.done) { return; }
    c.done = true;
    releaseClaim(c);
    c.li.classList.add('done');
    c.li.querySelectorAll('form input, form textarea, form select, form button').forEach(function (e) { e.disabled = true; });
    c.li.querySelector('[data-hold-wrap]').hidden = true;
    var note = el('p', 'finished', why + ' ');
    var dismiss = el('button', 'link', 'Dismiss');
    dismiss.type = 'button';
    dismiss.dataset.action = 'dismiss';
    note.appendChild(dismiss);
    c.li.querySelector('.card-head').appendChild(note);
  }

  // ---- Claims ----
  function timedAndOpen(c) {
    var d = c.li.querySelector('[data-status] [data-deadline]');
    return c.state === 'Open' && d && Number(d.dataset.deadline) > now();
  }

  function takeClaim(c) {
    if (c.claim || c.done || c.voted || !timedAndOpen(c)) { return; }
    c.claim = {pending: true};
    post('api/claim', {namespace: c.namespace, name: c.name}).then(function (r) {
      if (r.status !== 200) {
        c.claim = null;
        claimText(c, 'Could not hold the window for you: ' + (r.body.message || r.status), true);
        return;
      }
      c.claim = {id: r.body.id, end: Date.now() + r.body.remainingMs, hold: false};
      c.li.querySelector('[data-hold-wrap]').hidden = false;
      c.li.querySelector('[data-hold]').checked = false;
      c.claim.beat = setInterval(function () { heartbeat(c); }, heartbeatMs);
      if (!c.li.classList.contains('open')) { releaseClaim(c); return; }
      showClaim(c);
    }, function () { c.claim = null; });
  }

  function heartbeat(c) {
    if (!c.claim || !c.claim.id || !personActive()) { return; }
    post('api/claim/heartbeat', {id: c.claim.id}).then(function (r) {
      if (!c.claim) { return; }
      if (r.status !== 200) {
        dropClaim(c, 'The window is no longer held for you (' + (r.body.message || r.status) +
          '); an answer after the deadline will be queued as late.', true);
      } else if (r.body.lost) {
        dropClaim(c, 'Your claim was lost: ' + r.body.lost + '. An answer after the deadline will be queued as late.', true);
      }
    });
  }

  function showClaim(c) {
    if (!c.claim || !c.claim.id) { return; }
    var left = c.claim.end - Date.now();
    if (c.claim.hold) {
      claimText(c, left > 0 ? 'You are holding the window open until you answer (' + clockText(left) + ' of it left).' :
        'You are holding the window open: its deadline passed ' + clockText(-left) + ' ago.');
      return;
    }
    if (left <= 0) {
      releaseClaim(c);
      claimText(c, 'The window has closed: your answer will be queued until the agent takes it.');
      return;
    }
    claimText(c, 'You hold the window: ' + clockText(left) + ' left.');
  }

  function claimText(c, text, warn) {
    var e = c.li.querySelector('[data-claim]');
    e.textContent = text;
    e.classList.toggle('warn', !!warn);
  }

  function dropClaim(c, why, warn) {
    if (c.claim && c.claim.beat) { clearInterval(c.claim.beat); }
    c.claim = null;
    c.li.querySelector('[data-hold-wrap]').hidden = true;
    claimText(c, why, warn);
  }

  function releaseClaim(c, leaving) {
    if (!c.claim) { return; }
    var id = c.claim.id;
    if (c.claim.beat) { clearInterval(c.claim.beat); }
    c.claim = null;
    c.li.querySelector('[data-hold-wrap]').hidden = true;
    claimText(c, '');
    if (id) { post('api/claim/release', {id: id}, leaving).catch(function () {}); }
  }

  window.addEventListener('pagehide', function () {
    cards.forEach(function (c) { releaseClaim(c, true); });
  });

  // ---- Answers ----
  var noSealing = 'This browser cannot seal a sensitive answer here: WebCrypto needs a secure context ' +
    '(the inbox over HTTPS, or on localhost). The answer will not be sent.';

  // entry reads a question's free-text field: {text} as it is sent,
  // {secret} for a sensitive question (sealed before it is sent, and as
  // typed: a secret's spaces are part of it), or {bad} when the control
  // holds what it cannot make a value of.
  function entry(fs) {
    var bool = fs.querySelector('[data-bool]:checked');
    if (bool) { return {text: bool.value}; }
    var e = fs.querySelector('[data-custom]');
    if (!e) { return {text: ''}; }
    if (e.validity && e.validity.badInput) { return {bad: true}; }
    if (fs.hasAttribute('data-sensitive')) { return {secret: e.value}; }
    var v = e.value.trim();
    return {text: e.type === 'datetime-local' && v ? withOffset(v) : v};
  }

  // withOffset turns a datetime-local value, the person's wall-clock time
  // ("2026-12-24T18:00", seconds optional), into the RFC 3339 date and
  // time a dateTime answer is, with seconds and this browser's offset
  // from UTC at that time ("2026-12-24T18:00:00+01:00"): the agent reads
  // the instant the person meant, wherever it runs. A value of another
  // form is left for the check to refuse.
  function withOffset(v) {
    var m = /^([0-9]{4,})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2})(?::([0-9]{2})(\.[0-9]+)?)?$/.exec(v);
    if (!m) { return v; }
    var d = new Date(0);
    d.setFullYear(+m[1], +m[2] - 1, +m[3]);
    d.setHours(+m[4], +m[5], +(m[6] || 0), 0);
    var off = -d.getTimezoneOffset();
    var abs = Math.abs(off);
    var pad = function (n) { return String(n).padStart(2, '0'); };
    return v.slice(0, 16) + ':' + (m[6] || '00') + (m[7] || '') +
      (off < 0 ? '-' : '+') + pad(Math.floor(abs / 60)) + ':' + pad(abs % 60);
  }

  // use puts what a question's field holds into its answer.
  function use(a, typed) {
    if (typed.bad) {
      a.bad = true;
    } else if (typed.secret !== undefined) {
      a.plain = typed.secret;
    } else {
      a.custom = typed.text;
    }
  }

  function collect(c, submitter) {
    var answers = [];
    c.li.querySelectorAll('fieldset[data-question]').forEach(function (fs) {
      var a = {id: fs.dataset.question, selected: [], custom: ''};
      answers.push(a);
      var skip = fs.querySelector('[data-skip]');
      if (skip && skip.checked) { return; }
      var typed = entry(fs);
      var decision = fs.querySelector('[data-decision]');
      if (decision) {
        if (submitter && submitter.dataset.choice !== undefined) {
          a.selected = [submitter.dataset.choice];
        } else if (submitter && submitter.dataset.feedback !== undefined) {
          use(a, typed);
        }
        return;
      }
      if (fs.dataset.kind === 'text') {
        use(a, typed);
        return;
      }
      var other = fs.querySelector('[data-other]');
      fs.querySelectorAll('[data-option]:checked').forEach(function (o) { a.selected.push(o.value); });
      if (fs.dataset.multi === 'true' || (other && other.checked)) {
        use(a, typed);
      }
    });
    answers.forEach(function (a) {
      if (!a.custom) { delete a.custom; }
      if (!a.plain) { delete a.plain; }
    });
    return answers;
  }

  // sealAnswers seals the plain values of the sensitive answers: what the
  // page sends holds only their sealed text.
  function sealAnswers(c, answers) {
    return Promise.all(answers.map(function (a) {
      if (a.plain === undefined) { return a; }
      var binding = {namespace: c.namespace, question: c.name, uid: c.uid, id: a.id};
      return window.hitlSeal.seal(c.sealingKey, binding, a.plain).then(function (s) { return {id: a.id, sealed: s}; });
    }));
  }

  function showErrors(c, err) {
    var box = c.li.querySelector('[data-errors]');
    box.textContent = '';
    c.li.querySelectorAll('fieldset[aria-invalid]').forEach(function (f) { f.removeAttribute('aria-invalid'); });
    c.li.querySelectorAll('[data-field-error]').forEach(function (e) { e.textContent = ''; e.hidden = true; });
    if (!err) { return; }
    box.appendChild(el('p', 'code', err.message));
    if (err.explanation) { box.appendChild(el('p', '', err.explanation)); }
    if (err.questionID) {
      c.li.querySelectorAll('fieldset[data-question]').forEach(function (f) {
        if (f.dataset.question === err.questionID) {
          f.setAttribute('aria-invalid', 'true');
          // The rule, next to the field it is about.
          var note = f.querySelector('[data-field-error]');
          note.textContent = err.rule || err.message;
          note.hidden = false;
          var input = f.querySelector('input:not([type=hidden]), textarea, select');
          if (input) { input.focus(); }
        }
      });
    }
  }

  function showOutcome(c, res) {
    var box = c.li.querySelector('[data-outcome]');
    box.textContent = '';
    var o = res.outcome || 'Sent';
    var p = el('p', 'outcome-line outcome-' + o.toLowerCase());
    p.appendChild(el('strong', '', res.reason ? o + ': ' + res.reason : o));
    if (res.explanation) { p.appendChild(document.createTextNode(' — ' + res.explanation)); }
    box.appendChild(p);
    if (res.message) { box.appendChild(el('p', 'message', res.message)); }
    if (o === 'Queued') {
      var w = el('button', 'link', 'Withdraw my reply');
      w.type = 'button';
      w.dataset.action = 'withdraw';
      w.dataset.reply = res.reply;
      box.appendChild(w);
    }
  }

  function submit(c, submitter) {
    var answers = collect(c, submitter);
    var err = checkControls(c.spec, answers) || validateAnswers(c.spec, answers);
    var unsealable = answers.find(function (a) { return a.plain !== undefined; });
    if (!err && unsealable && !window.hitlSeal.available()) {
      err = {questionID: unsealable.id, message: 'Nothing was sent. ' + noSealing};
    }
    showErrors(c, err);
    if (err) { return; }
    var buttons = c.li.querySelectorAll('form button');
    buttons.forEach(function (b) { b.disabled = true; });
    var outcome = c.li.querySelector('[data-outcome]');
    outcome.textContent = 'Sending…';
    var failed = function (e) {
      outcome.textContent = '';
      showErrors(c, {message: e.message + '. Nothing was sent; try again.'});
      buttons.forEach(function (b) { b.disabled = c.done; });
    };
    sealAnswers(c, answers).then(function (items) {
      var req = {namespace: c.namespace, name: c.name, uid: c.uid, answers: items};
      if (c.digest) { req.specDigest = c.digest; }
      post('api/reply', req).then(function (r) {
        outcome.textContent = '';
        if (r.status === 200 || r.status === 202) {
          showOutcome(c, r.body);
          // Counted: a vote that did not decide its question yet, final and
          // healthy.
          var o = r.body.outcome;
          if (o === 'Applied' || o === 'Queued' || o === 'Counted' || r.status === 202) {
            c.answered = true;
            releaseClaim(c);
            c.li.querySelectorAll('form input, form textarea, form select, form button').forEach(function (e) { e.disabled = true; });
            c.li.classList.add('answered');
            return;
          }
        } else {
          showErrors(c, r.body);
        }
        buttons.forEach(function (b) { b.disabled = c.done; });
      }, function (e) { failed(new Error('Sending failed: ' + e.message)); });
    }, function (e) { failed(new Error('Your sensitive answer could not be sealed: ' + e.message)); });
  }

  function withdraw(c, button) {
    button.disabled = true;
    post('api/withdraw', {namespace: c.namespace, name: button.dataset.reply}).then(function (r) {
      var box = c.li.querySelector('[data-outcome]');
      box.textContent = '';
      if (r.status === 204) {
        box.appendChild(el('p', 'outcome-line', 'Withdrawn: your reply is gone and the question is answerable again.'));
        c.answered = false;
        c.li.classList.remove('answered');
        if (!c.done) {
          c.li.querySelectorAll('form input, form textarea, form select, form button').forEach(function (e) { e.disabled = false; });
        }
        return;
      }
      button.disabled = false;
      showErrors(c, r.body);
    });
  }

  function cardOf(node) {
    var li = node.closest('li.item');
    return li && cards.get(li.dataset.key);
  }

  list.addEventListener('click', function (ev) {
    var b = ev.target.closest('button[data-action]');
    if (!b) { return; }
    var c = cardOf(b);
    if (!c) { return; }
    switch (b.dataset.action) {
    case 'toggle': open(c, b.getAttribute('aria-expanded') !== 'true'); break;
    case 'withdraw': withdraw(c, b); break;
    case 'dismiss':
      releaseClaim(c);
      cards.delete(c.key);
      c.li.remove();
      updateEmpty();
      break;
    }
  });
  list.addEventListener('submit', function (ev) {
    ev.preventDefault();
    var c = cardOf(ev.target);
    if (c && !c.done) { submit(c, ev.submitter); }
  });
  list.addEventListener('change', function (ev) {
    var t = ev.target;
    if (t.matches('[data-hold]')) {
      var c = cardOf(t);
      if (c && c.claim) { c.claim.hold = t.checked; showClaim(c); }
    }
    if (t.matches('[data-skip]')) {
      t.closest('fieldset').querySelectorAll('input:not([data-skip]), textarea, select').forEach(function (e) {
        e.disabled = t.checked;
      });
    }
  });
  list.addEventListener('input', function (ev) {
    // Typing an "Other" answer of a single-select question chooses it.
    var t = ev.target;
    if (t.matches('[data-custom]') && t.value) {
      var other = t.closest('fieldset').querySelector('[data-other]');
      if (other) { other.checked = true; }
    }
  });

  updateEmpty();
  connect();
})();
