import type { PushRequest } from '@operator/contract';
import { createProviderRegistry, type RegistryOptions } from './registry';
import { createSandboxProvider, type SandboxSend } from './sandbox/provider';
import type { Notification, PushProvider, SendTarget } from './types';

interface FakeCredential {
  account: string;
}

/** A hand-written provider that records what is done with it. */
interface FakeProvider extends PushProvider {
  credential: FakeCredential;
  label: string;
  closed: number;
}

function fakeFactory() {
  const created: FakeProvider[] = [];
  const create = jest.fn((credential: FakeCredential, label: string): PushProvider => {
    const provider: FakeProvider = {
      name: 'webpush',
      credential,
      label,
      closed: 0,
      async send(_notification, targets) {
        return targets.map(() => ({ ok: true as const, providerMessageId: `${credential.account}-message` }));
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
    ...options,
  });
  return { registry: reg, ...factory };
}

describe('createProviderRegistry', () => {
  it('makes a brand with its own credential a client from that credential', () => {
    const { registry: reg, create, created } = registry();
    const client = reg.providerFor('7') as FakeProvider;
    expect(create).toHaveBeenCalledTimes(1);
    expect(create).toHaveBeenCalledWith(BRAND_7, 'brand-7');
    expect(client).toBe(created[0]);
    expect(client.credential).toBe(BRAND_7);
  });

  it("gives another brand the default's client", () => {
    const { registry: reg, create } = registry();
    const client = reg.providerFor('8') as FakeProvider;
    expect(create).toHaveBeenCalledWith(DEFAULT, 'default');
    expect(client.credential).toBe(DEFAULT);
    expect(client.label).toBe('default');
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
    expect((reg.providerFor('7') as FakeProvider).credential).toBe(BRAND_7);
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
