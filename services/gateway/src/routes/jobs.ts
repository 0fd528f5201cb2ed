import {
  jobEndpoints,
  jobListQuery,
  jobReadQuery,
  publicJob,
  publicJobList,
  successEnvelope,
  TERMINAL_STATUSES,
} from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { RouteDependencies } from './dependencies';
import { errorResponses } from './errors';

export const jobRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, deps) => {
  app.get(
    '/jobs/:id',
    {
      schema: {
        operationId: 'getJob',
        summary: 'Read a job, optionally long-polling until it finishes',
        tags: ['jobs'],
        params: z.object({ id: z.string() }),
        querystring: jobReadQuery,
        response: { 200: successEnvelope(publicJob), ...errorResponses },
      },
    },
    async (request, reply) => {
      const { accountId } = request.account;
      const jobId = request.params.id;
      const read = () => deps.rpc.call(jobEndpoints.getJob, { accountId, jobId });
      const waitMs = Math.round((request.query.wait ?? 0) * 1000);
      if (waitMs === 0) return { success: true as const, data: await read() };

      // Register before the first read: a notification in between still wakes us.
      const waiter = deps.waiters.register(jobId);
      const onClose = () => waiter.cancel();
      reply.raw.once('close', onClose);
      try {
        const job = await read();
        if (TERMINAL_STATUSES.includes(job.status)) return { success: true as const, data: job };
        await waiter.until(waitMs);
        return { success: true as const, data: await read() };
      } finally {
        waiter.cancel();
        reply.raw.off('close', onClose);
      }
    },
  );

  app.get(
    '/jobs',
    {
      schema: {
        operationId: 'listJobs',
        summary: "List the account's jobs, newest first",
        tags: ['jobs'],
        querystring: jobListQuery,
        response: { 200: successEnvelope(publicJobList), ...errorResponses },
      },
    },
    async (request) => {
      const list = await deps.rpc.call(jobEndpoints.listJobs, {
        accountId: request.account.accountId,
        ...request.query,
      });
      return { success: true as const, data: list };
    },
  );
};
