import {
  errorEnvelope,
  INLINE_PIPELINES,
  PIPELINES,
  type Pipeline,
  publicJob,
  successEnvelope,
} from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { JobSubmission } from '../../application/job-submission';
import { idempotencyHeaders, JOB_BODIES } from '../../domain/job-requests';
import type { RouteDependencies } from './dependencies';
import { errorResponses, ok } from './responses';
import { refuseForbiddenWebhookTarget } from './webhook-target';

/** Text requests may carry 5,000,000 characters (up to 4 bytes each, plus JSON escaping). */
export const TEXT_BODY_LIMIT = 24 * 1024 * 1024;

const SUMMARIES: Record<Pipeline, string> = {
  audio: 'Create an audio job (always queued)',
  image: 'Create an image job (inline when small, not AVIF and no webhookUrl)',
  text: 'Create a text job (fast path when text ≤ 50 KB and no webhookUrl)',
};

const INLINE_JOB = successEnvelope(publicJob).describe(
  'Inline job, already completed or failed (never deduplicated by Idempotency-Key)',
);
const QUEUED_JOB = successEnvelope(publicJob).describe(
  'Queued job: { id, status: "created" }; for a replayed Idempotency-Key, the job it created as it is now',
);

/** Names for generated clients: createImageJob, listAudioPresets… */
export function capitalized(pipeline: Pipeline): string {
  return `${pipeline[0]!.toUpperCase()}${pipeline.slice(1)}`;
}

/** `POST /v1/<pipeline>`: creates a job (inline, HTTP 200, or queued, HTTP 202). */
export const jobCreationRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, deps) => {
  const checkWebhookTarget = refuseForbiddenWebhookTarget(deps.webhookTargets);
  for (const pipeline of PIPELINES) {
    app.post(
      `/${pipeline}`,
      {
        bodyLimit: pipeline === 'text' ? TEXT_BODY_LIMIT : undefined,
        preHandler: checkWebhookTarget,
        schema: {
          operationId: `create${capitalized(pipeline)}Job`,
          summary: SUMMARIES[pipeline],
          tags: [pipeline],
          headers: idempotencyHeaders,
          body: JOB_BODIES[pipeline],
          response: {
            // Audio is always queued: only image and text answer 200.
            ...(INLINE_PIPELINES.has(pipeline) && { 200: INLINE_JOB }),
            202: QUEUED_JOB,
            // UPLOAD_NOT_COMPLETED, or IDEMPOTENCY_KEY_IN_USE while a creation with the key settles.
            409: errorEnvelope,
            ...errorResponses,
          },
        },
      },
      async (request, reply) => {
        const created = await deps.jobSubmissions.submit(
          // This route's schema is JOB_BODIES[pipeline]: the body is that pipeline's.
          { pipeline, body: request.body } as JobSubmission,
          { account: request.account, idempotencyKey: request.headers['idempotency-key'] },
        );
        return reply.status(created.httpStatus).send(ok(created.job));
      },
    );
  }
};
