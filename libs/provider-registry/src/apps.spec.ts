import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { APP_CONFIG_SCHEMAS } from './config';
import { PROVIDERS } from './registry';

describe('APP_CONFIG_SCHEMAS', () => {
  it('names every app of the stack (tools/apps.mjs)', () => {
    const root = join(__dirname, '../../..');
    const apps = JSON.parse(
      execFileSync(process.execPath, ['--input-type=module', '-e', "console.log(JSON.stringify((await import('./tools/apps.mjs')).APPS))"], { cwd: root, encoding: 'utf8' }),
    );
    expect(Object.keys(APP_CONFIG_SCHEMAS).sort()).toEqual([...apps].sort());
  });

  it("gives each push worker its own provider's variables and no other provider's", () => {
    const providers = Object.fromEntries(PROVIDERS.map((provider) => [`push-worker-${provider.name}`, provider.settings.env]));
    for (const [app, own] of Object.entries(providers)) {
      const reads = Object.keys(APP_CONFIG_SCHEMAS[app].properties);
      for (const [other, schema] of Object.entries(providers)) {
        for (const name of Object.keys(schema.properties)) expect({ app, name, read: reads.includes(name) }).toEqual({ app, name, read: other === app });
      }
      expect(reads).toEqual(expect.arrayContaining(['DATABASE_URL', 'REDIS_URL', 'TRACKING_SECRET', 'PUSH_CLAIM_LEASE_MS', ...Object.keys(own.properties)]));
    }
  });
});
