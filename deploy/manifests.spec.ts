import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TSchema } from '@sinclair/typebox';
import { APP_CONFIG_SCHEMAS } from '@operator/provider-registry';
import type { ProviderName } from '@operator/contract';
import { PUSH_QUEUES, queueKey, type PushQueueName } from '@operator/queue';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { TriggerAuthentication } from '@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { parse } from 'yaml';
import { exportedMetrics, networkAllows, productionVariables, PUBLIC_FAMILIES, restrictedProblems, type Peer } from './checks';
import { kustomize, podContainers, podSpec, type Manifest } from './kustomize';

// The production overlay, rendered as `kubectl kustomize` does, checked against the Kubernetes and
// KEDA schemas and against what each app really reads and serves.

type Json = Record<string, any>;

const KUBERNETES = join(__dirname, 'kubernetes');
const OVERLAY = join(KUBERNETES, 'overlays/production');
const rendered = kustomize(OVERLAY);
const NAMESPACE = 'operator-api';
const APPS = Object.keys(APP_CONFIG_SCHEMAS);

const MODELS: Record<string, { new (data: any): { validate(): void } }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'batch/v1/Job': Job,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
  'keda.sh/v1alpha1/TriggerAuthentication': TriggerAuthentication,
};

const ofKind = (kind: string) => rendered.filter((manifest) => manifest.kind === kind) as Json[];
const named = (kind: string, name: string) => ofKind(kind).find((manifest) => manifest.metadata.name === name);
const mainContainer = (deployment: Json): Json => deployment.spec.template.spec.containers[0];
/** The apps' Deployments; PgBouncer's is checked on its own. */
const deployments = ofKind('Deployment').filter((deployment) => appOf(deployment));
const pgbouncer = named('Deployment', 'pgbouncer')!;
const deploymentOf = (app: string) => deployments.find((deployment) => appOf(deployment) === app)!;

/** The app a Deployment runs, from its command (dist/apps/<app>/main.js). */
function appOf(deployment: Json): string | undefined {
  const command: string[] = mainContainer(deployment).command ?? [];
  return command.map((part) => part.match(/^dist\/apps\/(.+)\/main\.js$/)?.[1]).find(Boolean);
}

interface Setting {
  value?: string;
  secretKey?: string;
}

/** A container's environment, resolved: each variable once, with its value or the Secret key it comes from. */
function environment(container: Json): Map<string, Setting> {
  const settings = new Map<string, Setting>();
  const set = (name: string, setting: Setting) => {
    if (settings.has(name)) throw new Error(`${container.name}: ${name} is set twice`);
    settings.set(name, setting);
  };
  for (const source of container.envFrom ?? []) {
    const configMap = named('ConfigMap', source.configMapRef?.name);
    if (!configMap) throw new Error(`${container.name}: envFrom names ${JSON.stringify(source)}, which is not rendered`);
    for (const [name, value] of Object.entries(configMap.data as Record<string, string>)) set(name, { value });
  }
  for (const variable of container.env ?? []) {
    if (variable.value !== undefined) set(variable.name, { value: variable.value });
    else if (variable.valueFrom?.secretKeyRef) set(variable.name, { secretKey: variable.valueFrom.secretKeyRef.key });
    else throw new Error(`${container.name}: ${variable.name} comes from neither a value nor the Secret`);
  }
  return settings;
}

function settingOf(app: string, name: string): string | undefined {
  return environment(mainContainer(deploymentOf(app))).get(name)?.value;
}

/** The container port a probe or a Service names (by name or number). */
function portNumber(container: Json, port: string | number): number | undefined {
  if (typeof port === 'number') return port;
  return (container.ports ?? []).find((candidate: Json) => candidate.name === port)?.containerPort;
}

const secretKeys = () => {
  const keys = new Set<string>();
  for (const manifest of rendered) {
    for (const container of podSpec(manifest) ? podContainers(podSpec(manifest)!) : []) {
      for (const variable of (container.env as Json[]) ?? []) {
        const reference = variable.valueFrom?.secretKeyRef;
        if (reference) keys.add(`${reference.name}/${reference.key}`);
      }
    }
  }
  for (const auth of ofKind('TriggerAuthentication')) {
    for (const reference of auth.spec.secretTargetRef) keys.add(`${reference.name}/${reference.key}`);
  }
  return keys;
};

