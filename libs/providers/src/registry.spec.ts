import type { PushRequest } from '@operator/contract';
import { createProviderRegistry, DEFAULT_CREDENTIAL_PAUSE_MS, pausedOverQuota, type RegistryOptions } from './registry';
import { createSandboxProvider, type SandboxSend } from './sandbox/provider';
import { sendError, type Notification, type PushProvider, type SendResult, type SendTarget } from './types';

interface FakeCredential {
  account: string;
}

/** A hand-written provider that records what is done with it, and answers as scripted (else accepts). */
interface FakeProvider extends PushProvider {
  credential: FakeCredential;
  label: string;
  closed: number;
  /** Targets it was asked to send to, every call together. */
  sentTo: string[];
  /** The answer to each of the next calls, one per target; then every target is accepted. */
  script: ((target: SendTarget) => SendResult)[];
}

function fakeFactory() {
  const created: FakeProvider[] = [];
  const create = jest.fn((credential: FakeCredential, label: string): PushProvider => {
    const provider: FakeProvider = {
      name: 'webpush',
      credential,
      label,
      closed: 0,
      sentTo: [],
      script: [],
      async send(_notification, targets) {
        provider.sentTo.push(...targets.map((one) => one.token));
        const answer = provider.script.shift() ?? (() => ({ ok: true as const, providerMessageId: `${credential.account}-message` }));
        return targets.map(answer);
      },
      async close() {
        provider.closed += 1;
      },
    };
    created.push(provider);
    return provider;
  });
  return { create, created };
}

function fakeSandbox() {
  const sandbox = { name: 'webpush' as const, closed: 0, send: jest.fn(async () => []), async close() { sandbox.closed += 1; } };
  return sandbox;
}

const notification: Notification = {
  pushId: 'push-1',
  request: { title: 'Hello', body: 'World', activity: { id: 1 } } as unknown as PushRequest,
};
const target = (token: string): SendTarget => ({ deliveryId: `d-${token}`, token, platform: 'web', p256dh: null, auth: null });

const BRAND_7: FakeCredential = { account: 'brand-7-account' };
const DEFAULT: FakeCredential = { account: 'default-account' };

function registry(options: Partial<RegistryOptions<FakeCredential>> = {}) {
  const factory = fakeFactory();
  const reg = createProviderRegistry<FakeCredential>({
    name: 'webpush',
    brandCredentials: new Map([['7', BRAND_7]]),
    defaultCredential: DEFAULT,
    create: factory.create,
    retryAfterMaxMs: 60_000,
    ...options,
  });
  return { registry: reg, ...factory };
}

/** The message id a client's send answers: which credential's provider it went through. */
async function messageIdOf(client: PushProvider) {
  const [result] = await client.send(notification, [target('probe')]);
  return result.ok ? result.providerMessageId : result.error.message;
}

