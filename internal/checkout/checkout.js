/*!
 * Xaalis checkout.js: open the hosted payment page from a merchant's page.
 *
 *   <script src="https://API_HOST/v1/checkout.js"></script>
 *   <script>
 *     // payment_url comes from POST /v1/payments, made by your server.
 *     payButton.addEventListener('click', function () {
 *       Xaalis.open({
 *         paymentUrl: paymentUrl,
 *         onSuccess: function (p) { showThanks(p.reference); },
 *         onFailure: function (p) { showRetry(p.status); },   // failed, cancelled, expired
 *         onClose:   function (p) { console.log('closed while', p.status); }
 *       });
 *     });
 *   </script>
 *
 * Xaalis.open(options) opens the payment page in a popup window (call it
 * from a click, or browsers block the popup; a blocked popup falls back to
 * the same tab). With mode: 'redirect' it opens it in the same tab: the
 * payer then comes back through your success_url / failed_url and no
 * callback runs. While the popup is open the script polls
 * GET {origin}/checkout/{id}/status and calls
 *   onSuccess(payment) when the status is success,
 *   onFailure(payment) when it is failed, cancelled or expired,
 *   onClose(payment)   when the payer closed the popup before an outcome,
 * where payment is {status, reference, redirect_url}. Once final, the popup
 * is closed (closeOnComplete: false keeps it open). Options: interval
 * (polling period in ms, default 2000), mode ('popup' or 'redirect').
 * It returns {close: function} to stop polling and close the popup.
 *
 * IMPORTANT: browser callbacks are indicative only. They run in the
 * payer's browser, which anyone can script or close. Never ship goods or
 * mark an order paid from a callback: the signed webhook (payment.success)
 * sent to your server, or GET /v1/payments/{id} with your secret key, is
 * the authoritative outcome.
 */
(function (window) {
  'use strict';

  var FINAL = { success: 1, failed: 1, cancelled: 1, expired: 1, refunded: 1, disputed: 1 };

  function noop() {}

  // statusUrl turns https://host/checkout/{id}[?...] into its status URL.
  function statusUrl(paymentUrl) {
    var m = /^(https?:\/\/[^\/?#]+)\/checkout\/([^\/?#]+)/.exec(String(paymentUrl || ''));
    return m ? m[1] + '/checkout/' + m[2] + '/status' : null;
  }

  function open(options) {
    var o = options || {};
    var url = o.paymentUrl;
    var status = statusUrl(url);
    if (!status) {
      throw new Error('Xaalis.open: paymentUrl must be the payment_url of a payment');
    }
    var onSuccess = o.onSuccess || noop;
    var onFailure = o.onFailure || noop;
    var onClose = o.onClose || noop;
    var interval = o.interval > 0 ? o.interval : 2000;

    if (o.mode === 'redirect') {
      window.location.assign(url);
      return { close: noop };
    }
    var win = window.open(url, 'xaalis_checkout', 'popup,width=440,height=760');
    if (!win) {
      window.location.assign(url);
      return { close: noop };
    }

    var done = false;
    var timer = null;
    var last = null;

    function finish(p) {
      done = true;
      window.clearTimeout(timer);
      if (o.closeOnComplete !== false) {
        try { win.close(); } catch (e) { /* already closed */ }
      }
      if (p.status === 'success') {
        onSuccess(p);
      } else {
        onFailure(p);
      }
    }

    function check() {
      return fetch(status, { cache: 'no-store', credentials: 'omit', headers: { Accept: 'application/json' } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .catch(function () { return null; });
    }

    function tick() {
      if (done) {
        return;
      }
      var closed = win.closed;
      check().then(function (p) {
        if (done) {
          return;
        }
        if (p) {
          last = p;
        }
        if (p && FINAL[p.status]) {
          finish(p);
        } else if (closed) {
          done = true;
          onClose(last || { status: null, reference: null, redirect_url: null });
        } else {
          timer = window.setTimeout(tick, interval);
        }
      });
    }
    timer = window.setTimeout(tick, interval);

    return {
      close: function () {
        done = true;
        window.clearTimeout(timer);
        try { win.close(); } catch (e) { /* already closed */ }
      }
    };
  }

  var X = window.Xaalis || {};
  X.open = open;
  window.Xaalis = X;
})(window);