describe('the production overlay', () => {
  it.each(rendered.map((manifest) => [`${manifest.kind} ${manifest.metadata.name}`, manifest]))('%s is valid against its schema', (_name, manifest) => {
    const manifestJson = manifest as Manifest;
    expect(manifestJson.metadata.namespace).toBe(NAMESPACE);
    if (manifestJson.kind === 'ServiceMonitor') return; // checked below
    const Model = MODELS[`${manifestJson.apiVersion}/${manifestJson.kind}`];
    expect(Model).toBeDefined();
    expect(() => new Model(manifestJson).validate()).not.toThrow();
  });

  it('has a Deployment for every app and for PgBouncer, and none for anything else', () => {
    expect(deployments.map(appOf).sort()).toEqual([...APPS].sort());
    expect(ofKind('Deployment').filter((deployment) => !appOf(deployment)).map((deployment) => deployment.metadata.name)).toEqual(['pgbouncer']);
  });

  it.each(APPS)('sets for %s every variable its configuration reads, and no other', (app) => {
    const schema = APP_CONFIG_SCHEMAS[app];
    expect([...environment(mainContainer(deploymentOf(app))).keys()].sort()).toEqual(Object.keys(schema.properties).sort());
  });

  it.each(APPS)('takes the credentials and addresses of %s from the Secret, never from the manifests', (app) => {
    const settings = environment(mainContainer(deploymentOf(app)));
    for (const name of productionVariables(APP_CONFIG_SCHEMAS[app]).filter((variable) => variable !== 'NODE_ENV')) {
      expect({ name, ...settings.get(name) }).toEqual({ name, secretKey: name });
    }
    expect(settings.get('NODE_ENV')).toEqual({ value: 'production' });
  });

  it('lists every key of the Secrets it reads in secret.env.example, and no other', () => {
    const example = readFileSync(join(KUBERNETES, 'secret.env.example'), 'utf8');
    const listed = [...example.matchAll(/^([A-Z][A-Z0-9_]*)=/gm)].map((match) => `operator-api/${match[1]}`);
    expect([...secretKeys()].sort()).toEqual(listed.sort());
  });

  it.each(APPS)('probes %s on the port and paths it serves', (app) => {
    const container = mainContainer(deploymentOf(app));
    const served = Number(app === 'gateway' ? settingOf(app, 'PORT') : settingOf(app, 'METRICS_PORT'));
    expect(served).toBeGreaterThan(0);
    for (const [probe, path] of [
      ['livenessProbe', '/health/live'],
      ['readinessProbe', '/health/ready'],
    ]) {
      expect(container[probe]?.httpGet?.path).toBe(path);
      expect(portNumber(container, container[probe].httpGet.port)).toBe(served);
    }
  });

  it.each(APPS)('gives %s a grace period that covers its shutdown and its claims', (app) => {
    const deployment = deploymentOf(app);
    const graceMs = podSpec(deployment as Manifest)!.terminationGracePeriodSeconds as number * 1000;
    const schema = APP_CONFIG_SCHEMAS[app].properties as Record<string, TSchema>;
    const valueOf = (name: string) => Number(settingOf(app, name) ?? schema[name].default);
    const preStop: string[] = mainContainer(deployment).lifecycle?.preStop?.exec?.command ?? [];
    const preStopMs = preStop[0] === 'sleep' ? Number(preStop[1]) * 1000 : 0;
    expect(graceMs).toBeGreaterThan(valueOf('SHUTDOWN_TIMEOUT_MS') + preStopMs);
    if ('PUSH_CLAIM_LEASE_MS' in schema) expect(graceMs).toBeGreaterThan(valueOf('PUSH_CLAIM_LEASE_MS'));
  });

  it('drains the gateway from the load balancer before it closes', () => {
    expect(mainContainer(deploymentOf('gateway')).lifecycle.preStop.exec.command).toEqual(['sleep', expect.stringMatching(/^\d+$/)]);
  });

  it.each([...deployments, ...ofKind('Job')].map((workload) => [workload.metadata.name, workload]))(
    'runs %s as a non-root user on a read-only filesystem, with resources bounded',
    (_name, workload) => {
      const pod = podSpec(workload as Manifest)! as Json;
      expect(pod.securityContext).toEqual({ runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } });
      for (const container of podContainers(pod) as Json[]) {
        expect(container.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
        expect(Object.keys(container.resources.requests).sort()).toEqual(['cpu', 'memory']);
        expect(Object.keys(container.resources.limits).sort()).toEqual(['cpu', 'memory']);
        expect(container.image).toMatch(/^registry\.example\.com\/crm-operator-api:0\.1\.0@sha256:[0-9a-f]{64}$/);
      }
      const tmp = pod.volumes.find((volume: Json) => volume.emptyDir)?.name;
      expect(pod.containers[0].volumeMounts).toContainEqual({ name: tmp, mountPath: '/tmp' });
    },
  );

  it.each(APPS)('finds every file %s is configured with in a mounted Secret', (app) => {
    const container = mainContainer(deploymentOf(app));
    const volumes: Json[] = podSpec(deploymentOf(app) as Manifest)!.volumes as Json[];
    const files = [...environment(container)].filter(([name, { value }]) => name.endsWith('_FILE') && value);
    for (const [name, { value }] of files) {
      const mount = (container.volumeMounts as Json[]).find((candidate) => value!.startsWith(`${candidate.mountPath}/`));
      expect({ name, secret: volumes.find((volume) => volume.name === mount?.name)?.secret?.secretName }).toEqual({ name, secret: 'operator-api-push-credentials' });
    }
    // FCM's service account and APNs' .p8 key are files; the others' credentials are values.
    if (app === 'push-worker-fcm' || app === 'push-worker-apns') expect(files.length).toBeGreaterThan(0);
  });

  it('migrates the database in a Job, and starts no app before the migrations are applied, both over the direct connection', () => {
    const direct = new Map([['MIGRATE_DATABASE_URL', { secretKey: 'MIGRATE_DATABASE_URL' }]]);
    const [job] = ofKind('Job');
    const containers = podSpec(job as Manifest)!.containers as Json[];
    expect(containers).toEqual([expect.objectContaining({ command: ['node', 'tools/db-migrate.mjs'] })]);
    expect(environment(containers[0])).toEqual(direct);
    for (const deployment of deployments) {
      const [wait] = podSpec(deployment as Manifest)!.initContainers as Json[];
      expect(wait.command).toEqual(['node', 'tools/db-migrate.mjs', '--wait']);
      expect(environment(wait)).toEqual(direct);
    }
  });

  it('runs PgBouncer in transaction mode in front of the direct connection, as a non-root user on a read-only filesystem', () => {
    const pod = podSpec(pgbouncer as Manifest)! as Json;
    const [container] = pod.containers as Json[];
    const env = environment(container);
    expect(env.get('DATABASE_URL')).toEqual({ secretKey: 'MIGRATE_DATABASE_URL' });
    expect(env.get('POOL_MODE')).toEqual({ value: 'transaction' });
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(container.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    expect(Object.keys(container.resources.limits).sort()).toEqual(['cpu', 'memory']);
    expect(pgbouncer.spec.replicas).toBeGreaterThanOrEqual(2);
    const service = named('Service', 'pgbouncer')!;
    expect(service.spec.ports.map((port: Json) => portNumber(container, port.targetPort))).toEqual([5432]);
    expect(ofKind('PodDisruptionBudget').filter((pdb) => pdb.spec.selector.matchLabels['app.kubernetes.io/name'] === 'pgbouncer')).toHaveLength(1);
  });

  it('sizes the pools so they add up: every app connection fits one PgBouncer, and every server connection fits PostgreSQL', () => {
    const pgbouncerEnv = environment((podSpec(pgbouncer as Manifest)!.containers as Json[])[0]);
    const maxPods = (deployment: Json) => {
      const name = deployment.metadata.name;
      const hpa = ofKind('HorizontalPodAutoscaler').find((candidate) => candidate.spec.scaleTargetRef.name === name);
      const scaled = ofKind('ScaledObject').find((candidate) => candidate.spec.scaleTargetRef.name === name);
      return (hpa?.spec.maxReplicas ?? scaled?.spec.maxReplicaCount) as number;
    };
    const clients = deployments.reduce((sum, deployment) => sum + maxPods(deployment) * Number(settingOf(appOf(deployment)!, 'DATABASE_POOL_SIZE')), 0);
    expect(clients).toBe(1040);
    // The Service may send every client to one PgBouncer (the others restarting, say).
    expect(clients).toBeLessThanOrEqual(Number(pgbouncerEnv.get('MAX_CLIENT_CONN')!.value));
    // PostgreSQL's default max_connections (100) less its superuser_reserved_connections (3), for
    // the PgBouncers' server pools and the direct connections: the migration, and a KEDA scaler
    // per postgresql trigger.
    const servers = pgbouncer.spec.replicas * Number(pgbouncerEnv.get('DEFAULT_POOL_SIZE')!.value);
    const direct = 1 + ofKind('ScaledObject').filter((scaled) => scaled.spec.triggers[0].type === 'postgresql').length;
    expect(servers + direct).toBeLessThanOrEqual(100 - 3);
  });

  it('scales each Deployment by one autoscaler, which owns its replicas', () => {
    const targets = [
      ...ofKind('HorizontalPodAutoscaler').map((hpa) => hpa.spec.scaleTargetRef.name),
      ...ofKind('ScaledObject').map((scaled) => scaled.spec.scaleTargetRef.name),
    ];
    expect(targets.sort()).toEqual(deployments.map((deployment) => deployment.metadata.name).sort());
    for (const deployment of deployments) expect(deployment.spec.replicas).toBeUndefined();
    expect(named('HorizontalPodAutoscaler', deploymentOf('gateway').metadata.name)).toBeDefined();
    // Every app but the gateway does periodic work (reconciling, expiring, purging) besides its backlog.
    for (const scaled of ofKind('ScaledObject')) expect(scaled.spec.minReplicaCount).toBeGreaterThanOrEqual(1);
  });

  it.each(Object.entries(PUSH_QUEUES) as [ProviderName, PushQueueName][])('scales the %s worker on its own queue waiting list', (provider, queue) => {
    const app = `push-worker-${provider}`;
    const scaled = ofKind('ScaledObject').find((candidate) => candidate.spec.scaleTargetRef.name === deploymentOf(app).metadata.name)!;
    const [trigger] = scaled.spec.triggers;
    expect(trigger.type).toBe('redis');
    expect(trigger.metadata.listName).toBe(queueKey(settingOf(app, 'QUEUE_PREFIX')!, queue, 'wait'));
    expect(named('TriggerAuthentication', trigger.authenticationRef.name)).toBeDefined();
  });

  it.each(['bonus', 'webhook-dispatcher'])('scales %s on its backlog, read over the direct connection (KEDA prepares statements, which PgBouncer does not keep)', (app) => {
    const scaled = ofKind('ScaledObject').find((candidate) => candidate.spec.scaleTargetRef.name === deploymentOf(app).metadata.name)!;
    const [trigger] = scaled.spec.triggers;
    expect(trigger.type).toBe('postgresql');
    expect(trigger.metadata.connectionFromEnv).toBeUndefined();
    expect(named('TriggerAuthentication', trigger.authenticationRef.name)!.spec.secretTargetRef).toEqual([{ parameter: 'connection', name: 'operator-api', key: 'MIGRATE_DATABASE_URL' }]);
    // Every count it makes is bounded, so a huge backlog costs no more than that many index entries.
    const { query } = trigger.metadata as { query: string };
    const counts = query.split('count(*) FROM (SELECT 1 FROM ').slice(1);
    expect(query).toMatch(/^SELECT /);
    expect(counts.length).toBeGreaterThan(0);
    expect(query.split('count(').length - 1).toBe(counts.length);
    for (const count of counts) expect(count).toMatch(/^\w+ .+? LIMIT \d+\) AS \w+\)?( \+ | AS \w+$|$)/);
  });

  it.each(APPS)('guards %s with a PodDisruptionBudget and exposes its port through a Service', (app) => {
    const deployment = deploymentOf(app);
    const podLabels = deployment.spec.template.metadata.labels;
    const selects = (selector: Record<string, string>) => Object.entries(selector).every(([key, value]) => podLabels[key] === value);
    expect(ofKind('PodDisruptionBudget').filter((pdb) => selects(pdb.spec.selector.matchLabels))).toHaveLength(1);
    const services = ofKind('Service').filter((candidate) => selects(candidate.spec.selector));
    const container = mainContainer(deployment);
    const exposed = services.flatMap((service) => service.spec.ports.map((port: Json) => portNumber(container, port.targetPort)));
    expect(exposed).toContain(portNumber(container, container.readinessProbe.httpGet.port));
  });

  it.each(APPS)('has Prometheus scrape /metrics from %s once, on its METRICS_PORT', (app) => {
    const [monitor] = ofKind('ServiceMonitor');
    expect(monitor.apiVersion).toBe('monitoring.coreos.com/v1');
    const deployment = deploymentOf(app);
    const container = mainContainer(deployment);
    const monitored = ofKind('Service').filter(
      (service) =>
        Object.entries(monitor.spec.selector.matchLabels).every(([key, value]) => service.metadata.labels[key] === value) &&
        Object.entries(service.spec.selector).every(([key, value]) => deployment.spec.template.metadata.labels[key] === value),
    );
    const scraped = monitored.flatMap((service) =>
      monitor.spec.endpoints.flatMap((endpoint: Json) =>
        service.spec.ports.filter((port: Json) => port.name === endpoint.port).map((port: Json) => ({ path: endpoint.path, port: portNumber(container, port.targetPort) })),
      ),
    );
    expect(scraped).toEqual([{ path: '/metrics', port: Number(settingOf(app, 'METRICS_PORT')) }]);
    // The samples' job is the app's name, whichever Service they come through.
    const scrapedServices = monitored.filter((service) => service.spec.ports.some((port: Json) => monitor.spec.endpoints.some((endpoint: Json) => endpoint.port === port.name)));
    expect(scrapedServices.map((service) => service.metadata.labels[monitor.spec.jobLabel])).toEqual([deployment.metadata.name]);
  });

  it("keeps the gateway's operations port off its public Service, and the dashboard off", () => {
    const service = named('Service', 'gateway')!;
    const container = mainContainer(deploymentOf('gateway'));
    expect(service.spec.ports.map((port: Json) => portNumber(container, port.targetPort))).toEqual([Number(settingOf('gateway', 'PORT'))]);
    expect(Number(settingOf('gateway', 'METRICS_PORT'))).not.toBe(Number(settingOf('gateway', 'PORT')));
    expect(settingOf('gateway', 'ADMIN_UI')).toBe('false');
  });
});

