import { billingEndpoints, publicUsage, successEnvelope } from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { RouteDependencies } from './dependencies';
import { errorResponses } from './errors';

export const usageRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, deps) => {
  app.get(
    '/usage/current',
    {
      schema: {
        operationId: 'getCurrentUsage',
        summary: 'Usage totals per pipeline for the current billing period',
        tags: ['usage'],
        response: { 200: successEnvelope(publicUsage), ...errorResponses },
      },
    },
    async (request) => {
      const usage = await deps.rpc.call(billingEndpoints.getUsage, {
        accountId: request.account.accountId,
      });
      return { success: true as const, data: usage };
    },
  );
};
