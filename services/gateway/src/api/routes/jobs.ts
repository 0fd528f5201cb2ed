import { jobEndpoints, jobListQuery, jobReadQuery, publicJob, publicJobList } from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { RouteDependencies } from './dependencies';
import { abandonedSignal, ok, responds } from './responses';

export const jobRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, deps) => {
  app.get(
    '/jobs/:id',
    {
      schema: {
        operationId: 'getJob',
        summary: 'Read a job, optionally long-polling until it finishes',
        tags: ['jobs'],
        params: z.object({
          id: z
            .string()
            .describe('Job id from a creation call (job_…); any other id is JOB_NOT_FOUND'),
        }),
        querystring: jobReadQuery,
        response: responds(publicJob, 'The job, as it is now or when it finished'),
      },
    },
    async (request, reply) =>
      ok(
        await deps.jobReads.read(
          request.account.accountId,
          request.params.id,
          Math.round((request.query.wait ?? 0) * 1000),
          abandonedSignal(reply),
        ),
      ),
  );

  app.get(
    '/jobs',
    {
      schema: {
        operationId: 'listJobs',
        summary: "List the account's jobs, newest first",
        tags: ['jobs'],
        querystring: jobListQuery,
        response: responds(publicJobList, 'A page of jobs, newest first'),
      },
    },
    async (request) =>
      ok(
        await deps.rpc.call(jobEndpoints.listJobs, {
          accountId: request.account.accountId,
          ...request.query,
        }),
      ),
  );
};
