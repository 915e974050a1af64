import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

// The documentation check: the README and every file under docs/ must stay true to the code.
// - every relative link names a file that exists, and every #anchor a heading of that file;
// - every environment variable an app reads is a row of a configuration table ("| Variable |
//   Default | Meaning |") once, and every row there is a variable an app or a tool reads;
// - every `npm run <script>` shown, and `npm start` and `npm test`, are scripts of package.json.
// It answers the problems found, one line each, naming the file and line.

export interface DocsCheckInput {
  /** The repository's root. */
  root: string;
  /** Every variable the apps read (the provider registry's APP_CONFIG_SCHEMAS). */
  appVariables: Iterable<string>;
  /**
   * Text of the code that reads variables itself (tools/*.mjs, ...): a documented variable found
   * there, as `NAME`, exists too.
   */
  otherReaders?: string[];
}

/** The documents checked: README.md and every Markdown file under docs/. */
export function documentFiles(root: string): string[] {
  const docs = existsSync(join(root, 'docs')) ? readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).sort() : [];
  return ['README.md', ...docs.map((name) => `docs/${name}`)];
}

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as dashes. */
export function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\- _]/gu, '')
    .replace(/ /g, '-');
}

interface Line {
  text: string;
  number: number;
}

/** The lines of a document outside its fenced code blocks. */
function prose(text: string): Line[] {
  const out: Line[] = [];
  let fenced = false;
  text.split('\n').forEach((line, i) => {
    if (/^\s*```/.test(line)) fenced = !fenced;
    else if (!fenced) out.push({ text: line, number: i + 1 });
  });
  return out;
}

function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  for (const { text: line } of prose(text)) {
    const heading = /^#{1,6} (.+)$/.exec(line);
    if (heading) anchors.add(anchorOf(heading[1]));
  }
  return anchors;
}

/** The rows of the configuration tables: the variable named in each, where. */
function documentedVariables(file: string, text: string): { name: string; where: string }[] {
  const rows: { name: string; where: string }[] = [];
  let inTable = false;
  for (const { text: line, number } of prose(text)) {
    if (/^\| Variable \| Default \| Meaning \|/.test(line)) inTable = true;
    else if (!line.startsWith('|')) inTable = false;
    else if (inTable) {
      const name = /^\| `([A-Z][A-Z0-9_]*)` \|/.exec(line)?.[1];
      if (name) rows.push({ name, where: `${file}:${number}` });
    }
  }
  return rows;
}

export function checkDocs(input: DocsCheckInput): string[] {
  const { root } = input;
  const problems: string[] = [];
  const files = documentFiles(root);
  const texts = new Map(files.map((file) => [file, readFileSync(join(root, file), 'utf8')]));
  const anchors = new Map<string, Set<string>>();
  const anchorsFor = (file: string) => {
    if (!anchors.has(file)) anchors.set(file, anchorsOf(texts.get(file) ?? readFileSync(join(root, file), 'utf8')));
    return anchors.get(file)!;
  };

  // Links and anchors.
  for (const [file, text] of texts) {
    for (const { text: line, number } of prose(text)) {
      for (const match of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1];
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
        const [path, anchor] = target.split('#', 2) as [string, string | undefined];
        const targetFile = path ? relative(root, resolve(dirname(join(root, file)), path)) : file;
        if (path && !existsSync(join(root, targetFile))) {
          problems.push(`${file}:${number}: link to ${target}: no such file`);
          continue;
        }
        if (anchor !== undefined && targetFile.endsWith('.md') && !anchorsFor(targetFile).has(anchor)) {
          problems.push(`${file}:${number}: link to ${target}: ${targetFile} has no heading #${anchor}`);
        }
      }
    }
  }

  // Environment variables: each read one documented once, each documented one read.
  const rows = [...texts].flatMap(([file, text]) => documentedVariables(file, text));
  const read = new Set(input.appVariables);
  const others = (input.otherReaders ?? []).join('\n');
  for (const name of [...read].sort()) {
    const found = rows.filter((row) => row.name === name);
    if (found.length === 0) problems.push(`${name}: read by the apps, but in no configuration table ("| Variable | Default | Meaning |")`);
    if (found.length > 1) problems.push(`${name}: documented ${found.length} times (${found.map((row) => row.where).join(', ')}); once is its home`);
  }
  for (const row of rows) {
    if (!read.has(row.name) && !new RegExp(`\\b${row.name}\\b`).test(others)) problems.push(`${row.where}: ${row.name} is documented, but nothing reads it`);
  }

  // Commands: every npm run shown is a script.
  const scripts = new Set(Object.keys((JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts?: Record<string, string> }).scripts ?? {}));
  for (const [file, text] of texts) {
    text.split('\n').forEach((line, i) => {
      for (const match of line.matchAll(/\bnpm run ([a-z][\w:-]*)/g)) {
        if (!scripts.has(match[1])) problems.push(`${file}:${i + 1}: npm run ${match[1]}: package.json has no such script`);
      }
      for (const match of line.matchAll(/\bnpm (start|test)\b/g)) {
        if (!scripts.has(match[1])) problems.push(`${file}:${i + 1}: npm ${match[1]}: package.json has no such script`);
      }
    });
  }
  return problems;
}
