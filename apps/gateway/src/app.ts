import Fastify, { type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify';
import { crmHeaderNames, MAX_USER_ID_LENGTH, OPEN_ROUTE_BODY_LIMIT_BYTES, typeboxValidatorCompiler } from '@operator/contract';
import { createBonusDeps } from '@operator/bonus';
import { namedBrands, REDACTED_PATHS } from '@operator/config';
import { brandLabeler } from '@operator/metrics';
import { primaryReads } from '@operator/db';
import { requireInternalKey } from './auth';
import { throttleAuthFailures } from './auth-throttle';
import { requireCrmAuth } from './crm-auth';
import { decorateBrands } from './brands';
import type { GatewayDeps } from './deps';
import { registerApiDocument } from './docs';
import { registerErrorHandling } from './errors';
import { registerJsonBodies } from './json-bodies';
import { loggedRequest } from './log-redaction';
import { operationsApart, operationsRoutes } from './operations';
import { bonusRoutes } from './routes/bonus';
import { bonusAdminRoutes } from './routes/bonus-admin';
import { complianceEventRoutes } from './routes/compliance-events';
import { deadLetterRoutes } from './routes/dead-letters';
import { deviceRoutes } from './routes/devices';
import { webPushRoutes } from './routes/web-push';
import { engagementRoutes } from './routes/engagement';
import { healthRoutes } from './routes/health';
import { observeRequests } from './routes/metrics';
import { oauthTokenRoutes } from './routes/oauth-token';
import { pushRoutes } from './routes/push';
import { statusRoutes } from './routes/status';
import { shedUnderPressure } from './shedding';
import { serverTimeouts } from './timeouts';
import { answerUnroutedEarly, closeOnUnreadBodies, INTERNAL_BODY_LIMIT_BYTES } from './unread-bodies';

export { REDACTED_PATHS };

function loggerOf(config: GatewayDeps['config'], logger: FastifyServerOptions['logger']): FastifyServerOptions['logger'] {
  return logger === false ? false : { level: config.LOG_LEVEL, redact: REDACTED_PATHS, serializers: { req: loggedRequest }, ...(logger === true ? {} : logger) };
}

/** Room for the longest user_id percent-encoded: 3 UTF-8 bytes a character, 3 characters a byte. */
const MAX_PARAM_LENGTH = MAX_USER_ID_LENGTH * 9;

/** Read only once the scope's credentials have passed. */
function bodyLimitOf(scope: FastifyInstance, bytes: number) {
  scope.addHook('onRoute', (route) => {
    route.bodyLimit ??= bytes;
  });
}

export function buildApp(deps: GatewayDeps, logger: FastifyServerOptions['logger'] = false) {
  const { config, db, redis, queues } = deps;
  const reads = deps.reads ?? primaryReads(db);
  const { http: httpTimeouts, ...timeouts } = serverTimeouts(config);
  const app = Fastify({
    logger: loggerOf(config, logger),
    // A few KiB unless a route takes more: the CRM's routes take BODY_LIMIT_BYTES, once authenticated.
    bodyLimit: OPEN_ROUTE_BODY_LIMIT_BYTES,
    trustProxy: config.edge.trustedProxies.length ? config.edge.trustedProxies : false,
    return503OnClosing: true,
    // Node would answer a request without Host itself, with an empty body; the hook below answers it.
    http: { requireHostHeader: false, ...httpTimeouts },
    ...timeouts,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // What the router refuses (a bad percent-encoding, a parameter too long) answers like the rest.
    frameworkErrors: (error, _request, reply: FastifyReply) => {
      const tooLong = error.code === 'FST_ERR_MAX_PARAM_LENGTH';
      const status = error.statusCode ?? 400;
      // Sent before any route's hooks: `code` is written here, not by the error hook.
      reply.code(status).send({ error: tooLong ? `a path parameter is longer than ${MAX_PARAM_LENGTH} characters` : error.message, code: status });
    },
  });
  app.addHook('onRequest', async (request, reply) => {
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      return reply.code(400).send({ error: 'Host header is required in HTTP/1.1' });
    }
  });
  app.setValidatorCompiler(typeboxValidatorCompiler);
  registerJsonBodies(app);
  registerErrorHandling(app);
  decorateBrands(app);
  observeRequests(app);
  throttleAuthFailures(app, config.edge.authFailures, config.edge.authThrottleExempt);
  // Nothing is read before it is authorised: no body of an unrouted request, no large body of a refused one.
  answerUnroutedEarly(app, MAX_PARAM_LENGTH);
  closeOnUnreadBodies(app);
  shedUnderPressure(app, { maxEventLoopDelayMs: config.MAX_EVENT_LOOP_DELAY_MS, maxHeapUsedBytes: config.MAX_HEAP_USED_BYTES });

  registerApiDocument(app);

  app.register(healthRoutes, { db, reads, redis, servers: false });

  app.register(async (crm) => {
    requireCrmAuth(crm, config.operatorApiKeys, config.crmAuth);
    bodyLimitOf(crm, config.BODY_LIMIT_BYTES);
    await crm.register(pushRoutes, {
      accept: {
        db,
        redis,
        queues,
        jobMaxMessages: config.PUSH_JOB_MAX_MESSAGES,
        dedupeDays: config.PUSH_DEDUPE_DAYS,
        sendPolicy: { attempts: config.PUSH_SEND_ATTEMPTS, backoffMs: config.PUSH_SEND_BACKOFF_MS },
        brandLabel: brandLabeler(namedBrands(config)),
      },
      headerNames: crmHeaderNames(config.CRM_HEADER_WORD),
      batchMaxMessages: config.BATCH_MAX_MESSAGES,
      singleGroup: { windowMs: config.PUSH_SINGLE_GROUP_WINDOW_MS, maxMessages: config.PUSH_SINGLE_GROUP_MAX },
    });
    await crm.register(statusRoutes, { reads });
    await crm.register(bonusRoutes, { db, reads, headerNames: crmHeaderNames(config.CRM_HEADER_WORD), defaultBrand: config.BONUS_DEFAULT_BRAND });
  });

  if (config.crmAuth.methods.includes('oauth2')) app.register(oauthTokenRoutes, { auth: config.crmAuth, allowGet: config.edge.oauthAllowGet });

  // The operator's back end: device keys register devices; admin keys open these and the rest.
  app.register(async (devices) => {
    requireInternalKey(devices, config.internalKeys, 'devices');
    bodyLimitOf(devices, INTERNAL_BODY_LIMIT_BYTES);
    await devices.register(deviceRoutes, { db, reads, webpushAllowedOrigins: config.webpushAllowedOrigins });
  });
  app.register(async (admin) => {
    requireInternalKey(admin, config.internalKeys, 'admin');
    bodyLimitOf(admin, INTERNAL_BODY_LIMIT_BYTES);
    await admin.register(deadLetterRoutes, { db, reads, maxAgeMs: config.webhookMaxAgeMs });
    await admin.register(bonusAdminRoutes, { db, reads, bonus: createBonusDeps(db, config, app.log) });
    await admin.register(complianceEventRoutes, { redis });
  });

  // Devices report with the push's tracking token, never an API key; browsers read the VAPID public key.
  app.register(engagementRoutes, { db, trackingSecret: config.TRACKING_SECRET, tokenTtlMs: config.edge.trackingTokenTtlMs });
  app.register(webPushRoutes, { keys: config.vapidPublicKeys });

  if (!operationsApart(config)) app.register(operationsRoutes, { ...deps, reads, api: app });

  return app;
}

/** The operations server of a production gateway; its answers stay out of the API's request histogram. */
export function buildOperationsApp(deps: GatewayDeps & { api: FastifyInstance }, logger: FastifyServerOptions['logger'] = false) {
  const app = Fastify({
    logger: loggerOf(deps.config, logger),
    return503OnClosing: true,
    // A scraper or browser that stops mid-request does not hold a socket for long.
    requestTimeout: 15000,
  });
  registerErrorHandling(app);
  const reads = deps.reads ?? primaryReads(deps.db);
  app.register(healthRoutes, { db: deps.db, reads, redis: deps.redis, servers: true });
  app.register(operationsRoutes, { ...deps, reads });
  return app;
}
