import { billingEndpoints, ServiceError } from '@tamp/proto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { RouteDependencies } from '../../routes/dependencies';
import { signInLinkPage, signInPage } from '../pages/sign-in';
import { DASHBOARD_PATH, setSessionCookie } from '../session';

const HTML = 'text/html; charset=utf-8';

/** Signing in: an API key posted once, or a one-time link an operator minted. */
export const signInRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, { rpc }) => {
  app.get('/sign-in', async (_request, reply) => reply.type(HTML).send(signInPage()));

  app.post(
    '/sign-in',
    { schema: { body: z.object({ apiKey: z.string().max(256) }) } },
    async (request, reply) =>
      startSession(request, reply, () =>
        rpc.call(billingEndpoints.startSession, { method: 'api-key', apiKey: request.body.apiKey }),
      ),
  );

  // The token is in the query of a link; this route's requests are not logged with their URL.
  app.get(
    '/sign-in/link',
    { logLevel: 'warn', schema: { querystring: z.object({ token: z.string().max(256) }) } },
    async (request, reply) => reply.type(HTML).send(signInLinkPage(request.query.token)),
  );

  app.post(
    '/sign-in/link',
    { schema: { body: z.object({ token: z.string().max(256) }) } },
    async (request, reply) =>
      startSession(request, reply, () =>
        rpc.call(billingEndpoints.startSession, {
          method: 'sign-in-link',
          token: request.body.token,
        }),
      ),
  );
};

async function startSession(
  request: FastifyRequest,
  reply: FastifyReply,
  start: () => Promise<{ sessionToken: string; expiresAt: string }>,
) {
  try {
    const session = await start();
    setSessionCookie(request, reply, session.sessionToken, new Date(session.expiresAt));
    return reply.redirect(DASHBOARD_PATH, 303);
  } catch (error) {
    if (!(error instanceof ServiceError) || error.code !== 'UNAUTHORIZED') throw error;
    return reply.status(401).type(HTML).send(signInPage(error.message));
  }
}
