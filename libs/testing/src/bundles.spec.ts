import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';

// What each app's bundle needs at run time, read from esbuild's metafile after building every app as
// `npm run build` does (tools/bundle-report.mjs): each app loads only what it uses.
const root = join(__dirname, '../../..');
const outdir = 'dist/bundle-check';

interface BundleReport {
  /** npm packages and node: modules the bundle requires, dynamic imports too. */
  requires: string[];
  /** Workspace projects its import graph reaches. */
  projects: string[];
}

let report: Record<string, BundleReport>;

beforeAll(() => {
  report = JSON.parse(execFileSync(process.execPath, ['tools/bundle-report.mjs', outdir], { cwd: root, encoding: 'utf8' }));
}, 60000);

afterAll(() => rmSync(join(root, outdir), { recursive: true, force: true }));

const PROVIDER_SDKS = ['firebase-admin', '@parse/node-apn', 'web-push'];
const PROVIDER_LIBS = ['libs/provider-fcm', 'libs/provider-apns', 'libs/provider-webpush', 'libs/provider-hms', 'libs/provider-onesignal'];
// The HTTP server, its docs page and the queue dashboard.
const GATEWAY_ONLY = ['fastify', '@fastify/swagger', '@fastify/swagger-ui', '@bull-board/api', '@bull-board/fastify', '@bull-board/ui'];

// Per app: the provider code it bundles and the provider SDKs it requires. firebase-admin gives the
// FCM provider its types only: the FCM worker speaks HTTP/2 itself.
const PROVIDERS: Record<string, { libs: string[]; sdks: string[] }> = {
  gateway: { libs: [], sdks: [] },
  'push-worker-fcm': { libs: ['libs/provider-fcm'], sdks: [] },
  'push-worker-apns': { libs: ['libs/provider-apns'], sdks: ['@parse/node-apn'] },
  'push-worker-webpush': { libs: ['libs/provider-webpush'], sdks: ['web-push'] },
  // Push Kit and OneSignal are plain HTTPS APIs, spoken through @operator/egress: no SDK.
  'push-worker-hms': { libs: ['libs/provider-hms'], sdks: [] },
  'push-worker-onesignal': { libs: ['libs/provider-onesignal'], sdks: [] },
  bonus: { libs: [], sdks: [] },
  'webhook-dispatcher': { libs: [], sdks: [] },
};

describe('app bundles', () => {
  it('builds every app', () => {
    expect(Object.keys(report).sort()).toEqual(Object.keys(PROVIDERS).sort());
    expect(report.gateway.requires).toContain('fastify');
    for (const app of Object.keys(PROVIDERS)) expect(report[app].projects).toContain(`apps/${app}`);
  });

  it.each(Object.entries(PROVIDERS))('%s bundles the provider code and SDKs it uses, no other', (app, expected) => {
    expect(report[app].projects.filter((project) => PROVIDER_LIBS.includes(project))).toEqual(expected.libs);
    expect(report[app].requires.filter((name) => PROVIDER_SDKS.includes(name))).toEqual(expected.sdks);
  });

  it.each(Object.keys(PROVIDERS).filter((app) => app !== 'gateway'))('%s requires none of the HTTP server, docs or dashboard packages', (app) => {
    expect(report[app].requires.filter((name) => GATEWAY_ONLY.includes(name))).toEqual([]);
  });

  it('only the webhook dispatcher bundles the dispatcher and the RabbitMQ client', () => {
    for (const app of Object.keys(PROVIDERS)) {
      const dispatcher = app === 'webhook-dispatcher';
      expect({ app, webhooks: report[app].projects.includes('libs/webhooks') }).toEqual({ app, webhooks: dispatcher });
      expect({ app, amqplib: report[app].requires.includes('amqplib') }).toEqual({ app, amqplib: dispatcher });
    }
  });
});
