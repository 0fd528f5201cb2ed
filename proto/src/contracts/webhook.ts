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
};
