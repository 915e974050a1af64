import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseAllDocuments } from 'yaml';

// A kustomize build, offline, for the features deploy/kubernetes uses: resources (files and
// directories), namespace, labels, images, strategic-merge patches and configMapGenerator (with
// kustomize's content-hash name suffix and the references to it). A kustomization that asks for
// anything else is refused, so the manifests cannot drift to features this build does not render
// the way `kubectl kustomize` does.

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [field: string]: unknown };
  [field: string]: unknown;
}

type Json = Record<string, unknown>;

interface ConfigMapGenerator {
  name: string;
  behavior?: 'create' | 'merge';
  literals?: string[];
  files?: string[];
  options?: { disableNameSuffixHash?: boolean; labels?: Record<string, string> };
}

/** An `images` entry: a new name, and a new tag, a digest or both (either replaces the image's own). */
interface Image {
  name: string;
  newName?: string;
  newTag?: string;
  digest?: string;
}

interface Kustomization {
  namespace?: string;
  labels?: { pairs: Record<string, string>; includeSelectors?: boolean; includeTemplates?: boolean }[];
  resources?: string[];
  images?: Image[];
  configMapGenerator?: ConfigMapGenerator[];
  patches?: { path: string }[];
}

const SUPPORTED: Record<string, string[]> = {
  kustomization: ['apiVersion', 'kind', 'namespace', 'labels', 'resources', 'images', 'configMapGenerator', 'patches'],
  generator: ['name', 'behavior', 'literals', 'files', 'options'],
  generatorOptions: ['disableNameSuffixHash', 'labels'],
  labels: ['pairs', 'includeSelectors', 'includeTemplates'],
  images: ['name', 'newName', 'newTag', 'digest'],
  patches: ['path'],
};

/** List items merged by key (as the Kubernetes types declare them); every other list is replaced. */
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  ports: 'containerPort',
};

/** A generated ConfigMap: the name its kustomization gave it, and whether it gets a hash suffix. */
interface Generated {
  name: string;
  hashed: boolean;
}

interface Build {
  resources: Manifest[];
  generated: Map<Manifest, Generated>;
}

export function kustomize(dir: string): Manifest[] {
  const { resources, generated } = build(dir);
  const names = new Map<string, string>();
  for (const [manifest, { name, hashed }] of generated) {
    if (hashed) manifest.metadata.name = `${name}-${configMapHash(manifest)}`;
    names.set(name, manifest.metadata.name);
  }
  for (const manifest of resources) {
    const pod = podSpec(manifest);
    if (pod) renameConfigMapReferences(pod, names);
  }
  return resources;
}

function build(dir: string): Build {
  const kustomization = readYaml(join(dir, 'kustomization.yaml'))[0] as Kustomization;
  checkFields('kustomization', kustomization as Json, join(dir, 'kustomization.yaml'));

  const resources: Manifest[] = [];
  const generated = new Map<Manifest, Generated>();
  for (const entry of kustomization.resources ?? []) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) {
      const nested = build(path);
      resources.push(...nested.resources);
      for (const [manifest, info] of nested.generated) generated.set(manifest, info);
    } else {
      resources.push(...(readYaml(path) as Manifest[]));
    }
  }

  for (const generator of kustomization.configMapGenerator ?? []) {
    checkFields('generator', generator as unknown as Json, generator.name);
    checkFields('generatorOptions', (generator.options ?? {}) as Json, generator.name);
    const data = generatorData(dir, generator);
    if (generator.behavior === 'merge') {
      const existing = [...generated].find(([, info]) => info.name === generator.name)?.[0];
      if (!existing) throw new Error(`configMapGenerator ${generator.name}: nothing to merge into`);
      Object.assign(existing.data as Record<string, string>, data);
      existing.metadata.labels = { ...existing.metadata.labels, ...generator.options?.labels };
      continue;
    }
    if (generator.behavior && generator.behavior !== 'create') throw new Error(`configMapGenerator ${generator.name}: behavior ${generator.behavior} is not supported`);
    const manifest: Manifest = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: generator.name }, data };
    if (generator.options?.labels) manifest.metadata.labels = { ...generator.options.labels };
    resources.push(manifest);
    generated.set(manifest, { name: generator.name, hashed: !generator.options?.disableNameSuffixHash });
  }

  for (const { path } of kustomization.patches ?? []) {
    for (const patch of readYaml(join(dir, path)) as Manifest[]) {
      const target = resources.find((manifest) => manifest.kind === patch.kind && manifest.metadata.name === patch.metadata.name);
      if (!target) throw new Error(`${join(dir, path)}: no ${patch.kind} ${patch.metadata.name} to patch`);
      mergeInto(target, patch);
    }
  }

  for (const manifest of resources) {
    if (kustomization.namespace) manifest.metadata.namespace = kustomization.namespace;
    for (const labels of kustomization.labels ?? []) {
      checkFields('labels', labels as unknown as Json, 'labels');
      if (labels.includeSelectors) throw new Error('labels: includeSelectors is not supported (selectors cannot change once applied)');
      manifest.metadata.labels = { ...manifest.metadata.labels, ...labels.pairs };
      const template = (manifest.spec as Json | undefined)?.template as { metadata?: Manifest['metadata'] } | undefined;
      if (labels.includeTemplates && template) template.metadata = { ...template.metadata, labels: { ...template.metadata?.labels, ...labels.pairs } } as Manifest['metadata'];
    }
    const pod = podSpec(manifest);
    for (const image of kustomization.images ?? []) {
      checkFields('images', image as unknown as Json, image.name);
      for (const container of pod ? podContainers(pod) : []) container.image = retag(container.image as string, image);
    }
  }
  return { resources, generated };
}

