import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TObject, TSchema } from '@sinclair/typebox';
import { GatewayConfigSchema } from './config';
import { ApnsEnv, FcmEnv, HmsEnv, OneSignalEnv, PushWorkerEnv, WebPushEnv } from './push';
import { PUSH_TUNING, PUSH_TUNING_KNOBS, PUSH_TUNING_NOT_SETTABLE, PushProviderTuningEnv, type PushTuningKnob } from './push-tuning';
import type { ProviderName } from '@operator/contract';
import { DispatcherEnv } from './events';
import { BonusEnv } from './bonus';
import { MetricsEnv } from './base';

// The configuration tables of docs/operating.md are what operators configure against: they must list every
// variable with the default the code really uses.
describe('docs/operating.md configuration tables', () => {
  const readme = readFileSync(join(__dirname, '../../../docs/operating.md'), 'utf8');
  const variables = [GatewayConfigSchema, MetricsEnv, PushWorkerEnv, FcmEnv, ApnsEnv, WebPushEnv, HmsEnv, OneSignalEnv, DispatcherEnv, BonusEnv].flatMap((schema: TObject) =>
    Object.entries(schema.properties as Record<string, TSchema>),
  );

  it.each(variables)('lists %s with its default', (name, schema) => {
    const shown = schema.default === '' || schema.default === undefined ? '' : `\`${schema.default}\``;
    expect(readme).toContain(`| \`${name}\` | ${shown} |`);
  });

  it.each(Object.keys(PushProviderTuningEnv.properties))('lists %s with a default per provider', (name) => {
    expect(readme).toContain(`| \`${name}\` | per provider |`);
  });
});

// The worker tuning table: each knob with its variable (or "fixed") and each provider's default,
// in the order FCM, APNs, Web Push, HMS, OneSignal.
describe('docs/operating.md worker tuning table', () => {
  const readme = readFileSync(join(__dirname, '../../../docs/operating.md'), 'utf8');
  const providers: ProviderName[] = ['fcm', 'apns', 'webpush', 'hms', 'onesignal'];

  function cell(provider: ProviderName, knob: PushTuningKnob): string {
    const value = PUSH_TUNING[provider][knob];
    const shown = value === null ? 'no cap' : `\`${value}\``;
    return PUSH_TUNING_NOT_SETTABLE[provider]?.[knob] ? `${shown} (fixed)` : shown;
  }

  it('says where the table lives', () => {
    expect(readme).toContain('**Worker tuning.**');
    expect(readme).toContain('`PUSH_TUNING` in `libs/config/src/push-tuning.ts`');
    expect(readme).toContain('| Knob | Variable | FCM | APNs | Web Push | HMS | OneSignal | Meaning |');
  });

  it.each(Object.keys(PUSH_TUNING_KNOBS) as PushTuningKnob[])('lists %s with its variable and each provider\'s default', (knob) => {
    const spec = PUSH_TUNING_KNOBS[knob];
    const variable = 'variable' in spec ? `\`${spec.variable}\`` : 'fixed';
    expect(readme).toContain(`| \`${knob}\` | ${variable} | ${providers.map((provider) => cell(provider, knob)).join(' | ')} |`);
  });
});