describe('createProviderRegistry', () => {
  it('makes a brand with its own credential a client from that credential', async () => {
    const { registry: reg, create, created } = registry();
    const client = reg.providerFor('7');
    expect(create).toHaveBeenCalledTimes(1);
    expect(create).toHaveBeenCalledWith(BRAND_7, 'brand-7');
    expect(client.name).toBe('webpush');
    expect(await messageIdOf(client)).toBe('brand-7-account-message');
    expect(created[0].sentTo).toEqual(['probe']);
  });

  it("gives another brand the default's client", async () => {
    const { registry: reg, create, created } = registry();
    const client = reg.providerFor('8');
    expect(create).toHaveBeenCalledWith(DEFAULT, 'default');
    expect(await messageIdOf(client)).toBe('default-account-message');
    expect(created[0].label).toBe('default');
  });

  it('creates one client per credential, once, and returns it on later calls', () => {
    const { registry: reg, create } = registry();
    const brand7 = reg.providerFor('7');
    const brand8 = reg.providerFor('8');
    const brand9 = reg.providerFor('9');
    expect(reg.providerFor('7')).toBe(brand7);
    expect(reg.providerFor('8')).toBe(brand8);
    expect(brand9).toBe(brand8);
    expect(brand7).not.toBe(brand8);
    expect(create).toHaveBeenCalledTimes(2);
  });

  it('creates nothing until a brand asks', () => {
    const { create } = registry();
    expect(create).not.toHaveBeenCalled();
  });

  it('uses the sandbox for a brand with no credential and no default', () => {
    const sandbox = fakeSandbox();
    const { registry: reg, create } = registry({ defaultCredential: undefined, sandbox });
    expect(reg.providerFor('8')).toBe(sandbox);
    expect(reg.providerFor('9')).toBe(sandbox);
    expect(create).not.toHaveBeenCalled();
  });

  it('prefers credentials to the sandbox', () => {
    const sandbox = fakeSandbox();
    const { registry: reg } = registry({ sandbox });
    expect(reg.providerFor('7')).not.toBe(sandbox);
    expect(reg.providerFor('8')).not.toBe(sandbox);
  });

  it('answers an auth error for every target of a brand with no credential, no default and no sandbox', async () => {
    const { registry: reg, create } = registry({ defaultCredential: undefined });
    const client = reg.providerFor('8');
    expect(client.name).toBe('webpush');
    expect(create).not.toHaveBeenCalled();
    const results = await client.send(notification, [target('a'), target('b'), target('c')]);
    expect(results).toHaveLength(3);
    for (const result of results) {
      expect(result).toEqual({ ok: false, error: { class: 'auth', code: 'auth', message: expect.stringContaining('brand 8') } });
    }
    expect(results[0]).toMatchObject({ error: { message: expect.stringContaining('webpush') } });
    await expect(client.send(notification, [])).resolves.toEqual([]);
    expect(reg.providerFor('8')).toBe(client);
    // The brand with credentials still gets its own client.
    expect(await messageIdOf(reg.providerFor('7'))).toBe('brand-7-account-message');
  });

  it('closes every created client and the sandbox', async () => {
    const sandbox = fakeSandbox();
    const factory = fakeFactory();
    const reg = createProviderRegistry<FakeCredential>({
      name: 'webpush',
      brandCredentials: new Map([
        ['7', BRAND_7],
        ['11', { account: 'brand-11-account' }],
      ]),
      defaultCredential: DEFAULT,
      create: factory.create,
      sandbox,
      retryAfterMaxMs: 60_000,
    });
    reg.providerFor('7');
    reg.providerFor('11');
    reg.providerFor('8');
    reg.providerFor('7');
    expect(factory.created).toHaveLength(3);
    await reg.close();
    expect(factory.created.map((client) => client.closed)).toEqual([1, 1, 1]);
    expect(sandbox.closed).toBe(1);
  });

  it('closes the unconfigured stand-ins without error', async () => {
    const { registry: reg } = registry({ defaultCredential: undefined });
    reg.providerFor('8');
    await expect(reg.close()).resolves.toBeUndefined();
  });

  it('closes the sandbox even when it was never used', async () => {
    const sandbox = fakeSandbox();
    const { registry: reg } = registry({ sandbox });
    await reg.close();
    expect(sandbox.closed).toBe(1);
  });
});

/** What a provider answers when the whole credential is over its quota. */
const overQuota = (retryAfterMs?: number) => (): SendResult => ({ ok: false, error: sendError('rate-limited', 'project quota exceeded', retryAfterMs, 'credential') });

