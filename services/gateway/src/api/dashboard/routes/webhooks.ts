import {
  billingEndpoints,
  checkTargetUrl,
  httpUrl,
  jobEndpoints,
  webhookEndpoints,
} from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { RouteDependencies } from '../../routes/dependencies';
import { doneQuery, noticeOf } from '../notices';
import { type WebhooksView, webhooksPage } from '../pages/webhooks';
import { DASHBOARD_PATH } from '../session';

const HTML = 'text/html; charset=utf-8';

type Message = Pick<WebhooksView, 'notice' | 'problem' | 'revealedSecret'>;

/** The default webhook URL and the signing secret. */
export const webhookRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, deps) => {
  const { rpc } = deps;
  const render = async (accountId: string, csrfToken: string, message: Message = {}) => {
    const account = await rpc.call(billingEndpoints.getAccount, { accountId });
    return webhooksPage({
      csrfToken,
      webhookUrl: account.webhookUrl,
      previousSecretValidUntil: account.previousWebhookSecret?.validUntil ?? null,
      ...message,
      ...(message.revealedSecret === null && { revealedSecret: account.webhookSecret }),
    });
  };

  app.get('/webhooks', { schema: { querystring: doneQuery } }, async (request, reply) => {
    const { accountId, csrfToken } = request.dashboardSession;
    const notice = noticeOf(request.query.done);
    return reply.type(HTML).send(await render(accountId, csrfToken, { notice }));
  });

  app.post(
    '/webhooks/url',
    { schema: { body: z.object({ webhookUrl: z.string().max(4096) }) } },
    async (request, reply) => {
      const { accountId, csrfToken } = request.dashboardSession;
      const entered = request.body.webhookUrl.trim();
      const problem = entered === '' ? null : webhookUrlProblem(entered, deps);
      if (problem !== null) {
        return reply
          .status(400)
          .type(HTML)
          .send(await render(accountId, csrfToken, { problem }));
      }
      await rpc.call(billingEndpoints.updateAccount, {
        accountId,
        webhookUrl: entered === '' ? null : entered,
      });
      const done = entered === '' ? 'url-cleared' : 'url-saved';
      return reply.redirect(`${DASHBOARD_PATH}/webhooks?done=${done}`, 303);
    },
  );

  app.post('/webhooks/test', async (request, reply) => {
    const { accountId, csrfToken } = request.dashboardSession;
    const message = await sendTestDelivery(accountId, deps);
    return reply.type(HTML).send(await render(accountId, csrfToken, message));
  });

  // A POST, so the secret is shown only when asked for, never by a link or a prefetch.
  app.post('/webhooks/secret/reveal', async (request, reply) => {
    const { accountId, csrfToken } = request.dashboardSession;
    return reply.type(HTML).send(await render(accountId, csrfToken, { revealedSecret: null }));
  });

  app.post(
    '/webhooks/secret/rotate',
    {
      schema: {
        body: z.object({
          // A form sends text; the bounds are the admin API's own.
          gracePeriodSeconds: z.coerce
            .number()
            .pipe(billingEndpoints.rotateWebhookSecret.request.shape.gracePeriodSeconds.unwrap()),
        }),
      },
    },
    async (request, reply) => {
      const { accountId, csrfToken } = request.dashboardSession;
      await rpc.call(billingEndpoints.rotateWebhookSecret, {
        accountId,
        gracePeriodSeconds: request.body.gracePeriodSeconds,
      });
      const notice = 'A new signing secret is in use; copy it into your receiver.';
      return reply
        .type(HTML)
        .send(await render(accountId, csrfToken, { notice, revealedSecret: null }));
    },
  );
};

/**
 * The contract sends no event kinds but job.completed and job.failed, so a test delivery is the
 * event of the account's latest finished job, sent once to the default URL as it is now.
 */
async function sendTestDelivery(accountId: string, { rpc }: RouteDependencies): Promise<Message> {
  const jobId = await latestFinishedJob(accountId, rpc);
  if (jobId === null) {
    return {
      problem:
        'A test delivery repeats the event of your latest finished job: run a job first (Try it).',
    };
  }
  // One attempt may take the whole delivery time limit (10 s) after two reads.
  const sent = await rpc.call(
    webhookEndpoints.sendTestDelivery,
    { accountId, jobId },
    { timeoutMs: 15_000 },
  );
  if (sent.outcome === 'no-target') return { problem: 'Save a default webhook URL first.' };
  const answer = sent.statusCode === null ? 'no answer' : `HTTP ${sent.statusCode}`;
  const report = `Test delivery of job ${jobId}'s event to ${sent.target}: ${answer}${
    sent.latencyMs === null ? '' : ` in ${Math.round(sent.latencyMs)} ms`
  }`;
  return sent.outcome === 'delivered'
    ? { notice: `${report}, delivered.` }
    : { problem: `${report}, ${sent.outcome}${sent.error ? `: ${sent.error}` : ''}.` };
}

async function latestFinishedJob(accountId: string, rpc: RouteDependencies['rpc']) {
  for (const status of ['completed', 'failed'] as const) {
    const { items } = await rpc.call(jobEndpoints.listJobs, { accountId, status, limit: 1 });
    if (items[0] !== undefined) return items[0].id;
  }
  return null;
}

/** The same two checks a webhookUrl meets in the API: its shape, then the deployment's policy. */
function webhookUrlProblem(url: string, deps: RouteDependencies): string | null {
  if (!httpUrl.safeParse(url).success) return 'Enter an absolute http(s) URL.';
  const verdict = checkTargetUrl(url, deps.webhookTargets);
  return verdict.allowed ? null : `This URL cannot receive webhooks: ${verdict.reason}.`;
}
