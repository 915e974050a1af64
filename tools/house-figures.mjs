// `node tools/house-figures.mjs [dir] [--json]`: the figures of the house at `dir`: source lines
// and comment share, largest files, migrations, import circles and commit subjects.
// libs/testing/src/import-circles.spec.ts runs it to keep the house free of import circles.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const LIMIT = 450;
const SUBJECT = 72;
const ROOTS = ['apps', 'libs', 'tools', 'prisma'];
const CODE = /\.(ts|mts|cts|js|mjs|cjs)$/;
const SKIP = new Set(['node_modules', 'dist', '.git']);
const GENERATED = 'libs/db/src/generated';

/** Every file under `dirs` of `root` whose name matches `pattern`, outside builds and generated code. */
function walk(root, dirs, pattern) {
  const found = [];
  const visit = (path) => {
    for (const name of readdirSync(path).sort()) {
      const full = join(path, name);
      const rel = relative(root, full).split('\\').join('/');
      if (SKIP.has(name) || rel === GENERATED) continue;
      if (statSync(full).isDirectory()) visit(full);
      else if (pattern.test(name)) found.push(rel);
    }
  };
  for (const dir of dirs) if (existsSync(join(root, dir))) visit(join(root, dir));
  return found;
}

/** A spec, a test helper (libs/testing, a `test/` folder) or the jest setup. */
function isTestPath(path) {
  return (
    path.endsWith('.spec.ts') ||
    /(^|\/)test\//.test(path) ||
    path.startsWith('libs/testing/') ||
    path.startsWith('tools/jest/') ||
    /(^|\/)jest\.config\.js$/.test(path)
  );
}

function linesOf(text) {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

/** Lines that are comments: starting `//`, `/*`, `*` or `*\/`, inside a block comment, or SQL's `--`. */
function commentLines(lines, sql) {
  let inBlock = false;
  let count = 0;
  for (const line of lines) {
    const text = line.trim();
    if (inBlock) {
      count += 1;
      if (text.includes('*/')) inBlock = false;
    } else if (text.startsWith('/*')) {
      count += 1;
      inBlock = !text.slice(2).includes('*/');
    } else if (text.startsWith('//') || text.startsWith('*') || (sql && text.startsWith('--'))) {
      count += 1;
    }
  }
  return count;
}

// Imports: static (`import type` too), re-exports, import() and require().
const IMPORT_PATTERNS = [
  /^[ \t]*import\s+(?:[\w*${}\s,]+?\s+from\s*)?['"]([^'"\n]+)['"]/gm,
  /^[ \t]*export\s+(?:type\s+)?(?:\*(?:\s+as\s+\w+)?|\{[^}]*\})\s*from\s*['"]([^'"\n]+)['"]/gm,
  /\b(?:import|require)\(\s*['"]([^'"\n]+)['"]\s*\)/g,
];

function importsOf(text) {
  return IMPORT_PATTERNS.flatMap((pattern) => [...text.matchAll(pattern)].map((match) => match[1]));
}

/** tsconfig.base.json's paths: `@operator/db` -> libs/db/src/index.ts. */
function aliasesOf(root) {
  const file = join(root, 'tsconfig.base.json');
  if (!existsSync(file)) return new Map();
  const paths = JSON.parse(readFileSync(file, 'utf8')).compilerOptions?.paths ?? {};
  return new Map(Object.entries(paths).filter(([name, targets]) => !name.includes('*') && targets[0]).map(([name, targets]) => [name, targets[0]]));
}

const EXTENSIONS = ['', '.ts', '.mts', '.cts', '.js', '.mjs', '.cjs', '/index.ts', '/index.js'];

/** The file of `files` that `name`, imported from `from`, is; undefined for a package. */
function resolveImport(from, name, files, aliases) {
  let base;
  if (aliases.has(name)) base = aliases.get(name);
  else if (name.startsWith('./') || name.startsWith('../')) base = join(dirname(from), name).split('\\').join('/');
  else return undefined;
  // A TypeScript file may be imported by the name it compiles to (`./x.js` for x.ts).
  for (const stem of [base, base.replace(/\.(m|c)?js$/, '')]) {
    for (const extension of EXTENSIONS) if (files.has(stem + extension)) return stem + extension;
  }
  return undefined;
}

function fileGraph(root, paths) {
  const files = new Set(paths);
  const aliases = aliasesOf(root);
  const graph = new Map();
  for (const path of paths) {
    const targets = importsOf(readFileSync(join(root, path), 'utf8')).map((name) => resolveImport(path, name, files, aliases));
    graph.set(path, [...new Set(targets.filter(Boolean))].sort());
  }
  return graph;
}

/** Library A -> library B when a non-test file of libs/A imports one of libs/B. */
function libraryGraph(files) {
  const libOf = (path) => /^libs\/([^/]+)\//.exec(path)?.[1];
  const graph = new Map();
  for (const [path, targets] of files) {
    const lib = libOf(path);
    if (!lib || isTestPath(path)) continue;
    const edges = new Set(graph.get(lib));
    for (const other of targets.map(libOf)) if (other && other !== lib) edges.add(other);
    graph.set(lib, [...edges].sort());
  }
  return graph;
}

