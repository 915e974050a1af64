/*
 * operator-push-sw.js: the service worker an operator's site serves for Web Push (operator-api 1.0.0).
 *
 * Shows every push as the CRM sent it (`{"title", "options"}`, see docs/contract-mapping.md), then
 * reports `delivered` once it is shown and `clicked` when the player clicks it, and opens or focuses
 * the push's link. Reports go to the tracking route with the push's own token: the worker holds no
 * key. The API's base URL comes from this script's own URL, so one file serves every site:
 *
 *   navigator.serviceWorker.register('/operator-push-sw.js?api=' + encodeURIComponent('https://push-api.example.com'))
 *
 * Plain JavaScript, no build step, no dependency. A site with a service worker of its own loads this
 * one into it instead, with the base URL set first (an imported script's own URL is not readable):
 *
 *   self.OPERATOR_PUSH_API = 'https://push-api.example.com'; importScripts('/operator-push-sw.js');
 */
/* eslint-env serviceworker */
'use strict';

(function operatorPush(scope) {
  var VERSION = '1.0.0';
  /** Tries of a report: a push can reach the browser before its send is recorded (409), and networks fail. */
  var REPORT_TRIES = 5;
  var FIRST_RETRY_MS = 500;

  var api = (function () {
    var given = scope.OPERATOR_PUSH_API || new URL(scope.location.href).searchParams.get('api');
    return given ? given.replace(/\/+$/, '') : '';
  })();

  function sleep(ms) {
    return new Promise(function (resolve) {
      setTimeout(resolve, ms);
    });
  }

  /** Reports what the player did with a push; answers whether the API took it. Never rejects. */
  function report(data, type) {
    if (!api || !data || typeof data.push_id !== 'string' || typeof data.tracking_token !== 'string') return Promise.resolve(false);
    var url = api + '/v1/push/' + encodeURIComponent(data.push_id) + '/events';
    var body = JSON.stringify({ type: type, token: data.tracking_token });
    function attempt(tries) {
      return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body, mode: 'cors', credentials: 'omit' }).then(
        function (response) {
          // 409: the send is not recorded yet; 429 and 5xx: later. Anything else is final.
          var again = response.status === 409 || response.status === 429 || response.status >= 500;
          return again && tries > 1 ? retry(tries) : response.ok;
        },
        function () {
          return tries > 1 ? retry(tries) : false;
        },
      );
    }
    function retry(tries) {
      return sleep(FIRST_RETRY_MS * Math.pow(2, REPORT_TRIES - tries)).then(function () {
        return attempt(tries - 1);
      });
    }
    return attempt(REPORT_TRIES);
  }

  /** The push's `{title, options}`, or null for a push this worker did not send. */
  function messageOf(event) {
    if (!event.data) return null;
    try {
      var message = event.data.json();
      return message && typeof message.title === 'string' && message.options && typeof message.options === 'object' ? message : null;
    } catch (error) {
      return null;
    }
  }

  /**
   * Shows the notification with its options as sent. Browsers refuse two combinations the contract
   * allows (renotify without a tag; vibrate on a silent one): the one option is then left out.
   */
  function show(message) {
    var options = message.options;
    return scope.registration.showNotification(message.title, options).catch(function (error) {
      var fixed = Object.assign({}, options);
      if (fixed.renotify && !fixed.tag) delete fixed.renotify;
      if (fixed.silent && fixed.vibrate) delete fixed.vibrate;
      if (Object.keys(fixed).length === Object.keys(options).length) throw error;
      return scope.registration.showNotification(message.title, fixed);
    });
  }

  /** An http(s) link, resolved against the site; anything else is not opened. */
  function linkOf(data) {
    if (!data || typeof data.link !== 'string') return null;
    try {
      var url = new URL(data.link, scope.location.origin);
      return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
    } catch (error) {
      return null;
    }
  }

  /** Focuses a window already at the link, or opens one. */
  function open(link) {
    return scope.clients.matchAll({ type: 'window', includeUncontrolled: true }).then(function (windows) {
      for (var i = 0; i < windows.length; i++) {
        if (windows[i].url === link && 'focus' in windows[i]) return windows[i].focus();
      }
      return scope.clients.openWindow(link);
    });
  }

  /** Keeps the worker alive for `work`; an event a script made (not the browser) cannot, and the work goes on anyway. */
  function keepAlive(event, work) {
    try {
      event.waitUntil(work);
    } catch (error) {
      // InvalidStateError: a synthetic event.
    }
    return work;
  }

  scope.addEventListener('push', function (event) {
    var message = messageOf(event);
    if (!message) return;
    keepAlive(
      event,
      show(message).then(function () {
        return report(message.options.data, 'delivered');
      }),
    );
  });

  scope.addEventListener('notificationclick', function (event) {
    var notification = event.notification;
    var data = notification.data;
    notification.close();
    var link = linkOf(data);
    // Opening a window is allowed only while the click is being handled: it is asked for first.
    var opened = link ? open(link).catch(function () {}) : Promise.resolve();
    keepAlive(event, Promise.all([opened, report(data, 'clicked')]));
  });

  scope.operatorPush = { version: VERSION, api: api, report: report };
})(self);
