import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TObject, TSchema } from '@sinclair/typebox';
import { GatewayConfigSchema } from './config';
import { ApnsEnv, FcmEnv, PushWorkerEnv, WebPushEnv } from './push';
import { DispatcherEnv } from './events';
import { BonusEnv } from './bonus';
import { MetricsEnv } from './base';

// The README's configuration tables are what operators configure against: they must list every
// variable with the default the code really uses.
describe('README configuration tables', () => {
  const readme = readFileSync(join(__dirname, '../../../README.md'), 'utf8');
  const variables = [GatewayConfigSchema, MetricsEnv, PushWorkerEnv, FcmEnv, ApnsEnv, WebPushEnv, DispatcherEnv, BonusEnv].flatMap((schema: TObject) =>
    Object.entries(schema.properties as Record<string, TSchema>),
  );

  it.each(variables)('lists %s with its default', (name, schema) => {
    const shown = schema.default === '' ? '' : `\`${schema.default}\``;
    expect(readme).toContain(`| \`${name}\` | ${shown} |`);
  });
});
