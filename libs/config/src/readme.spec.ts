import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TSchema } from '@sinclair/typebox';
import { GatewayConfigSchema } from './config';

// The README's configuration table is what operators configure against: it must list every
// variable with the default the code really uses.
describe('README configuration table', () => {
  const readme = readFileSync(join(__dirname, '../../../README.md'), 'utf8');

  it.each(Object.entries(GatewayConfigSchema.properties as Record<string, TSchema>))('lists %s with its default', (name, schema) => {
    expect(readme).toContain(`| \`${name}\` | \`${schema.default}\` |`);
  });
});
