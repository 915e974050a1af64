import type { TObject, TSchema } from '@sinclair/typebox';
import { DEV_INTERNAL_KEY, DEV_OAUTH_SIGNING_KEY, DEV_OPERATOR_KEY, DEV_TRACKING_SECRET, DEV_WEBHOOK_SECRET } from '@operator/config';
import { metricsText } from '@operator/metrics';

export { PUBLIC_FAMILIES } from '@operator/metrics';

type Json = Record<string, any>;

// What the deployment checks hold the manifests and docker-compose.yml to, beyond the schemas.

/** Every series name the apps export (their metric catalog, prom-client's defaults included). */
export async function exportedMetrics(): Promise<string[]> {
  const types = [...(await metricsText()).matchAll(/^# TYPE (\S+) (\S+)$/gm)];
  return types.flatMap(([, name, type]) => (type === 'histogram' ? [`${name}_bucket`, `${name}_count`, `${name}_sum`] : [name]));
}

const DEVELOPMENT_SECRETS = [DEV_OPERATOR_KEY, DEV_INTERNAL_KEY, DEV_TRACKING_SECRET, DEV_WEBHOOK_SECRET, DEV_OAUTH_SIGNING_KEY];

/**
 * The variables an app cannot run in production without: NODE_ENV, those whose default is a
 * development secret (refused in production) and those whose default is a local address.
 */
export function productionVariables(schema: TObject): string[] {
  return Object.entries(schema.properties as Record<string, TSchema>)
    .filter(([name, field]) => name === 'NODE_ENV' || DEVELOPMENT_SECRETS.includes(field.default) || /127\.0\.0\.1|localhost/.test(String(field.default)))
    .map(([name]) => name);
}

/**
 * docker compose's interpolation of a value with the variables of an .env: `$$` is a `$`, `${X}` and
 * `$X` the value (empty when unset), `${X:-default}` the default when X is unset or empty (`-`: when
 * unset), `${X:+other}` the other when X is set and not empty (`+`: when set), and `${X:?message}`
 * fails with the message when X is unset or empty (`?`: when unset), as Compose refuses to start.
 */
export function interpolate(text: string, env: Record<string, string | undefined>): string {
  return text.replace(/\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-+?])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g, (_whole, dollar, braced, operator, argument, bare) => {
    if (dollar) return '$';
    const name = braced ?? bare;
    const value = env[name];
    const set = operator?.startsWith(':') ? Boolean(value) : value !== undefined;
    switch (operator?.replace(':', '')) {
      case '-':
        return set ? value! : argument;
      case '+':
        return set ? argument : '';
      case '?':
        if (!set) throw new Error(`required variable ${name} is missing a value: ${argument}`);
        return value!;
      default:
        return value ?? '';
    }
  });
}

/** A parsed Compose file with every string in it interpolated, as Compose does after reading the YAML. */
export function interpolateAll<T>(tree: T, env: Record<string, string | undefined>): T {
  if (typeof tree === 'string') return interpolate(tree, env) as T;
  if (Array.isArray(tree)) return tree.map((item) => interpolateAll(item, env)) as T;
  if (tree && typeof tree === 'object') return Object.fromEntries(Object.entries(tree).map(([key, value]) => [key, interpolateAll(value, env)])) as T;
  return tree;
}

/** The volume types the restricted Pod Security Standard allows. */
const RESTRICTED_VOLUMES = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret'];

/**
 * What keeps a pod from the restricted Pod Security Standard (the baseline's controls with it), as
 * the admission controller of a namespace labelled pod-security.kubernetes.io/enforce=restricted
 * would refuse it; empty when it meets it.
 */
export function restrictedProblems(pod: Json): string[] {
  const problems: string[] = [];
  for (const host of ['hostNetwork', 'hostPID', 'hostIPC']) if (pod[host]) problems.push(`${host} is set`);
  for (const volume of pod.volumes ?? []) {
    const type = Object.keys(volume).find((key) => key !== 'name');
    if (!RESTRICTED_VOLUMES.includes(type!)) problems.push(`volume ${volume.name} is a ${type}`);
  }
  const podContext = pod.securityContext ?? {};
  const containers: Json[] = [...(pod.initContainers ?? []), ...(pod.containers ?? []), ...(pod.ephemeralContainers ?? [])];
  for (const container of containers) {
    const context = container.securityContext ?? {};
    const where = `container ${container.name}`;
    if (context.privileged) problems.push(`${where} is privileged`);
    if (context.allowPrivilegeEscalation !== false) problems.push(`${where} does not set allowPrivilegeEscalation: false`);
    if ((context.runAsNonRoot ?? podContext.runAsNonRoot) !== true) problems.push(`${where} does not run as non-root`);
    if ((context.runAsUser ?? podContext.runAsUser) === 0) problems.push(`${where} runs as user 0`);
    const seccomp = (context.seccompProfile ?? podContext.seccompProfile)?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') problems.push(`${where} has no RuntimeDefault or Localhost seccomp profile`);
    if (!(context.capabilities?.drop ?? []).includes('ALL')) problems.push(`${where} does not drop ALL capabilities`);
    const added = (context.capabilities?.add ?? []).filter((capability: string) => capability !== 'NET_BIND_SERVICE');
    if (added.length) problems.push(`${where} adds ${added.join(', ')}`);
    if ((container.ports ?? []).some((port: Json) => port.hostPort)) problems.push(`${where} has a hostPort`);
  }
  return problems;
}

