/* global document, window, EventSource, DOMParser */
// twokey console: countdowns and live updates. Everything here is an enhancement: every action is a
// plain HTML form that works without this file. Served from 'self' (the CSP allows no inline script).
(function () {
  'use strict';

  var body = document.body;
  // The server's clock may differ from this browser's: count down against the server's time.
  var skew = Date.parse(body.dataset.now || '') - Date.now();
  if (!isFinite(skew)) skew = 0;

  function remainingText(ms) {
    if (ms <= 0) return 'expired';
    var s = Math.floor(ms / 1000);
    if (s < 60) return s + ' s left';
    var m = Math.floor(s / 60);
    if (m < 60) return m + ' min ' + (s % 60) + ' s left';
    var h = Math.floor(m / 60);
    if (h < 48) return h + ' h ' + (m % 60) + ' min left';
    return Math.floor(h / 24) + ' days left';
  }

  function tick() {
    var now = Date.now() + skew;
    document.querySelectorAll('[data-expires]').forEach(function (el) {
      var left = Date.parse(el.getAttribute('data-expires')) - now;
      var text = el.querySelector('.countdown-text');
      if (text) text.textContent = remainingText(left);
      el.classList.toggle('soon', left < 60000);
    });
  }
  tick();
  window.setInterval(tick, 1000);

  var live = body.dataset.live;
  if (!live) return;

  var announcer = document.getElementById('live-status');
  function announce(message) {
    if (announcer) announcer.textContent = message;
  }

  /** A card the person is working in (focus inside, a reason typed, Reject open) is never swapped out. */
  function busy(card) {
    if (card.contains(document.activeElement)) return true;
    if (card.querySelector('details.reject-box[open]')) return true;
    var area = card.querySelector('textarea');
    return Boolean(area && area.value);
  }

  var refreshing = false;
  var again = false;
  function refreshPending() {
    if (refreshing) {
      again = true;
      return;
    }
    refreshing = true;
    window
      .fetch('/console/fragments/pending', { credentials: 'same-origin', headers: { accept: 'text/html' } })
      .then(function (response) {
        if (response.status === 401) {
          window.location.assign('/console/login');
          return null;
        }
        return response.ok ? response.text() : null;
      })
      .then(function (text) {
        if (text) applyPending(new DOMParser().parseFromString(text, 'text/html'));
      })
      .catch(function () {})
      .then(function () {
        refreshing = false;
        if (again) {
          again = false;
          refreshPending();
        }
      });
  }

  function applyPending(doc) {
    var fresh = doc.getElementById('pending-list');
    var current = document.getElementById('pending-list');
    if (!fresh || !current) return;
    var added = 0;
    var keep = {};
    current.querySelectorAll('.proposal-card').forEach(function (card) {
      if (busy(card)) keep[card.dataset.id] = card;
    });
    fresh.querySelectorAll('.proposal-card').forEach(function (card) {
      var old = document.getElementById(card.id);
      if (keep[card.dataset.id]) {
        card.replaceWith(keep[card.dataset.id]);
      } else if (!old) {
        card.classList.add('is-new');
        added += 1;
      }
    });
    // A card someone is working in that left the list stays, marked, so typed text is not lost;
    // submitting it then explains what happened.
    Object.keys(keep).forEach(function (id) {
      var card = keep[id];
      if (fresh.contains(card)) return;
      if (!card.querySelector('.gone-note')) {
        var note = document.createElement('p');
        note.className = 'why gone-note';
        note.textContent = 'This proposal is no longer pending; reload to see what happened.';
        card.appendChild(note);
      }
      fresh.insertBefore(card, fresh.firstChild);
    });
    current.replaceWith(fresh);
    var count = document.getElementById('pending-count');
    if (count) {
      count.textContent = fresh.dataset.count === '0' ? '' : fresh.dataset.count;
      count.setAttribute('aria-label', fresh.dataset.count + ' pending');
    }
    if (added > 0) announce(added === 1 ? 'A new proposal is waiting.' : added + ' new proposals are waiting.');
    tick();
  }

  // Once a form is on its way the server's answer decides what comes next; a live refresh or reload
  // now would race the form's own navigation.
  var leaving = false;
  document.addEventListener('submit', function () {
    leaving = true;
  });

  var proposalId = body.dataset.proposalId;
  function onChange(id) {
    if (leaving) return;
    if (live === 'pending') {
      refreshPending();
    } else if (live === 'proposal' && id === proposalId) {
      var active = document.activeElement;
      var typing = active && (active.tagName === 'TEXTAREA' || active.tagName === 'INPUT');
      if (!typing) window.location.reload();
    }
  }

  if (typeof EventSource === 'function') {
    var events = new EventSource('/console/events');
    window.addEventListener('pagehide', function () {
      events.close();
    });
    events.addEventListener('proposal', function (event) {
      try {
        onChange(JSON.parse(event.data).id);
      } catch {
        onChange(null);
      }
    });
  }
  // Changes made by another replica reach this one's event stream only through the database, so
  // the pending list also refreshes on a slow timer.
  if (live === 'pending') {
    window.setInterval(function () {
      if (!leaving) refreshPending();
    }, 15000);
  }
})();
