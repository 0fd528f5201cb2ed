import { billingEndpoints } from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { RouteDependencies } from '../../routes/dependencies';
import { clearSessionCookie, DASHBOARD_PATH, sessionTokenOf } from '../session';

/** Signing out of this browser, or of every browser signed in to the account. */
export const sessionRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, { rpc }) => {
  app.post('/sign-out', async (request, reply) => {
    await rpc.call(billingEndpoints.endSession, { sessionToken: sessionTokenOf(request)! });
    clearSessionCookie(request, reply);
    return reply.redirect(`${DASHBOARD_PATH}/sign-in`, 303);
  });

  app.post('/sessions/revoke', async (request, reply) => {
    await rpc.call(billingEndpoints.revokeSessions, {
      accountId: request.dashboardSession.accountId,
    });
    clearSessionCookie(request, reply);
    return reply.redirect(`${DASHBOARD_PATH}/sign-in`, 303);
  });
};
