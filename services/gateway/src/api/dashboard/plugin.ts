import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import { asServiceError } from '@tamp/kit';
import { billingEndpoints, ServiceError } from '@tamp/proto';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { RouteDependencies } from '../routes/dependencies';
import { readAsset } from './asset-files';
import { errorPage } from './pages/errors';
import { jobRoutes } from './routes/jobs';
import { keyRoutes } from './routes/keys';
import { sessionRoutes } from './routes/sessions';
import { signInRoutes } from './routes/sign-in';
import { tryRoutes } from './routes/try';
import { usageRoutes } from './routes/usage';
import { webhookRoutes } from './routes/webhooks';
import {
  checkFormToken,
  csrfTokenOf,
  DASHBOARD_PATH,
  type DashboardSession,
  RefusedChange,
  sessionTokenOf,
} from './session';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set on every request of the dashboard's signed-in pages. */
    dashboardSession: DashboardSession;
  }
}

/**
 * No script but the dashboard's own file, no inline script or style, no framing, forms only to
 * itself: whatever a customer named a job or a file, the page cannot run it.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

const ASSETS = {
  'dashboard.css': { type: 'text/css; charset=utf-8', body: readAsset('dashboard.css') },
  'dashboard.js': { type: 'text/javascript; charset=utf-8', body: readAsset('dashboard.js') },
  'favicon.svg': { type: 'image/svg+xml', body: readAsset('favicon.svg') },
} as const;

/**
 * The account dashboard: server-rendered pages under /dashboard on the public port, signed in
 * with a session cookie instead of an API key. Every page calls the same service endpoints the
 * API and the admin API call; no rule lives here twice (docs/decisions.md#the-account-dashboard).
 */
export const dashboardPlugin: FastifyPluginAsyncZod<RouteDependencies> = async (app, deps) => {
  // Pages, not API: kept out of the OpenAPI document.
  app.addHook('onRoute', (route) => {
    route.schema = { ...route.schema, hide: true };
  });
  await app.register(cookie);
  await app.register(formbody, { bodyLimit: 16 * 1024 });
  app.addHook('onSend', async (_request, reply) => {
    reply.header('content-security-policy', CONTENT_SECURITY_POLICY);
    reply.header('x-content-type-options', 'nosniff');
    // Not no-referrer: under it a browser sends `Origin: null` with the forms' POSTs, which the
    // origin check (session.ts) must refuse. Other sites still get no Referer.
    reply.header('referrer-policy', 'same-origin');
    reply.header('x-frame-options', 'DENY');
    // Pages show keys and secrets: never kept by a cache or the back button's snapshot. The
    // stylesheet, script and icon say otherwise themselves.
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
  });
  app.setErrorHandler(answerWithPage);
  app.setNotFoundHandler((_request, reply) =>
    reply.status(404).type('text/html; charset=utf-8').send(errorPage(404, 'No such page.')),
  );

  app.get('/assets/:name', async (request, reply) => {
    const asset = ASSETS[(request.params as { name: string }).name as keyof typeof ASSETS];
    if (asset === undefined) return reply.callNotFound();
    // Unversioned names: cached for an hour, so a deployment's new files arrive within one.
    return reply.type(asset.type).header('cache-control', 'public, max-age=3600').send(asset.body);
  });
  await app.register(signInRoutes, deps);
  await app.register(async (signedIn) => {
    signedIn.decorateRequest('dashboardSession', null as unknown as DashboardSession);
    signedIn.addHook('onRequest', (request) => resolveSession(request, deps));
    // Before validation: a route's body schema hands its handler only the fields it names.
    signedIn.addHook('preValidation', async (request) => refuseForgedChange(request));
    await signedIn.register(sessionRoutes, deps);
    await signedIn.register(usageRoutes, deps);
    await signedIn.register(keyRoutes, deps);
    await signedIn.register(webhookRoutes, deps);
    await signedIn.register(jobRoutes, deps);
    await signedIn.register(tryRoutes, deps);
  });
};

async function resolveSession(request: FastifyRequest, deps: RouteDependencies): Promise<void> {
  const token = sessionTokenOf(request);
  if (token === null) throw new ServiceError('UNAUTHORIZED', 'Sign in to continue');
  const session = await deps.rpc.call(billingEndpoints.authenticateSession, {
    sessionToken: token,
  });
  request.dashboardSession = {
    accountId: session.accountId,
    sessionId: session.sessionId,
    csrfToken: csrfTokenOf(token),
  };
}

/** Form posts are checked before validation; a multipart route checks its own, part by part. */
async function refuseForgedChange(request: FastifyRequest): Promise<void> {
  if (request.method !== 'POST') return;
  if ((request.routeOptions.config as { checksFormToken?: boolean }).checksFormToken) return;
  checkFormToken(request, (request.body as { _csrf?: unknown } | undefined)?._csrf);
}

function answerWithPage(caught: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  if (caught instanceof RefusedChange) {
    return reply.status(403).type('text/html; charset=utf-8').send(errorPage(403, caught.message));
  }
  const error = asServiceError(caught);
  if (error instanceof ServiceError && error.code === 'UNAUTHORIZED' && request.method === 'GET') {
    return reply.redirect(`${DASHBOARD_PATH}/sign-in`, 303);
  }
  if (caught.validation !== undefined) {
    return reply
      .status(400)
      .type('text/html; charset=utf-8')
      .send(errorPage(400, `The form was not filled in as expected (${caught.message}).`));
  }
  const status = error instanceof ServiceError ? error.httpStatus : 500;
  if (status >= 500) request.log.error({ err: caught }, 'dashboard page failed');
  const message =
    error instanceof ServiceError && status < 500
      ? error.message
      : 'Something went wrong on our side; try again shortly.';
  return reply.status(status).type('text/html; charset=utf-8').send(errorPage(status, message));
}
