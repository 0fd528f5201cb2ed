import { z } from 'zod';
import { endpoint } from './endpoint';

export const webhookEndpoints = {
  listDeliveries: endpoint(
    'webhook',
    'list-deliveries',
    z.object({ jobId: z.string() }),
    z.object({
      deliveries: z.array(
        z.object({
          deliveryId: z.string(),
          jobId: z.string(),
          event: z.enum(['job.completed', 'job.failed']),
          attempt: z.number().int(),
          attemptedAt: z.iso.datetime(),
          target: z.string(),
          statusCode: z.number().int().nullable(),
          latencyMs: z.number().nullable(),
          outcome: z.enum(['delivered', 'failed', 'refused']),
          error: z.string().nullable(),
        }),
      ),
    }),
  ),
  /** Starts a fresh delivery sequence for a job's event (operator action). */
  redeliver: endpoint(
    'webhook',
    'redeliver',
    z.object({ jobId: z.string(), event: z.enum(['job.completed', 'job.failed']).optional() }),
    z.object({ scheduled: z.boolean() }),
  ),
  /**
   * Sends one signed delivery of the job's event, now, to the account's current default webhook
   * URL (the dashboard's "send a test delivery"): the same payload, headers, signature, target
   * checks and time limit as any delivery, recorded in the job's delivery log; no retries.
   * `no-target` when the account has no default URL.
   */
  sendTestDelivery: endpoint(
    'webhook',
    'send-test-delivery',
    z.object({ accountId: z.string(), jobId: z.string() }),
    z.object({
      outcome: z.enum(['delivered', 'failed', 'refused', 'no-target']),
      target: z.string().nullable(),
      statusCode: z.number().int().nullable(),
      latencyMs: z.number().nullable(),
      error: z.string().nullable(),
    }),
  ),
};
