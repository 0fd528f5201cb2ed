import { billingEndpoints } from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { RouteDependencies } from '../../routes/dependencies';
import { usagePage } from '../pages/usage';

/** The landing page: credits left and the period's usage. */
export const usageRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, { rpc }) => {
  app.get('/', async (request, reply) => {
    const { accountId, csrfToken } = request.dashboardSession;
    const [account, report] = await Promise.all([
      rpc.call(billingEndpoints.getAccount, { accountId }),
      rpc.call(billingEndpoints.getUsageReport, { accountId }),
    ]);
    return reply
      .type('text/html; charset=utf-8')
      .send(usagePage({ csrfToken, credits: account.credits, plan: account.plan, report }));
  });
};
