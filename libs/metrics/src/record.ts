import { dispatches, httpRequestDuration, messagesAccepted, pushSuppressions, sendDuration, sends } from './catalog';

// What the hot paths call. prom-client hashes the label values on every `labels()` call; the
// children are kept here, one map per label, so a repeated count allocates nothing.

type Key = string | number;

function children2<C>(make: (a: Key, b: Key) => C): (a: Key, b: Key) => C {
  const byA = new Map<Key, Map<Key, C>>();
  return (a, b) => {
    let byB = byA.get(a);
    if (!byB) byA.set(a, (byB = new Map()));
    let child = byB.get(b);
    if (!child) byB.set(b, (child = make(a, b)));
    return child;
  };
}

function children3<C>(make: (a: Key, b: Key, c: Key) => C): (a: Key, b: Key, c: Key) => C {
  const byA = new Map<Key, (b: Key, c: Key) => C>();
  return (a, b, c) => {
    let rest = byA.get(a);
    if (!rest) byA.set(a, (rest = children2((b2, c2) => make(a, b2, c2))));
    return rest(b, c);
  };
}

export type AcceptMode = 'single' | 'batch';
export type AcceptResult = 'accepted' | 'duplicate' | 'unreachable' | 'invalid' | 'fatal';

/** The error code of a send that succeeded. */
export const NO_ERROR_CODE = 'none';

const httpChild = children3((method, route, status) => httpRequestDuration.labels(String(method), String(route), String(status)));
const acceptedChild = children3((mode, result, brand) => messagesAccepted.labels(String(mode), String(result), String(brand)));
const sendsChild = children3((provider, outcome, code) => sends.labels(String(provider), String(outcome), String(code)));
const sendDurationChild = children2((provider, outcome) => sendDuration.labels(String(provider), String(outcome)));
const suppressionsChild = children3((provider, reason, brand) => pushSuppressions.labels(String(provider), String(reason), String(brand)));
const dispatchChild = children2((topic, result) => dispatches.labels(String(topic), String(result)));

/** One request the gateway answered; `route` is the route's template, or `unmatched`. */
export function observeHttpRequest(method: string, route: string, status: number, seconds: number): void {
  httpChild(method, route, status).observe(seconds);
}

/** The brand label of messages whose brand no one could read. */
export const NO_BRAND = 'none';

export function acceptedMessages(mode: AcceptMode, result: AcceptResult, count: number, brand: string = NO_BRAND): void {
  if (count > 0) acceptedChild(mode, result, brand).inc(count);
}

/**
 * The brand label of a message: its brand when the configuration names it, `other` for any other.
 * The CRM may send any brand id to a key bound to none; the labels stay as many as the brands named.
 */
export function brandLabeler(named: Iterable<string>): (brandId: string | number | bigint | undefined) => string {
  const labels = new Set(named);
  return (brandId) => {
    if (brandId === undefined) return NO_BRAND;
    const id = String(brandId);
    return labels.has(id) ? id : 'other';
  };
}

/** `count` devices a provider call ended with `outcome` for (`errorCode`: NO_ERROR_CODE when sent). */
export function countSends(provider: string, outcome: string, errorCode: string, count = 1): void {
  sendsChild(provider, outcome, errorCode).inc(count);
}

export function observeSendDuration(provider: string, outcome: string, seconds: number): void {
  sendDurationChild(provider, outcome).observe(seconds);
}

/** `count` pushes the compliance gate kept from a provider's devices, by its reason and the push's brand label (brandLabeler). */
export function countSuppressions(provider: string, reason: string, brand: string, count = 1): void {
  suppressionsChild(provider, reason, brand).inc(count);
}

export function countDispatch(topic: string, result: 'delivered' | 'retry' | 'dead'): void {
  dispatchChild(topic, result).inc();
}
