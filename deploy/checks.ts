import type { TObject, TSchema } from '@sinclair/typebox';
import { DEV_INTERNAL_KEY, DEV_OAUTH_SIGNING_KEY, DEV_OPERATOR_KEY, DEV_TRACKING_SECRET, DEV_WEBHOOK_SECRET } from '@operator/config';
import { metricsText } from '@operator/metrics';

export { PUBLIC_FAMILIES } from '@operator/metrics';

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
