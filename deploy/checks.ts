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
