import { type HttpMetrics, nameHttpServerSpan } from '@tamp/kit';
import Fastify from 'fastify';
import {
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import type { Authenticator } from '../adapters/authenticator';
import type { RateLimiter } from '../adapters/rate-limiter';
import { dashboardPlugin } from './dashboard/plugin';
import { DASHBOARD_PATH } from './dashboard/session';
import { type HttpLimits, httpServerOptions } from './http-server';
import { adminTokenPlugin } from './plugins/admin-token';
import { authPlugin } from './plugins/auth';
import { connectionLimitsPlugin } from './plugins/connection-limits';
import {
  answerClientError,
  envelopePlugin,
  frameworkError,
  requestIdFor,
  rewriteUndecodablePath,
} from './plugins/envelope';
import { httpMetricsPlugin } from './plugins/http-metrics';
import { openapiPlugin } from './plugins/openapi';
import { rateLimitPlugin } from './plugins/rate-limit';
import { adminRoutes } from './routes/admin';
import type { RouteDependencies } from './routes/dependencies';
import { jobCreationRoutes } from './routes/job-creation';
import { jobRoutes } from './routes/jobs';
import { pipelineCatalogueRoutes } from './routes/pipeline-catalogue';
import { uploadRoutes } from './routes/upload';
import { usageRoutes } from './routes/usage';

/** Every endpoint but POST /v1/text takes small JSON bodies. */
export const DEFAULT_BODY_LIMIT = 64 * 1024;

export interface GatewayOptions {
  logger: Logger;
  /** Requests by route (absent in tests that do not read them). */
  httpMetrics?: HttpMetrics;
  httpLimits: HttpLimits;
}

export interface PublicAppOptions extends GatewayOptions, RouteDependencies {
  authenticator: Authenticator;
  limiter: RateLimiter;
  /** The server the OpenAPI document names (PUBLIC_URL); undefined: its own origin. */
  publicUrl: string | undefined;
}

function baseApp(options: GatewayOptions, trustProxy: boolean) {
  const app = Fastify({
    ...httpServerOptions(options.httpLimits),
    loggerInstance: options.logger,
    // Fastify's two lines per request (arriving, answered) cost about a third of a job read's
    // CPU at the default level (docs/performance.md); the request metrics count every request
    // and errors are logged where they happen. LOG_LEVEL=debug brings the lines back.
    disableRequestLogging: () => !options.logger.isLevelEnabled('debug'),
    genReqId: requestIdFor,
    // Behind an ingress the client address comes from X-Forwarded-For.
    trustProxy,
    return503OnClosing: true,
    bodyLimit: DEFAULT_BODY_LIMIT,
    // Ids of any length reach their route and are reported unknown there; Node's 16 KB limit
    // on the request head still bounds them.
    routerOptions: { maxParamLength: 2_048 },
    rewriteUrl: rewriteUndecodablePath,
    frameworkErrors: frameworkError,
    clientErrorHandler: answerClientError,
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // The HTTP instrumentation's span for this request learns the route that matched.
  app.addHook('onRequest', async (request) => {
    nameHttpServerSpan(request.method, request.routeOptions.url);
  });
  return app;
}

/** The public API. Features register as encapsulated plugins under /v1. */
export async function buildPublicApp(options: PublicAppOptions) {
  const app = baseApp(options, true);
  if (options.httpMetrics) {
    await app.register(httpMetricsPlugin, { metrics: options.httpMetrics, api: 'public' });
  }
  await app.register(envelopePlugin);
  await app.register(connectionLimitsPlugin, options.httpLimits);
  await app.register(openapiPlugin, { publicUrl: options.publicUrl });
  await app.register(
    async (v1) => {
      await v1.register(authPlugin, { authenticator: options.authenticator });
      await v1.register(rateLimitPlugin, { limiter: options.limiter });
      await v1.register(uploadRoutes, options);
      await v1.register(pipelineCatalogueRoutes);
      await v1.register(jobCreationRoutes, options);
      await v1.register(jobRoutes, options);
      await v1.register(usageRoutes, options);
    },
    { prefix: '/v1' },
  );
  await app.register(async (dashboard) => dashboard.register(dashboardPlugin, options), {
    prefix: DASHBOARD_PATH,
  });
  return app;
}

export interface AdminAppOptions extends GatewayOptions {
  rpc: RouteDependencies['rpc'];
  webhookTargets: RouteDependencies['webhookTargets'];
  adminToken: string | undefined;
}

/** The admin API, on its own port, for operators and the admin CLI. */
export async function buildAdminApp(options: AdminAppOptions) {
  // Internal and used by a few operators: time limits, but no connection limits.
  const app = baseApp(options, false);
  if (options.httpMetrics) {
    await app.register(httpMetricsPlugin, { metrics: options.httpMetrics, api: 'admin' });
  }
  await app.register(envelopePlugin);
  await app.register(
    async (admin) => {
      await admin.register(adminTokenPlugin, { adminToken: options.adminToken });
      await admin.register(adminRoutes, {
        rpc: options.rpc,
        webhookTargets: options.webhookTargets,
      });
    },
    { prefix: '/admin' },
  );
  return app;
}
