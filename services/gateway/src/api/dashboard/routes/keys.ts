import { billingEndpoints } from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { RouteDependencies } from '../../routes/dependencies';
import { customerProblemOf, doneQuery, noticeOf } from '../notices';
import { type KeysView, keysPage } from '../pages/keys';
import { DASHBOARD_PATH } from '../session';

const HTML = 'text/html; charset=utf-8';

/** Creating, listing and revoking the account's API keys. */
export const keyRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, { rpc }) => {
  const render = async (accountId: string, view: Omit<KeysView, 'keys'>): Promise<string> => {
    const { keys } = await rpc.call(billingEndpoints.listKeys, { accountId });
    return keysPage({ ...view, keys });
  };

  app.get('/keys', { schema: { querystring: doneQuery } }, async (request, reply) => {
    const { accountId, csrfToken } = request.dashboardSession;
    const notice = noticeOf(request.query.done);
    return reply.type(HTML).send(await render(accountId, { csrfToken, notice }));
  });

  // Answered with the page itself, not a redirect: the new key must not travel in a URL.
  app.post('/keys', async (request, reply) => {
    const { accountId, csrfToken } = request.dashboardSession;
    try {
      const created = await rpc.call(billingEndpoints.createKey, { accountId });
      return reply.type(HTML).send(await render(accountId, { csrfToken, created }));
    } catch (error) {
      const problem = customerProblemOf(error);
      if (problem === null) throw error;
      return reply
        .status(400)
        .type(HTML)
        .send(await render(accountId, { csrfToken, problem }));
    }
  });

  app.post(
    '/keys/:keyId/revoke',
    { schema: { params: z.object({ keyId: z.string().max(200) }) } },
    async (request, reply) => {
      const { accountId } = request.dashboardSession;
      // Scoped to the session's account: another account's key is NOT_FOUND, untouched.
      await rpc.call(billingEndpoints.revokeKey, { keyId: request.params.keyId, accountId });
      return reply.redirect(`${DASHBOARD_PATH}/keys?done=key-revoked`, 303);
    },
  );
};