describe('what the production overlay locks down', () => {
  const workloads = [...ofKind('Deployment'), ...ofKind('Job')];
  const policies = ofKind('NetworkPolicy');
  const podOf = (workload: Json) => ({ namespace: NAMESPACE, labels: workload.spec.template.metadata.labels as Record<string, string> });
  const outside: Peer = {};
  const allows = (direction: 'Ingress' | 'Egress', workload: Json, peer: Peer, port: number, protocol: 'TCP' | 'UDP' = 'TCP') =>
    networkAllows(policies, { direction, pod: podOf(workload), peer, port, protocol });
  const gatewayPort = () => Number(settingOf('gateway', 'PORT'));
  const containerPorts = (workload: Json): number[] => podContainers(podSpec(workload as Manifest)!).flatMap((container) => ((container.ports as Json[]) ?? []).map((port) => port.containerPort));
  const prometheus: Peer = { namespace: 'monitoring', labels: { 'app.kubernetes.io/name': 'prometheus' } };

  it.each(workloads.map((workload) => [workload.metadata.name, workload]))('runs %s under the restricted Pod Security Standard, without a service account token', (_name, workload) => {
    const pod = podSpec(workload as Manifest)! as Json;
    expect(restrictedProblems(pod)).toEqual([]);
    expect(pod.automountServiceAccountToken).toBe(false);
  });

  it('has the namespace, which the operator creates (docs/operating.md), enforce the restricted standard', () => {
    const readme = readFileSync(join(__dirname, '../docs/operating.md'), 'utf8');
    expect(readme).toContain(`kubectl label namespace ${NAMESPACE} pod-security.kubernetes.io/enforce=restricted`);
  });

  it('holds pods to the restricted standard as the admission controller does', () => {
    const pod = () => structuredClone(podSpec(deploymentOf('gateway') as Manifest)!) as Json;
    const changed = (change: (pod: Json) => void) => {
      const candidate = pod();
      change(candidate);
      return restrictedProblems(candidate);
    };
    expect(changed(() => undefined)).toEqual([]);
    expect(changed((candidate) => delete candidate.securityContext.runAsNonRoot)).toEqual(['container wait-for-migrations does not run as non-root', 'container gateway does not run as non-root']);
    expect(changed((candidate) => delete candidate.containers[0].securityContext.allowPrivilegeEscalation)).toEqual(['container gateway does not set allowPrivilegeEscalation: false']);
    expect(changed((candidate) => (candidate.containers[0].securityContext.capabilities = { drop: ['ALL'], add: ['NET_ADMIN'] }))).toEqual(['container gateway adds NET_ADMIN']);
    expect(changed((candidate) => (candidate.securityContext.seccompProfile = { type: 'Unconfined' }))).toHaveLength(2);
    expect(changed((candidate) => candidate.volumes.push({ name: 'host', hostPath: { path: '/' } }))).toEqual(['volume host is a hostPath']);
    expect(changed((candidate) => (candidate.hostNetwork = true))).toEqual(['hostNetwork is set']);
  });

  it("pulls every image through the overlay's images, the apps' by digest", () => {
    const { images } = parse(readFileSync(join(OVERLAY, 'kustomization.yaml'), 'utf8')) as { images: Json[] };
    const listed = new Map(images.map((image) => [image.newName ?? image.name, image]));
    for (const workload of workloads) {
      for (const container of podContainers(podSpec(workload as Manifest)!)) {
        const repository = (container.image as string).replace(/@.*$/, '').replace(/:[^:/]+$/, '');
        expect({ image: container.image, listed: listed.has(repository) }).toEqual({ image: container.image, listed: true });
      }
    }
    for (const deployment of deployments) expect(mainContainer(deployment).image).toMatch(/@sha256:[0-9a-f]{64}$/);
  });

  it('denies every pod of the namespace all traffic, in and out, but what the other NetworkPolicies allow', () => {
    const denyAll = policies.filter((policy) => Object.keys(policy.spec.podSelector).length === 0 && !policy.spec.ingress && !policy.spec.egress);
    expect(denyAll.map((policy) => policy.spec.policyTypes)).toEqual([['Ingress', 'Egress']]);
  });

  it('lets in from outside the namespace only what goes to the gateway, on its port', () => {
    const strangers: Peer[] = [outside, { namespace: 'default', labels: { app: 'anything' } }];
    for (const peer of strangers) {
      expect(allows('Ingress', deploymentOf('gateway'), peer, gatewayPort())).toBe(true);
      for (const workload of workloads) {
        for (const port of containerPorts(workload).filter((candidate) => workload !== deploymentOf('gateway') || candidate !== gatewayPort())) {
          expect({ workload: workload.metadata.name, port, allowed: allows('Ingress', workload, peer, port) }).toEqual({ workload: workload.metadata.name, port, allowed: false });
        }
      }
    }
  });

  it.each(APPS.filter((app) => app !== 'gateway'))("lets Prometheus, from the monitoring namespace, scrape %s's METRICS_PORT, and no one else", (app) => {
    const port = Number(settingOf(app, 'METRICS_PORT'));
    expect(allows('Ingress', deploymentOf(app), prometheus, port)).toBe(true);
    expect(allows('Ingress', deploymentOf(app), { ...prometheus, namespace: 'default' }, port)).toBe(false);
    expect(allows('Ingress', deploymentOf(app), { namespace: 'monitoring', labels: { 'app.kubernetes.io/name': 'grafana' } }, port)).toBe(false);
    expect(allows('Ingress', deploymentOf(app), podOf(deploymentOf('gateway')), port)).toBe(false);
  });

  it('lets the apps, and them only, connect to PgBouncer', () => {
    const port = (podSpec(pgbouncer as Manifest)!.containers as Json[])[0].ports[0].containerPort;
    for (const deployment of deployments) {
      expect(allows('Egress', deployment, podOf(pgbouncer), port)).toBe(true);
      expect(allows('Ingress', pgbouncer, podOf(deployment), port)).toBe(true);
    }
    expect(allows('Ingress', pgbouncer, outside, port)).toBe(false);
    expect(allows('Ingress', pgbouncer, { namespace: 'default', labels: podOf(deploymentOf('gateway')).labels }, port)).toBe(false);
  });

  const STORES_AND_HTTPS = [5432, 6432, 6379, 26379, 5671, 5672, 443];
  const CLOSED = [22, 25, 80, 3128, 8080, 9464, 3000, 2197];

  it.each(APPS)("lets %s reach DNS, PostgreSQL, PgBouncer, Redis, Sentinel, RabbitMQ and HTTPS, and nothing else", (app) => {
    const deployment = deploymentOf(app);
    expect(allows('Egress', deployment, outside, 53, 'UDP')).toBe(true);
    expect(allows('Egress', deployment, outside, 53, 'TCP')).toBe(true);
    expect(STORES_AND_HTTPS.filter((port) => !allows('Egress', deployment, outside, port))).toEqual([]);
    expect(CLOSED.filter((port) => allows('Egress', deployment, outside, port))).toEqual([]);
    expect(allows('Egress', deployment, outside, 443, 'UDP')).toBe(false);
  });

  it('lets PgBouncer reach DNS and PostgreSQL only', () => {
    expect(allows('Egress', pgbouncer, outside, 53, 'UDP')).toBe(true);
    expect(allows('Egress', pgbouncer, outside, 5432)).toBe(true);
    expect([...STORES_AND_HTTPS.filter((port) => port !== 5432 && port !== 6432), ...CLOSED].filter((port) => allows('Egress', pgbouncer, outside, port))).toEqual([]);
  });
});

