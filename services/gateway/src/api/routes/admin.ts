import type { Rpc } from '@tamp/kit';
import {
  billingCycleAnchorInput,
  billingEndpoints,
  httpUrl,
  PLANS,
  successEnvelope,
  type TargetPolicy,
  webhookEndpoints,
} from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { DASHBOARD_PATH } from '../dashboard/session';
import { errorResponses, ok } from './responses';
import { refuseForbiddenWebhookTarget } from './webhook-target';

const idParams = z.object({ id: z.string().min(1).max(200) });

const accountCreation = z.strictObject({
  plan: z.enum(PLANS).default('free'),
  credits: z.number().int().nonnegative().optional(),
  webhookUrl: httpUrl.nullable().optional(),
  billingCycleAnchor: billingCycleAnchorInput.optional(),
});

const accountUpdate = z.strictObject({
  plan: z.enum(PLANS).optional(),
  webhookUrl: httpUrl.nullable().optional(),
  /** Null: back to calendar-month periods. Billing refuses a future one. */
  billingCycleAnchor: billingCycleAnchorInput.nullable().optional(),
});

// fastify hands an empty body over as null, hence nullish() on the optional bodies.
const secretRotation = z
  .strictObject({
    gracePeriodSeconds: billingEndpoints.rotateWebhookSecret.request.shape.gracePeriodSeconds,
  })
  .nullish();

const redelivery = z
  .strictObject({ event: z.enum(['job.completed', 'job.failed']).optional() })
  .nullish();

/**
 * The operators' API: thin mappings onto billing and webhook endpoints. Mounted under /admin on
 * the admin app only; the admin-token plugin guards every route.
 */
export const adminRoutes: FastifyPluginAsyncZod<{
  rpc: Rpc;
  webhookTargets: TargetPolicy;
}> = async (app, { rpc, webhookTargets }) => {
  // An account's default webhook URL is checked when an operator sets it, as a job's is.
  const checkWebhookTarget = refuseForbiddenWebhookTarget(webhookTargets);

  app.post(
    '/accounts',
    {
      preHandler: checkWebhookTarget,
      schema: {
        body: accountCreation,
        response: {
          201: successEnvelope(billingEndpoints.createAccount.response),
          ...errorResponses,
        },
      },
    },
    async (request, reply) =>
      reply.status(201).send(ok(await rpc.call(billingEndpoints.createAccount, request.body))),
  );

  app.get('/accounts/:id', { schema: { params: idParams } }, async (request) =>
    ok(await rpc.call(billingEndpoints.getAccount, { accountId: request.params.id })),
  );

  app.patch(
    '/accounts/:id',
    { preHandler: checkWebhookTarget, schema: { params: idParams, body: accountUpdate } },
    async (request) =>
      ok(
        await rpc.call(billingEndpoints.updateAccount, {
          accountId: request.params.id,
          ...request.body,
        }),
      ),
  );

  // A new signing secret; the replaced one keeps signing next to it for the grace period.
  app.post(
    '/accounts/:id/webhook-secret/rotate',
    {
      schema: {
        params: idParams,
        body: secretRotation,
        response: {
          200: successEnvelope(billingEndpoints.rotateWebhookSecret.response),
          ...errorResponses,
        },
      },
    },
    async (request) =>
      ok(
        await rpc.call(billingEndpoints.rotateWebhookSecret, {
          accountId: request.params.id,
          ...(request.body?.gracePeriodSeconds !== undefined && {
            gracePeriodSeconds: request.body.gracePeriodSeconds,
          }),
        }),
      ),
  );

  app.post(
    '/accounts/:id/credits',
    {
      schema: { params: idParams, body: z.strictObject({ credits: z.number().int().positive() }) },
    },
    async (request) =>
      ok(
        await rpc.call(billingEndpoints.addCredits, {
          accountId: request.params.id,
          credits: request.body.credits,
        }),
      ),
  );

  // A one-time link into the account dashboard, for the operator to hand to the customer.
  app.post(
    '/accounts/:id/sign-in-links',
    { schema: { params: idParams } },
    async (request, reply) => {
      const link = await rpc.call(billingEndpoints.createSignInLink, {
        accountId: request.params.id,
      });
      const path = `${DASHBOARD_PATH}/sign-in/link?${new URLSearchParams({ token: link.token })}`;
      return reply.status(201).send(ok({ ...link, path }));
    },
  );

  // Signs the account out of the dashboard everywhere (a leaked session, an offboarded person).
  app.post('/accounts/:id/sessions/revoke', { schema: { params: idParams } }, async (request) =>
    ok(await rpc.call(billingEndpoints.revokeSessions, { accountId: request.params.id })),
  );

  app.post('/accounts/:id/keys', { schema: { params: idParams } }, async (request, reply) =>
    reply
      .status(201)
      .send(ok(await rpc.call(billingEndpoints.createKey, { accountId: request.params.id }))),
  );

  app.get('/accounts/:id/keys', { schema: { params: idParams } }, async (request) =>
    ok(await rpc.call(billingEndpoints.listKeys, { accountId: request.params.id })),
  );

  app.delete('/keys/:id', { schema: { params: idParams } }, async (request) =>
    ok(await rpc.call(billingEndpoints.revokeKey, { keyId: request.params.id })),
  );

  app.get('/jobs/:id/deliveries', { schema: { params: idParams } }, async (request) =>
    ok(await rpc.call(webhookEndpoints.listDeliveries, { jobId: request.params.id })),
  );

  app.post(
    '/jobs/:id/redeliver',
    { schema: { params: idParams, body: redelivery } },
    async (request, reply) =>
      reply.status(202).send(
        ok(
          await rpc.call(webhookEndpoints.redeliver, {
            jobId: request.params.id,
            ...(request.body?.event !== undefined && { event: request.body.event }),
          }),
        ),
      ),
  );
};
