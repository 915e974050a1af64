import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { APP_CONFIG_SCHEMAS } from '@operator/provider-registry';
import { anchorOf, checkDocs, documentFiles } from './docs-check';

// The README and docs/ stay true: links and anchors resolve, every variable the apps read is
// documented once and every documented one is read, every `npm run` shown is a script. Run on the
// repository, and on copies of it broken on purpose, which it must refuse.

const ROOT = join(__dirname, '../../..');
const appVariables = [...new Set(Object.values(APP_CONFIG_SCHEMAS).flatMap((schema) => Object.keys(schema.properties)))];
/** What the tools read themselves (the migration's URL, ...). */
const otherReaders = readdirSync(join(ROOT, 'tools'))
  .filter((name) => /\.(mjs|cjs|ts)$/.test(name))
  .map((name) => readFileSync(join(ROOT, 'tools', name), 'utf8'));

const check = (root: string) => checkDocs({ root, appVariables, otherReaders });

describe('the documentation check', () => {
  let copy: string;
  beforeEach(() => {
    copy = mkdtempSync(join(tmpdir(), 'docs-check-'));
    for (const file of [...documentFiles(ROOT), 'package.json']) cpSync(join(ROOT, file), join(copy, file), { recursive: true });
  });
  afterEach(() => rmSync(copy, { recursive: true, force: true }));

  const edit = (file: string, change: (text: string) => string) => {
    const path = join(copy, file);
    const before = readFileSync(path, 'utf8');
    const after = change(before);
    expect(after).not.toBe(before);
    writeFileSync(path, after);
  };

  it('finds nothing wrong with the README and docs/', () => {
    expect(documentFiles(ROOT)).toEqual(expect.arrayContaining(['README.md', 'docs/connecting-the-crm.md', 'docs/operating.md', 'docs/developing.md']));
    expect(check(ROOT)).toEqual([]);
    // The copy is checked the same way (so what the next tests find is what they broke).
    expect(check(copy)).toEqual([]);
  });

  it('keeps the README a front page: at most 200 lines, the rest in docs/', () => {
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length).toBeLessThanOrEqual(200);
  });

  it('makes anchors as GitHub does', () => {
    expect(anchorOf("What the CRM gets back, and why")).toBe('what-the-crm-gets-back-and-why');
    expect(anchorOf('Redis: Sentinel, Cluster and managed Redis')).toBe('redis-sentinel-cluster-and-managed-redis');
    expect(anchorOf("The CRM's request headers")).toBe('the-crms-request-headers');
  });

  it('refuses a link to a file that does not exist, and one to a heading that does not', () => {
    edit('README.md', (text) => text.replace('(docs/operating.md)', '(docs/operations.md)'));
    edit('docs/developing.md', (text) => text.replace('(performance.md)', '(performance.md#no-such-heading)'));
    expect(check(copy)).toEqual([
      expect.stringMatching(/^README\.md:\d+: link to docs\/operations\.md: no such file$/),
      expect.stringMatching(/^docs\/developing\.md:\d+: link to performance\.md#no-such-heading: docs\/performance\.md has no heading #no-such-heading$/),
    ]);
  });

  it('refuses a variable the apps read that no configuration table lists', () => {
    edit('docs/operating.md', (text) => text.replace(/^\| `PUSH_DEDUPE_DAYS` \|.*\n/m, ''));
    expect(check(copy)).toEqual(['PUSH_DEDUPE_DAYS: read by the apps, but in no configuration table ("| Variable | Default | Meaning |")']);
  });

  it('refuses a variable documented twice, and one that nothing reads', () => {
    edit('docs/operating.md', (text) =>
      text.replace(/^(\| `LOG_LEVEL` \|.*)$/m, '$1\n| `LOG_LEVEL` | `debug` | Again |\n| `LOG_COLOUR` | `auto` | Read by nothing |'),
    );
    expect(check(copy)).toEqual([
      expect.stringMatching(/^LOG_LEVEL: documented 2 times \(docs\/operating\.md:\d+, docs\/operating\.md:\d+\); once is its home$/),
      expect.stringMatching(/^docs\/operating\.md:\d+: LOG_COLOUR is documented, but nothing reads it$/),
    ]);
  });

  it('refuses an npm run command that package.json does not define', () => {
    edit('docs/developing.md', (text) => `${text}\nRun \`npm run lint:everything\` first.\n`);
    expect(check(copy)).toEqual([expect.stringMatching(/^docs\/developing\.md:\d+: npm run lint:everything: package.json has no such script$/)]);
  });
});