describe('a credential over its quota', () => {
  /** A client of one fake provider, paused on its own clock. */
  function paused(maxMs = 60_000) {
    const { create, created } = fakeFactory();
    const clock = { now: 1_000_000 };
    const client = pausedOverQuota(create(BRAND_7, 'brand-7'), maxMs, () => clock.now);
    return { client, provider: created[0], clock };
  }

  it('answers every target at once, for the Retry-After, with the time left and without calling the provider', async () => {
    const { client, provider, clock } = paused();
    provider.script.push(overQuota(5000));
    const [first] = await client.send(notification, [target('a')]);
    expect(first).toEqual({ ok: false, error: { class: 'transient', code: 'rate-limited', message: 'project quota exceeded', retryAfterMs: 5000, scope: 'credential' } });

    clock.now += 2000;
    const held = await client.send(notification, [target('b'), target('c')]);
    expect(held).toEqual([
      { ok: false, error: { class: 'transient', code: 'rate-limited', message: 'webpush credential paused over its quota: project quota exceeded', retryAfterMs: 3000, scope: 'credential' } },
      { ok: false, error: expect.objectContaining({ code: 'rate-limited', retryAfterMs: 3000, scope: 'credential' }) },
    ]);
    expect(provider.sentTo).toEqual(['a']);

    clock.now += 3000;
    expect((await client.send(notification, [target('d')]))[0].ok).toBe(true);
    expect(provider.sentTo).toEqual(['a', 'd']);
  });

  it('pauses no longer than the cap, whatever the provider asked', async () => {
    const { client, provider, clock } = paused(60_000);
    provider.script.push(overQuota(3_600_000));
    await client.send(notification, [target('a')]);
    clock.now += 59_999;
    expect(await client.send(notification, [target('b')])).toEqual([{ ok: false, error: expect.objectContaining({ retryAfterMs: 1, scope: 'credential' }) }]);
    clock.now += 1;
    expect((await client.send(notification, [target('c')]))[0].ok).toBe(true);
    expect(provider.sentTo).toEqual(['a', 'c']);
  });

  it(`pauses ${DEFAULT_CREDENTIAL_PAUSE_MS} ms when the provider gave no Retry-After`, async () => {
    const { client, provider, clock } = paused();
    provider.script.push(overQuota());
    await client.send(notification, [target('a')]);
    expect(await client.send(notification, [target('b')])).toEqual([{ ok: false, error: expect.objectContaining({ retryAfterMs: DEFAULT_CREDENTIAL_PAUSE_MS }) }]);
    clock.now += DEFAULT_CREDENTIAL_PAUSE_MS;
    expect((await client.send(notification, [target('c')]))[0].ok).toBe(true);
  });

  it('is not paused by an error about one device or one push service origin', async () => {
    const { client, provider } = paused();
    provider.script.push(
      () => ({ ok: false, error: sendError('rate-limited', 'too many to this device', 3_600_000, 'device') }),
      () => ({ ok: false, error: sendError('unavailable', 'push service down', 3_600_000, 'origin') }),
      () => ({ ok: false, error: sendError('rate-limited', 'no scope given', 3_600_000) }),
    );
    for (const token of ['a', 'b', 'c']) await client.send(notification, [target(token)]);
    expect((await client.send(notification, [target('d')]))[0].ok).toBe(true);
    expect(provider.sentTo).toEqual(['a', 'b', 'c', 'd']);
  });

  it("holds back only that credential's brand: another brand's client and the default's go on", async () => {
    const { registry: reg, created } = registry({ brandCredentials: new Map([['7', BRAND_7], ['11', { account: 'brand-11-account' }]]) });
    const [brand7, brand11, brand8] = [reg.providerFor('7'), reg.providerFor('11'), reg.providerFor('8')];
    created[0].script.push(overQuota(30_000));
    await brand7.send(notification, [target('a')]);

    expect(await brand7.send(notification, [target('b')])).toEqual([{ ok: false, error: expect.objectContaining({ code: 'rate-limited', scope: 'credential' }) }]);
    expect(await messageIdOf(brand11)).toBe('brand-11-account-message');
    expect(await messageIdOf(brand8)).toBe('default-account-message');
    expect(reg.providerFor('7')).toBe(brand7);
    expect(created.map((provider) => provider.sentTo)).toEqual([['a'], ['probe'], ['probe']]);
  });
});

describe('createSandboxProvider', () => {
  it('accepts every target with a sandbox- message id', async () => {
    const provider = createSandboxProvider('fcm');
    expect(provider.name).toBe('fcm');
    const results = await provider.send(notification, [target('a'), target('b')]);
    expect(results).toHaveLength(2);
    for (const result of results) {
      expect(result.ok).toBe(true);
      if (result.ok) expect(result.providerMessageId).toMatch(/^sandbox-/);
    }
    expect(results[0]).not.toEqual(results[1]);
    await expect(provider.send(notification, [])).resolves.toEqual([]);
  });

  it('calls onSend once per target with the push id, token and title', async () => {
    const sends: SandboxSend[] = [];
    const provider = createSandboxProvider('apns', (send) => sends.push(send));
    await provider.send(notification, [target('tok-1'), target('tok-2'), target('tok-3')]);
    expect(sends).toEqual([
      { provider: 'apns', pushId: 'push-1', token: 'tok-1', title: 'Hello' },
      { provider: 'apns', pushId: 'push-1', token: 'tok-2', title: 'Hello' },
      { provider: 'apns', pushId: 'push-1', token: 'tok-3', title: 'Hello' },
    ]);
  });

  it('closes', async () => {
    await expect(createSandboxProvider('webpush').close()).resolves.toBeUndefined();
  });
});
