import { JOB_STATUSES, JOB_TYPES, jobEndpoints, LIMITS, webhookEndpoints } from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { RouteDependencies } from '../../routes/dependencies';
import { doneQuery, noticeOf } from '../notices';
import { jobListPage, jobPage } from '../pages/jobs';
import { DASHBOARD_PATH } from '../session';

const HTML = 'text/html; charset=utf-8';

/** An empty select means "any". */
const optionalChoice = <Values extends readonly [string, ...string[]]>(values: Values) =>
  z
    .union([z.literal(''), z.enum(values)])
    .optional()
    .transform((value) => (value === '' ? undefined : value));

const listQuery = z.object({
  type: optionalChoice(JOB_TYPES),
  status: optionalChoice(JOB_STATUSES),
  cursor: z.string().min(1).max(1024).optional(),
});

/** The account's jobs, one job with its result, and its webhook deliveries. */
export const jobRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, deps) => {
  const { rpc } = deps;

  app.get('/jobs', { schema: { querystring: listQuery } }, async (request, reply) => {
    const { accountId, csrfToken } = request.dashboardSession;
    const { type, status, cursor } = request.query;
    const list = await rpc.call(jobEndpoints.listJobs, {
      accountId,
      limit: LIMITS.listLimit.default,
      ...(type !== undefined && { type }),
      ...(status !== undefined && { status }),
      ...(cursor !== undefined && { cursor }),
    });
    return reply.type(HTML).send(
      jobListPage({
        csrfToken,
        items: list.items,
        nextCursor: list.nextCursor,
        filters: { type, status },
      }),
    );
  });

  const jobParams = z.object({ id: z.string().max(200) });
  const render = async (
    accountId: string,
    csrfToken: string,
    jobId: string,
    notice: string | null,
  ) => {
    // The job read is the account check: another account's job is JOB_NOT_FOUND here too.
    const job = await rpc.call(jobEndpoints.getJob, { accountId, jobId });
    const { deliveries } = await rpc.call(webhookEndpoints.listDeliveries, { jobId: job.id });
    return jobPage({ csrfToken, job, deliveries, notice });
  };

  app.get(
    '/jobs/:id',
    { schema: { params: jobParams, querystring: doneQuery } },
    async (request, reply) => {
      const { accountId, csrfToken } = request.dashboardSession;
      const notice = noticeOf(request.query.done);
      return reply.type(HTML).send(await render(accountId, csrfToken, request.params.id, notice));
    },
  );

  app.post('/jobs/:id/redeliver', { schema: { params: jobParams } }, async (request, reply) => {
    const { accountId } = request.dashboardSession;
    const job = await rpc.call(jobEndpoints.getJob, { accountId, jobId: request.params.id });
    const { scheduled } = await rpc.call(webhookEndpoints.redeliver, { jobId: job.id });
    const done = scheduled ? 'redelivered' : 'nothing-to-redeliver';
    return reply.redirect(`${DASHBOARD_PATH}/jobs/${encodeURIComponent(job.id)}?done=${done}`, 303);
  });
};
