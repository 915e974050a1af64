/*
 * operator-push.js: the page's side of Web Push (operator-api 1.0.0). Asks the player's permission,
 * registers the service worker (operator-push-sw.js), subscribes with the operator's VAPID public
 * key and hands the subscription to the operator's own back end, which registers it with the
 * gateway using its device key (the browser never holds one):
 *
 *   <script src="/operator-push.js"></script>
 *   OperatorPush.subscribe({
 *     api: 'https://push-api.example.com',      // the gateway: the VAPID key, and the worker's reports
 *     register: '/account/push-subscriptions',  // the operator's back end, called with the site's cookies
 *     brandId: 7,                               // optional: a brand with a VAPID key of its own
 *   }).then(function (result) { ... });         // {permission, subscription}
 *
 * Call it from a click: browsers ask for the permission only after a gesture of the player.
 * Plain JavaScript, no build step, no dependency.
 */
(function (root) {
  'use strict';

  var VERSION = '1.0.0';

  function trimmed(url) {
    return String(url).replace(/\/+$/, '');
  }

  /** base64url (the VAPID key as the gateway answers it) to the bytes PushManager.subscribe takes. */
  function keyBytes(base64url) {
    var base64 = base64url.replace(/-/g, '+').replace(/_/g, '/');
    var text = atob(base64 + '='.repeat((4 - (base64.length % 4)) % 4));
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return bytes;
  }

  function sameKey(subscription, key) {
    var held = subscription.options && subscription.options.applicationServerKey;
    if (!held) return false;
    var a = new Uint8Array(held);
    if (a.length !== key.length) return false;
    for (var i = 0; i < a.length; i++) if (a[i] !== key[i]) return false;
    return true;
  }

  function fail(message) {
    return Promise.reject(new Error('OperatorPush: ' + message));
  }

  /** The VAPID public key the gateway answers for the brand (the default brand's without one). */
  function vapidPublicKey(api, brandId) {
    var url = trimmed(api) + '/v1/push/web/vapid-public-key' + (brandId === undefined || brandId === null ? '' : '?brand_id=' + encodeURIComponent(brandId));
    return fetch(url, { mode: 'cors', credentials: 'omit' }).then(function (response) {
      return response.json().then(function (body) {
        if (!response.ok || !body || typeof body.public_key !== 'string') throw new Error('OperatorPush: no VAPID public key (' + ((body && body.error) || 'HTTP ' + response.status) + ')');
        return body.public_key;
      });
    });
  }

  function subscribe(options) {
    options = options || {};
    if (!options.api) return fail('options.api (the gateway base URL) is required');
    if (!options.register) return fail("options.register (your back end's URL for subscriptions) is required");
    if (!('serviceWorker' in navigator) || !('PushManager' in root) || !('Notification' in root)) {
      return Promise.resolve({ permission: 'unsupported', subscription: null });
    }
    var workerUrl = (options.serviceWorker || '/operator-push-sw.js') + '?api=' + encodeURIComponent(trimmed(options.api));
    return Promise.resolve(Notification.requestPermission()).then(function (permission) {
      if (permission !== 'granted') return { permission: permission, subscription: null };
      return Promise.all([
        navigator.serviceWorker.register(workerUrl, options.scope ? { scope: options.scope } : undefined).then(function () {
          return navigator.serviceWorker.ready;
        }),
        options.vapidPublicKey ? Promise.resolve(options.vapidPublicKey) : vapidPublicKey(options.api, options.brandId),
      ]).then(function (ready) {
        var registration = ready[0];
        var key = keyBytes(ready[1]);
        return registration.pushManager
          .getSubscription()
          .then(function (existing) {
            if (existing && sameKey(existing, key)) return existing;
            // A subscription made with another key cannot be pushed to with this one.
            return (existing ? existing.unsubscribe() : Promise.resolve()).then(function () {
              return registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
            });
          })
          .then(function (subscription) {
            var json = subscription.toJSON();
            var body = { endpoint: json.endpoint, keys: json.keys };
            if (options.brandId !== undefined && options.brandId !== null) body.brand_id = options.brandId;
            return fetch(options.register, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify(body),
              credentials: 'same-origin',
            }).then(function (response) {
              if (!response.ok) throw new Error('OperatorPush: the back end refused the subscription (HTTP ' + response.status + ')');
              return { permission: permission, subscription: body };
            });
          });
      });
    });
  }

  root.OperatorPush = { version: VERSION, subscribe: subscribe, vapidPublicKey: vapidPublicKey };
})(typeof self !== 'undefined' ? self : this);
