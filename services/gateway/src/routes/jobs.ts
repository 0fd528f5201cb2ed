import {
  JOB_STATUSES,
  JOB_TYPES,
  jobEndpoints,
  LIMITS,
  publicJob,
  publicJobList,
  successEnvelope,
  TERMINAL_STATUSES,
} from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { RouteDependencies } from './dependencies';
import { errorResponses } from './errors';

/**
 * A number in a query string. `z.coerce.number()` alone reads an empty `wait=` as 0; here it is
 * refused like any other text that is not a number.
 */
const queryNumber = <Schema extends z.ZodType>(schema: Schema) =>
  z.preprocess((value) => (value === '' ? Number.NaN : value), schema);

const jobQuery = z.strictObject({
  wait: queryNumber(
    z.coerce
      .number()
      .min(LIMITS.waitSeconds.min)
      .max(LIMITS.waitSeconds.max)
      .describe('Seconds to hold the response until the job is completed or failed (0–30)'),
  ).optional(),
});

const listQuery = z.strictObject({
  type: z.enum(JOB_TYPES).optional(),
  status: z.enum(JOB_STATUSES).optional(),
  limit: queryNumber(
    z.coerce.number().int().min(LIMITS.listLimit.min).max(LIMITS.listLimit.max),
  ).default(LIMITS.listLimit.default),
  cursor: z.string().min(1).max(1024).describe('nextCursor of the previous page').optional(),
});

export const jobRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, deps) => {
  app.get(
    '/jobs/:id',
    {
      schema: {
        summary: 'Read a job, optionally long-polling until it finishes',
        tags: ['jobs'],
        params: z.object({ id: z.string() }),
        querystring: jobQuery,
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
        summary: "List the account's jobs, newest first",
        tags: ['jobs'],
        querystring: listQuery,
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
