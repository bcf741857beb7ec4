// Xaalis hosted payment page: progressive enhancement only. The page works
// without this script; with it, an open payment's status is polled so that
// the page refreshes itself when the payment moves on, and a final page
// returns to the merchant after a short countdown. No inline script: the
// page's Content-Security-Policy forbids it.
(function () {
  'use strict';
  var root = document.getElementById('checkout');
  if (!root || !window.fetch) {
    return;
  }
  var statusURL = root.getAttribute('data-status-url');
  var selfURL = root.getAttribute('data-self-url');
  var current = root.getAttribute('data-status');
  var open = root.getAttribute('data-open') === 'true';

  if (open && statusURL) {
    var delay = 3000;
    var poll = function () {
      fetch(statusURL, { cache: 'no-store', credentials: 'same-origin', headers: { Accept: 'application/json' } })
        .then(function (r) {
          if (!r.ok) {
            throw new Error('status ' + r.status);
          }
          return r.json();
        })
        .then(function (d) {
          if (d && d.status && d.status !== current) {
            // The server renders the new state; replace drops any ?e=.
            window.location.replace(selfURL);
            return;
          }
          delay = 3000;
          schedule();
        })
        .catch(function () {
          delay = Math.min(delay * 2, 30000);
          schedule();
        });
    };
    var schedule = function () {
      window.setTimeout(poll, document.hidden ? Math.max(delay, 15000) : delay);
    };
    schedule();
    return;
  }

  // A final page: back to the merchant after a countdown, unless the page
  // was opened by checkout.js in a popup, whose opener takes over.
  var returnURL = root.getAttribute('data-return-url');
  var countdown = document.getElementById('countdown');
  if (!returnURL || !countdown) {
    return;
  }
  if (window.opener) {
    countdown.textContent = countdown.getAttribute('data-popup-text');
    countdown.hidden = false;
    return;
  }
  var left = 10;
  var text = countdown.getAttribute('data-text') || '';
  var tick = function () {
    if (left <= 0) {
      window.location.assign(returnURL);
      return;
    }
    countdown.textContent = text.replace('{s}', String(left));
    countdown.hidden = false;
    left -= 1;
    window.setTimeout(tick, 1000);
  };
  tick();
})();