function readYaml(path: string): unknown[] {
  return parseAllDocuments(readFileSync(path, 'utf8'))
    .map((document) => {
      if (document.errors.length) throw new Error(`${path}: ${document.errors[0].message}`);
      return document.toJS();
    })
    .filter((value) => value !== null);
}

function checkFields(what: string, value: Json, where: string) {
  const unknown = Object.keys(value).filter((field) => !SUPPORTED[what].includes(field));
  if (unknown.length) throw new Error(`${where}: ${what} field(s) ${unknown.join(', ')} not supported by this build`);
}

function generatorData(dir: string, generator: ConfigMapGenerator): Record<string, string> {
  const data: Record<string, string> = {};
  const add = (key: string, value: string) => {
    if (key in data) throw new Error(`configMapGenerator ${generator.name}: ${key} twice`);
    data[key] = value;
  };
  for (const literal of generator.literals ?? []) {
    const at = literal.indexOf('=');
    if (at < 1) throw new Error(`configMapGenerator ${generator.name}: "${literal}" is not KEY=VALUE`);
    add(literal.slice(0, at), literal.slice(at + 1));
  }
  for (const file of generator.files ?? []) {
    const [key, path] = file.includes('=') ? file.split('=', 2) : [basename(file), file];
    add(key, readFileSync(join(dir, path), 'utf8'));
  }
  return data;
}

/** kustomize's name suffix: the first 10 hex digits of a SHA-256 of the data, with a few letters swapped. */
export function configMapHash(manifest: Manifest): string {
  const data = manifest.data as Record<string, string>;
  const sorted = Object.fromEntries(Object.keys(data).sort().map((key) => [key, data[key]]));
  // Go's encoding/json escapes these three characters.
  const encoded = JSON.stringify({ data: sorted, kind: 'ConfigMap', name: '' }).replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
  const swaps: Record<string, string> = { '0': 'g', '1': 'h', '3': 'k', a: 'm', e: 't' };
  return [...createHash('sha256').update(encoded).digest('hex').slice(0, 10)].map((c) => swaps[c] ?? c).join('');
}

export function podSpec(manifest: Manifest): Json | undefined {
  const template = (manifest.spec as Json | undefined)?.template as Json | undefined;
  return template?.spec as Json | undefined;
}

export function podContainers(pod: Json): Json[] {
  return [...((pod.initContainers as Json[]) ?? []), ...((pod.containers as Json[]) ?? [])];
}

function renameConfigMapReferences(pod: Json, names: Map<string, string>) {
  const rename = (reference: { name?: string } | undefined) => {
    if (reference?.name && names.has(reference.name)) reference.name = names.get(reference.name);
  };
  for (const container of podContainers(pod)) {
    for (const source of (container.envFrom as Json[]) ?? []) rename(source.configMapRef as { name?: string });
    for (const variable of (container.env as Json[]) ?? []) rename((variable.valueFrom as Json | undefined)?.configMapKeyRef as { name?: string });
  }
  for (const volume of (pod.volumes as Json[]) ?? []) rename(volume.configMap as { name?: string });
}

/** kustomize's image transformer: a new tag or digest replaces both the tag and the digest the image had. */
function retag(image: string, { name, newName, newTag, digest }: Image): string {
  const [, repository, tag, pinned] = image.match(/^(.*?)(?::([^:/@]+))?(?:@(.+))?$/)!;
  if (repository !== name) return image;
  const [finalTag, finalDigest] = newTag || digest ? [newTag, digest] : [tag, pinned];
  return `${newName ?? repository}${finalTag ? `:${finalTag}` : ''}${finalDigest ? `@${finalDigest}` : ''}`;
}

function mergeInto(target: Json, patch: Json) {
  for (const [field, value] of Object.entries(patch)) {
    const current = target[field];
    if (value === null) delete target[field];
    else if (Array.isArray(value) && Array.isArray(current) && MERGE_KEYS[field]) mergeList(current as Json[], value as Json[], MERGE_KEYS[field]);
    else if (isObject(value) && isObject(current)) mergeInto(current, value);
    else target[field] = value;
  }
}

function mergeList(current: Json[], patch: Json[], key: string) {
  for (const item of patch) {
    const existing = current.find((candidate) => candidate[key] === item[key]);
    if (existing) mergeInto(existing, item);
    else current.push(item);
  }
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
