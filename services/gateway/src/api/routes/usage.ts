import { billingEndpoints, publicUsage } from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { RouteDependencies } from './dependencies';
import { ok, responds } from './responses';

export const usageRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, deps) => {
  app.get(
    '/usage/current',
    {
      schema: {
        operationId: 'getCurrentUsage',
        summary: 'Usage totals per pipeline for the current billing period',
        tags: ['usage'],
        response: responds(publicUsage, 'Usage of the current billing period'),
      },
    },
    async (request) =>
      ok(await deps.rpc.call(billingEndpoints.getUsage, { accountId: request.account.accountId })),
  );
};
