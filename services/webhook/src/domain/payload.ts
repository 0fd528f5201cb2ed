import { createHash } from 'node:crypto';
import type { JobEvent, PublicWebhookEvent } from '@tamp/proto';

export type WebhookEventName = JobEvent['event'];

/** The body of a delivery: proto's public schema, which receivers (the client) parse too. */
export type WebhookPayload = PublicWebhookEvent;

/**
 * Builds the payload from a job event. Only the spec's three metrics are sent (the event also
 * carries worker-internal ones); a failed job has `result: null`.
 */
export function buildPayload(event: JobEvent): WebhookPayload {
  const result =
    event.event === 'job.completed' && event.result !== null
      ? {
          outputKey: event.result.outputKey,
          metrics: {
            inputSize: event.result.metrics.inputSize,
            outputSize: event.result.metrics.outputSize,
            compressionRatio: event.result.metrics.compressionRatio,
          },
        }
      : null;
  return {
    event: event.event,
    job: {
      id: event.jobId,
      type: event.pipeline,
      status: event.status,
      result,
      error: event.error,
      createdAt: event.createdAt,
      completedAt: event.completedAt,
    },
  };
}

/** The exact body text, serialized once so every retry sends (and signs) the same bytes. */
export function serializePayload(payload: WebhookPayload): string {
  return JSON.stringify(payload);
}

/** One delivery sequence per job and event: the `webhook_deliveries` `_id`. */
export function deliveryKey(jobId: string, event: WebhookEventName): string {
  return `${jobId}:${event}`;
}

const HEADER_SAFE = /^[A-Za-z0-9_.-]{1,200}$/;

/**
 * Standard Webhooks `webhook-id`: stable across every retry (and operator redelivery) of one
 * job event, so receivers can deduplicate on it. Readable when the job id is header-safe
 * (`msg_job_01J…_job.completed`), otherwise a hash of the pair.
 */
export function webhookIdFor(jobId: string, event: WebhookEventName): string {
  if (HEADER_SAFE.test(jobId)) return `msg_${jobId}_${event}`;
  const digest = createHash('sha256').update(deliveryKey(jobId, event)).digest('base64url');
  return `msg_${digest.slice(0, 32)}`;
}
