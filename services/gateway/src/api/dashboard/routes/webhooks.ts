import { billingEndpoints, checkTargetUrl, httpUrl } from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { RouteDependencies } from '../../routes/dependencies';
import { type WebhooksView, webhooksPage } from '../pages/webhooks';

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

  app.get('/webhooks', async (request, reply) => {
    const { accountId, csrfToken } = request.dashboardSession;
    return reply.type(HTML).send(await render(accountId, csrfToken));
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
      const notice = entered === '' ? 'No default webhook URL any more.' : 'Webhook URL saved.';
      return reply.type(HTML).send(await render(accountId, csrfToken, { notice }));
    },
  );

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

/** The same two checks a webhookUrl meets in the API: its shape, then the deployment's policy. */
function webhookUrlProblem(url: string, deps: RouteDependencies): string | null {
  if (!httpUrl.safeParse(url).success) return 'Enter an absolute http(s) URL.';
  const verdict = checkTargetUrl(url, deps.webhookTargets);
  return verdict.allowed ? null : `This URL cannot receive webhooks: ${verdict.reason}.`;
}
