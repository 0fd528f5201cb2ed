import { checkTargetUrl, type TargetPolicy } from '@tamp/proto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sendError } from '../plugins/envelope';

/**
 * A route's check, after its schema, of the `webhookUrl` in its body against the deployment's
 * target policy (docs/decisions.md#webhooks): what can be judged without DNS (the scheme,
 * credentials in the URL, an address written as a literal) is refused here with 400
 * VALIDATION_ERROR, rather than accepted and refused at every delivery. A host name is judged
 * at delivery, on the addresses it resolves to then.
 */
export function refuseForbiddenWebhookTarget(policy: TargetPolicy) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const { webhookUrl } = (request.body ?? {}) as { webhookUrl?: unknown };
    if (typeof webhookUrl !== 'string') return;
    const verdict = checkTargetUrl(webhookUrl, policy);
    if (verdict.allowed) return;
    return sendError(reply, 'VALIDATION_ERROR', 'The request is invalid', [
      { path: 'body.webhookUrl', message: `is not an allowed webhook target: ${verdict.reason}` },
    ]);
  };
}