/** A pod (its namespace and labels) or, without them, a peer outside the cluster. */
export interface Peer {
  namespace?: string;
  labels?: Record<string, string>;
}

/** A connection between `pod` and `peer` on `port`, `direction` as seen from the pod. */
export interface Connection {
  direction: 'Ingress' | 'Egress';
  pod: Required<Peer>;
  peer: Peer;
  port: number;
  protocol?: 'TCP' | 'UDP';
}

function selects(selector: Json | undefined, labels: Record<string, string> | undefined): boolean {
  if (!selector) return true;
  if (!labels) return false;
  const matched = Object.entries(selector.matchLabels ?? {}).every(([key, value]) => labels[key] === value);
  return (
    matched &&
    (selector.matchExpressions ?? []).every(({ key, operator, values }: Json) => {
      if (operator === 'In') return values.includes(labels[key]);
      if (operator === 'NotIn') return !values.includes(labels[key]);
      if (operator === 'Exists') return key in labels;
      if (operator === 'DoesNotExist') return !(key in labels);
      throw new Error(`selector operator ${operator}`);
    })
  );
}

/** Whether one `from` or `to` entry of a rule names the peer. */
function peerMatches(entry: Json, connection: Connection): boolean {
  const { peer, pod } = connection;
  if (entry.ipBlock) {
    // Only "every address" is read: a peer here has no address to compare with a narrower block.
    if (!['0.0.0.0/0', '::/0'].includes(entry.ipBlock.cidr) || entry.ipBlock.except?.length) throw new Error(`${JSON.stringify(entry)}: only an ipBlock of every address is read here`);
    return !peer.labels;
  }
  if (!peer.labels) return false;
  // Kubernetes labels every namespace with its name.
  const namespace = entry.namespaceSelector ? selects(entry.namespaceSelector, { 'kubernetes.io/metadata.name': peer.namespace! }) : peer.namespace === pod.namespace;
  return namespace && selects(entry.podSelector, peer.labels);
}

/** A policy's directions: as written, else Ingress, and Egress when it has egress rules. */
const policyTypes = (policy: Json): string[] => policy.spec.policyTypes ?? ['Ingress', ...(policy.spec.egress ? ['Egress'] : [])];

/**
 * Whether NetworkPolicies let a connection through, as Kubernetes defines them: a pod that no policy
 * of a direction selects is open in that direction; else a rule of one of those policies must allow
 * the peer and the port. Named ports, port ranges and narrower ipBlocks are not read (the manifests
 * use none): they throw, rather than be judged wrongly.
 */
export function networkAllows(policies: Json[], connection: Connection): boolean {
  const { direction, pod, port, protocol = 'TCP' } = connection;
  const selecting = policies.filter(
    (policy) => policy.metadata.namespace === pod.namespace && selects(policy.spec.podSelector, pod.labels) && policyTypes(policy).includes(direction),
  );
  if (!selecting.length) return true;
  const rules: Json[] = selecting.flatMap((policy) => policy.spec[direction === 'Ingress' ? 'ingress' : 'egress'] ?? []);
  return rules.some((rule) => {
    const peers: Json[] | undefined = rule[direction === 'Ingress' ? 'from' : 'to'];
    const ports: Json[] | undefined = rule.ports;
    const peerAllowed = !peers?.length || peers.some((entry) => peerMatches(entry, connection));
    for (const entry of ports ?? []) if (typeof entry.port === 'string' || entry.endPort) throw new Error(`${JSON.stringify(entry)}: named ports and ranges are not read here`);
    const portAllowed = !ports?.length || ports.some((entry) => (entry.protocol ?? 'TCP') === protocol && (entry.port === undefined || entry.port === port));
    return peerAllowed && portAllowed;
  });
}
