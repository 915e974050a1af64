import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kustomize } from './kustomize';

// The offline build against what `kubectl kustomize` (kustomize v5) gives for the same input.

describe('kustomize', () => {
  let dir: string;
  const write = (path: string, text: string) => {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kustomize-'));
    write(
      'base/kustomization.yaml',
      `resources: [app.yaml]
labels:
  - pairs: { team: push }
    includeTemplates: true
configMapGenerator:
  - name: x
    literals: [A=1]
`,
    );
    write(
      'base/app.yaml',
      `apiVersion: apps/v1
kind: Deployment
metadata: { name: app }
spec:
  selector: { matchLabels: { app: app } }
  template:
    metadata: { labels: { app: app } }
    spec:
      containers:
        - name: app
          image: crm-operator-api
          envFrom: [{ configMapRef: { name: x } }]
          resources: { limits: { cpu: "1" } }
        - name: sidecar
          image: other:1
`,
    );
    write(
      'overlay/kustomization.yaml',
      `namespace: prod
resources: [../base]
images: [{ name: crm-operator-api, newName: registry.example.com/api, newTag: "2.0" }]
patches: [{ path: patch.yaml }]
`,
    );
    write(
      'overlay/patch.yaml',
      `apiVersion: apps/v1
kind: Deployment
metadata: { name: app }
spec:
  template:
    spec:
      containers:
        - name: app
          resources: { limits: { memory: 1Gi } }
`,
    );
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('names a generated ConfigMap by its content, as kustomize does, and renames the references to it', () => {
    const [deployment, configMap] = kustomize(join(dir, 'overlay')) as any[];
    expect(configMap.metadata.name).toBe('x-89g4tffbfk');
    expect(deployment.spec.template.spec.containers[0].envFrom).toEqual([{ configMapRef: { name: 'x-89g4tffbfk' } }]);
  });

  it('merges a patch into the container of the same name, and sets namespace, labels and image', () => {
    const [deployment, configMap] = kustomize(join(dir, 'overlay')) as any[];
    const [app, sidecar] = deployment.spec.template.spec.containers;
    expect(app.resources).toEqual({ limits: { cpu: '1', memory: '1Gi' } });
    expect(app.image).toBe('registry.example.com/api:2.0');
    expect(sidecar.image).toBe('other:1');
    expect([deployment.metadata.namespace, configMap.metadata.namespace]).toEqual(['prod', 'prod']);
    expect(deployment.metadata.labels).toEqual({ team: 'push' });
    expect(deployment.spec.template.metadata.labels).toEqual({ app: 'app', team: 'push' });
    expect(deployment.spec.selector.matchLabels).toEqual({ app: 'app' });
  });

  it('pins an image by digest, with or without its tag, as kustomize does', () => {
    const digest = `sha256:${'ab'.repeat(32)}`;
    const imageWith = (entry: string) => {
      write('overlay/kustomization.yaml', `resources: [../base]\nimages: [${entry}]\n`);
      return (kustomize(join(dir, 'overlay'))[0] as any).spec.template.spec.containers[0].image;
    };
    expect(imageWith(`{ name: crm-operator-api, newName: registry.example.com/api, newTag: "2.0", digest: "${digest}" }`)).toBe(`registry.example.com/api:2.0@${digest}`);
    expect(imageWith(`{ name: crm-operator-api, newName: registry.example.com/api, digest: "${digest}" }`)).toBe(`registry.example.com/api@${digest}`);
    write('base/app.yaml', readFileSync(join(dir, 'base/app.yaml'), 'utf8').replace('image: crm-operator-api', `image: crm-operator-api:1.0@${digest}`));
    expect(imageWith('{ name: crm-operator-api, newTag: "2.0" }')).toBe('crm-operator-api:2.0');
    expect(imageWith('{ name: crm-operator-api, newName: registry.example.com/api }')).toBe(`registry.example.com/api:1.0@${digest}`);
  });

  it('refuses what it does not render', () => {
    write('overlay/kustomization.yaml', 'resources: [../base]\nnamePrefix: p-\n');
    expect(() => kustomize(join(dir, 'overlay'))).toThrow(/namePrefix/);
  });

  it('fails on a file that is not there', () => {
    write('overlay/kustomization.yaml', 'resources: [../base, missing.yaml]\n');
    expect(() => kustomize(join(dir, 'overlay'))).toThrow(/ENOENT/);
  });
});
