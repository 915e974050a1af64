import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TObject, TSchema } from '@sinclair/typebox';
import { BonusEnv, ComplianceEnv, DispatcherEnv, GatewayConfigSchema, MetricsEnv, PUSH_TUNING_KNOBS, PushProviderTuningEnv, PushWorkerEnv, type PushTuningKnob } from '@operator/config';
import { PUSH_TUNING } from './config';
import { PROVIDERS } from './registry';

// The configuration tables of docs/operating.md are what operators configure against: they must list every
// variable with the default the code really uses, every registered provider's included.
describe('docs/operating.md configuration tables', () => {
  const readme = readFileSync(join(__dirname, '../../../docs/operating.md'), 'utf8');
  const schemas: TObject[] = [GatewayConfigSchema, MetricsEnv, PushWorkerEnv, ComplianceEnv, ...PROVIDERS.map((provider) => provider.settings.env), DispatcherEnv, BonusEnv];
  const variables = schemas.flatMap((schema) => Object.entries(schema.properties as Record<string, TSchema>));

  it.each(variables)('lists %s with its default', (name, schema) => {
    const shown = schema.default === '' || schema.default === undefined ? '' : `\`${schema.default}\``;
    expect(readme).toContain(`| \`${name}\` | ${shown} |`);
  });

  it.each(Object.keys(PushProviderTuningEnv.properties))('lists %s with a default per provider', (name) => {
    expect(readme).toContain(`| \`${name}\` | per provider |`);
  });
});

// The worker tuning table: each knob with its variable (or "fixed") and each provider's default,
// in the registry's order.
describe('docs/operating.md worker tuning table', () => {
  const readme = readFileSync(join(__dirname, '../../../docs/operating.md'), 'utf8');

  function cell(provider: string, knob: PushTuningKnob): string {
    const value = PUSH_TUNING[provider][knob];
    return value === null ? 'no cap' : `\`${value}\``;
  }

  it('says where the table lives', () => {
    expect(readme).toContain('**Worker tuning.**');
    expect(readme).toContain('`DEFAULT_TUNING` in `libs/config/src/push-tuning.ts`');
    expect(readme).toContain(`| Knob | Variable | ${PROVIDERS.map((provider) => provider.title).join(' | ')} | Meaning |`);
  });

  it.each(Object.keys(PUSH_TUNING_KNOBS) as PushTuningKnob[])("lists %s with its variable and each provider's default", (knob) => {
    const spec = PUSH_TUNING_KNOBS[knob];
    const variable = 'variable' in spec ? `\`${spec.variable}\`` : 'fixed';
    expect(readme).toContain(`| \`${knob}\` | ${variable} | ${PROVIDERS.map((provider) => cell(provider.name, knob)).join(' | ')} |`);
  });
});
