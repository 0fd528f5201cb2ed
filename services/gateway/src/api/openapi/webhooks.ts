import { LIMITS, publicWebhookEvent, WEBHOOK_DELIVERY_HEADERS } from '@tamp/proto';
import type { OpenAPIV3_1 } from 'openapi-types';
import { WEBHOOK_EXAMPLES } from './examples';

/** Every event the webhook service sends: proto's, so a new event is documented or fails here. */
export const WEBHOOK_EVENTS = publicWebhookEvent.shape.event.options;
type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

const SUMMARIES: Record<WebhookEvent, string> = {
  'job.completed': 'A queued job completed',
  'job.failed': 'A queued job failed after its last attempt (its credits are refunded)',
};

const DELIVERY =
  "Sent to the job's webhookUrl, else to the account's default webhook URL, when a queued job " +
  'finishes; inline jobs (HTTP 200) send nothing. Verify the signature over the raw body, then ' +
  'deduplicate on job.id and event: a delivery can arrive more than once and out of order ' +
  '(docs/webhooks.md).';

const RETRIED =
  `Not accepted (also a redirect, or no answer within ${LIMITS.webhookDeadlineMs / 1000} s): ` +
  `retried up to ${LIMITS.webhookRetries} times, with delays growing to hours (the schedule is in ` +
  'docs/webhooks.md). A 429 or 503 with Retry-After is honoured when it asks for at most twice ' +
  'the next delay';

const deliveryHeaders = (): OpenAPIV3_1.ParameterObject[] =>
  Object.entries(WEBHOOK_DELIVERY_HEADERS).map(([name, description]) => ({
    name,
    in: 'header',
    required: true,
    description,
    schema: { type: 'string' },
  }));

function webhookOperation(
  event: WebhookEvent,
  webhookEventRef: string,
): OpenAPIV3_1.OperationObject {
  return {
    operationId: `${event.replace(/\.(\w)/, (_, letter: string) => letter.toUpperCase())}Webhook`,
    summary: SUMMARIES[event],
    description: DELIVERY,
    // Deliveries carry signatures, not an API key.
    security: [],
    parameters: deliveryHeaders(),
    requestBody: {
      required: true,
      content: {
        'application/json': {
          schema: { $ref: webhookEventRef },
          examples: { [event]: WEBHOOK_EXAMPLES[event] },
        },
      },
    },
    responses: {
      '2XX': { description: `Accepted: answer within ${LIMITS.webhookDeadlineMs / 1000} s` },
      '4XX': { description: RETRIED },
      '5XX': { description: RETRIED },
    },
  };
}

/** The document's `webhooks` (OpenAPI 3.1): one POST per event. */
export function webhooks(
  webhookEventRef: string,
): Record<string, { post: OpenAPIV3_1.OperationObject }> {
  return Object.fromEntries(
    WEBHOOK_EVENTS.map((event) => [event, { post: webhookOperation(event, webhookEventRef) }]),
  );
}