describe('the Grafana dashboard', () => {
  const configMap = named('ConfigMap', 'operator-api-dashboard')!;
  const dashboard = JSON.parse(configMap.data['operator-api.json']);
  const queries: string[] = [
    ...dashboard.panels.flatMap((panel: Json) => (panel.targets ?? []).map((target: Json) => target.expr)),
    ...dashboard.templating.list.map((variable: Json) => variable.query?.query).filter(Boolean),
  ];

  it('is a ConfigMap that Grafana loads', () => {
    expect(configMap.metadata.labels.grafana_dashboard).toBe('1');
    expect(dashboard.panels.filter((panel: Json) => panel.type !== 'row').every((panel: Json) => panel.targets.length > 0)).toBe(true);
  });

  it('queries only the metrics the apps export', async () => {
    const exported = new Set(await exportedMetrics());
    expect(exported).toContain('operator_dead_letters');
    expect(queries.flatMap(metricNames).filter((name) => !exported.has(name))).toEqual([]);
  });

  it('shows every metric family of the public interface, CPU and event-loop lag', () => {
    const used = new Set(queries.flatMap(metricNames).map((name) => name.replace(/_(bucket|count|sum)$/, '')));
    expect([...PUBLIC_FAMILIES, 'process_cpu_seconds_total'].filter((name) => !used.has(name))).toEqual([]);
    expect([...used].some((name) => name.startsWith('nodejs_eventloop_lag'))).toBe(true);
  });
});

/** The metric names of a PromQL expression: identifiers that are neither functions, keywords nor labels. */
function metricNames(expression: string): string[] {
  const bare = expression
    .replace(/label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*\w+\s*\)/g, '$1')
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '');
  const keywords = new Set(['by', 'without', 'on', 'ignoring', 'bool', 'offset', 'and', 'or', 'unless']);
  return [...bare.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(\s*\()?/g)]
    .filter(([, name, call]) => !call && !keywords.has(name) && !/^\d/.test(name))
    .map(([, name]) => name);
}
