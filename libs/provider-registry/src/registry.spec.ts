import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PER_PROVIDER_KNOBS } from '@operator/config';
import { CLASS_OF, type ProviderDescriptor } from '@operator/providers';
import { PROVIDERS } from './registry';

const root = join(__dirname, '../../..');
const docs = readFileSync(join(root, 'docs/operating.md'), 'utf8');

/** A registered provider's whole descriptor: its lib exports it under the provider's name. */
function descriptorOf(name: string): ProviderDescriptor | undefined {
  return require(`@operator/provider-${name}`)[name];
}

/** What a provider lacks, each problem naming the provider and the part. */
function missingParts(descriptor: Partial<ProviderDescriptor> | undefined, name: string, base = root, text = docs): string[] {
  const problems: string[] = [];
  const lacks = (part: string) => problems.push(`${name}: ${part}`);
  if (!descriptor) return [`${name}: no descriptor exported as \`${name}\` from @operator/provider-${name}`];
  if (descriptor.name !== name) lacks(`descriptor.name is ${JSON.stringify(descriptor.name)}`);
  if (!/^[a-z][a-z0-9]*$/.test(name)) lacks('a name of lower-case letters and digits');
  if (!descriptor.title) lacks('descriptor.title (its column in the docs tables)');
  if (typeof descriptor.checkDevice !== 'function') lacks('descriptor.checkDevice (its device check)');
  if (typeof descriptor.create !== 'function') lacks('descriptor.create (its client factory)');
  const settings = descriptor.settings;
  if (!settings?.env?.properties) lacks('descriptor.settings.env (its variables)');
  if (!settings || typeof settings.credential !== 'function') lacks('descriptor.settings.credential (how a brand entry is read)');
  const variables = Object.keys(settings?.env?.properties ?? {});
  if (!settings?.variables || Object.keys(settings.variables).length === 0) lacks('descriptor.settings.variables (the default brand\'s credentials)');
  for (const variable of [...Object.values(settings?.variables ?? {}), ...Object.values(settings?.optionalVariables ?? {}), ...(settings?.endpoint ? [settings.endpoint] : [])]) {
    if (!variables.includes(variable)) lacks(`${variable} in descriptor.settings.env`);
  }
  if (!descriptor.tuning) lacks('descriptor.tuning (its knobs that differ, {} for none)');
  for (const knob of Object.keys(descriptor.tuning ?? {})) {
    if (!(PER_PROVIDER_KNOBS as readonly string[]).includes(knob)) lacks(`descriptor.tuning.${knob} is not a knob a provider sets`);
  }
  const errors = Object.entries(descriptor.errors ?? {});
  if (errors.length === 0) lacks('descriptor.errors (its error codes and what each becomes)');
  for (const [code, becomes] of errors) {
    if (!(becomes in CLASS_OF)) lacks(`descriptor.errors[${code}]: ${becomes} is not a SendError code`);
    const classified = descriptor.classify?.(code);
    if (descriptor.classify && classified !== becomes) lacks(`descriptor.errors[${code}] says ${becomes}, the client says ${classified}`);
  }
  const app = join(base, 'apps', `push-worker-${name}`);
  for (const file of ['project.json', 'src/main.ts']) if (!existsSync(join(app, file))) lacks(`apps/push-worker-${name}/${file}`);
  for (const variable of variables) if (!text.includes(`| \`${variable}\` |`)) lacks(`${variable} in the configuration table of docs/operating.md`);
  if (descriptor.title && !new RegExp(`^\\| Knob \\| Variable \\|.* ${descriptor.title} \\|`, 'm').test(text)) lacks(`its column (${descriptor.title}) in the worker tuning table of docs/operating.md`);
  return problems;
}

describe('the provider registry', () => {
  it.each(PROVIDERS.map((provider) => provider.name))('has every part of %s', (name) => {
    expect(missingParts(descriptorOf(name), name)).toEqual([]);
  });

  it('lists the light part of each provider as its descriptor has it', () => {
    for (const info of PROVIDERS) expect({ name: info.name, same: descriptorOf(info.name)?.settings === info.settings && descriptorOf(info.name)?.checkDevice === info.checkDevice }).toEqual({ name: info.name, same: true });
  });

  it('registers each name once, and every push worker app and provider lib', () => {
    const names = PROVIDERS.map((provider) => provider.name);
    expect(new Set(names).size).toBe(names.length);
    const apps = readdirSync(join(root, 'apps')).filter((dir) => dir.startsWith('push-worker-')).map((dir) => dir.slice('push-worker-'.length));
    const libs = readdirSync(join(root, 'libs')).filter((dir) => dir.startsWith('provider-') && dir !== 'provider-registry').map((dir) => dir.slice('provider-'.length));
    expect(apps.sort()).toEqual([...names].sort());
    expect(libs.sort()).toEqual([...names].sort());
  });

  it('names the provider and the part a broken descriptor lacks', () => {
    const fcm = descriptorOf('fcm')!;
    const { create: _create, ...noFactory } = fcm;
    expect(missingParts(noFactory, 'fcm')).toEqual(['fcm: descriptor.create (its client factory)']);
    expect(missingParts({ ...fcm, errors: { QUOTA_EXCEEDED: 'auth' } }, 'fcm')).toEqual([
      'fcm: descriptor.errors[QUOTA_EXCEEDED] says auth, the client says rate-limited',
    ]);
    expect(missingParts({ ...fcm, name: 'nowhere' }, 'nowhere', root, docs.replace('| `FCM_ENDPOINT` |', '| FCM_ENDPOINT |'))).toEqual([
      'nowhere: apps/push-worker-nowhere/project.json',
      'nowhere: apps/push-worker-nowhere/src/main.ts',
      'nowhere: FCM_ENDPOINT in the configuration table of docs/operating.md',
    ]);
    expect(missingParts(undefined, 'expo')).toEqual(['expo: no descriptor exported as `expo` from @operator/provider-expo']);
  });
});