/**
 * The circles of a graph: each strongly connected component of more than one node (or a node that
 * imports itself), as its nodes and one closed path through them. Tarjan's algorithm.
 */
function circles(graph) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const components = [];
  const connect = (node) => {
    index.set(node, index.size);
    low.set(node, index.get(node));
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        connect(next);
        low.set(node, Math.min(low.get(node), low.get(next)));
      } else if (stack.includes(next)) low.set(node, Math.min(low.get(node), index.get(next)));
    }
    if (low.get(node) !== index.get(node)) return;
    const component = stack.splice(stack.indexOf(node)).sort();
    if (component.length > 1 || graph.get(node)?.includes(node)) components.push(component);
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) connect(node);
  return components.map((nodes) => ({ nodes, path: closedPath(graph, nodes) })).sort((a, b) => a.nodes[0].localeCompare(b.nodes[0]));
}

/** A shortest path from the component's first node back to itself, within the component. */
function closedPath(graph, nodes) {
  const inside = new Set(nodes);
  const start = nodes[0];
  const previous = new Map();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift();
    for (const next of graph.get(node) ?? []) {
      if (next === start) {
        const path = [start];
        for (let at = node; at !== start; at = previous.get(at)) path.splice(1, 0, at);
        return [...path, start];
      }
      if (inside.has(next) && !previous.has(next)) {
        previous.set(next, node);
        queue.push(next);
      }
    }
  }
  return [...nodes, start];
}

function commitSubjects(dir) {
  try {
    const out = execFileSync('git', ['-C', dir, 'log', '--format=%s'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 << 20 });
    return linesOf(out);
  } catch {
    return [];
  }
}

function figures(dir) {
  const code = walk(dir, ROOTS, CODE);
  const all = [...code, ...walk(dir, ROOTS, /\.sql$/)].sort();
  const sizes = new Map();
  let lines = 0;
  let comments = 0;
  for (const path of all) {
    const text = linesOf(readFileSync(join(dir, path), 'utf8'));
    sizes.set(path, text.length);
    if (isTestPath(path)) continue;
    lines += text.length;
    comments += commentLines(text, path.endsWith('.sql'));
  }
  const bySize = (paths) => paths.map((path) => ({ path, lines: sizes.get(path) })).sort((a, b) => b.lines - a.lines || a.path.localeCompare(b.path));
  const nonTest = bySize(all.filter((path) => !isTestPath(path)));
  const migrations = join(dir, 'prisma/migrations');
  const files = fileGraph(dir, code);
  const subjects = commitSubjects(dir);
  const characters = subjects.reduce((sum, subject) => sum + [...subject].length, 0);
  return {
    dir: resolve(dir),
    nonTestFiles: nonTest.length,
    nonTestLines: lines,
    commentLines: comments,
    commentShare: lines === 0 ? 0 : Number(((100 * comments) / lines).toFixed(1)),
    largest: nonTest.slice(0, 10),
    overLimit: {
      limit: LIMIT,
      nonTest: nonTest.filter((file) => file.lines > LIMIT),
      allButSpecs: bySize(all.filter((path) => !path.endsWith('.spec.ts'))).filter((file) => file.lines > LIMIT),
    },
    migrations: existsSync(migrations) ? readdirSync(migrations).filter((name) => statSync(join(migrations, name)).isDirectory()).length : 0,
    fileCircles: circles(files),
    libraryCircles: circles(libraryGraph(files)),
    commits: {
      count: subjects.length,
      meanSubjectLength: subjects.length === 0 ? 0 : Number((characters / subjects.length).toFixed(1)),
      within72: subjects.filter((subject) => [...subject].length <= SUBJECT).length,
    },
  };
}

function print(result) {
  const row = (file) => `  ${String(file.lines).padStart(5)}  ${file.path}`;
  const out = [
    `House figures of ${result.dir}`,
    `non-test source: ${result.nonTestLines} lines in ${result.nonTestFiles} files`,
    `comment lines:   ${result.commentLines} (${result.commentShare}% of non-test lines)`,
    `migrations:      ${result.migrations}`,
    'largest non-test files:',
    ...result.largest.map(row),
  ];
  const { limit, nonTest, allButSpecs } = result.overLimit;
  const testCode = new Set(allButSpecs.map((file) => file.path).filter((path) => !nonTest.some((file) => file.path === path)));
  out.push(`files over ${limit} lines: ${nonTest.length} non-test, ${allButSpecs.length} of all but *.spec.ts`);
  out.push(...allButSpecs.map((file) => row(file) + (testCode.has(file.path) ? '  (test code)' : '')));
  for (const [level, found] of [['file', result.fileCircles], ['library', result.libraryCircles]]) {
    out.push(`import circles (${level} level): ${found.length}`);
    for (const circle of found) out.push(`  ${circle.nodes.join(', ')}`, `    ${circle.path.join(' -> ')}`);
  }
  const { count, meanSubjectLength, within72 } = result.commits;
  out.push(`commits: ${count}, subjects of ${meanSubjectLength} characters on average, ${within72} of ${count} within ${SUBJECT}`);
  console.log(out.join('\n'));
}

const args = process.argv.slice(2);
const result = figures(args.find((arg) => !arg.startsWith('--')) ?? '.');
if (args.includes('--json')) console.log(JSON.stringify(result, null, 2));
else print(result);
