import {
  describeOperations,
  describePresets,
  PIPELINE_DEFINITIONS,
  PIPELINES,
  type Pipeline,
  publicJob,
  publicOperationCatalogue,
  publicPresetCatalogue,
  ServiceError,
  successEnvelope,
} from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { type JobSubmission, submitJob } from '../app/job-submission';
import { idempotencyHeaders, JOB_BODIES } from '../domain/job-requests';
import type { RouteDependencies } from './dependencies';
import { errorResponses } from './errors';

/** Text requests may carry 5,000,000 characters (up to 4 bytes each, plus JSON escaping). */
export const TEXT_BODY_LIMIT = 24 * 1024 * 1024;

const SUMMARIES: Record<Pipeline, string> = {
  audio: 'Create an audio job (always queued)',
  image: 'Create an image job (inline when small, not AVIF and no webhookUrl)',
  text: 'Create a text job (fast path when text ≤ 50 KB and no webhookUrl)',
};

export const pipelineRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, deps) => {
  let creationsInFlight = 0;
  const submissionDeps = {
    rpc: deps.rpc,
    objectStore: deps.objectStore,
    budgetMs: deps.createJobBudgetMs,
  };
  for (const pipeline of PIPELINES) {
    const definition = PIPELINE_DEFINITIONS[pipeline];
    const presets = describePresets(definition);
    const operations = describeOperations(definition);
    // Names for generated clients: createImageJob, listAudioPresets…
    const capitalized = `${pipeline[0]!.toUpperCase()}${pipeline.slice(1)}`;

    app.get(
      `/${pipeline}/presets`,
      {
        schema: {
          operationId: `list${capitalized}Presets`,
          summary: `The ${pipeline} presets and the chains they expand to`,
          tags: [pipeline],
          response: { 200: successEnvelope(publicPresetCatalogue), ...errorResponses },
        },
      },
      async () => ({ success: true as const, data: presets }),
    );

    app.get(
      `/${pipeline}/operations`,
      {
        schema: {
          operationId: `list${capitalized}Operations`,
          summary: `The ${pipeline} operations, their parameters, ranges and defaults`,
          tags: [pipeline],
          response: { 200: successEnvelope(publicOperationCatalogue), ...errorResponses },
        },
      },
      async () => ({ success: true as const, data: operations }),
    );

    app.post(
      `/${pipeline}`,
      {
        bodyLimit: pipeline === 'text' ? TEXT_BODY_LIMIT : undefined,
        schema: {
          operationId: `create${capitalized}Job`,
          summary: SUMMARIES[pipeline],
          tags: [pipeline],
          headers: idempotencyHeaders,
          body: JOB_BODIES[pipeline],
          response: {
            200: successEnvelope(publicJob).describe('Inline job, already completed or failed'),
            202: successEnvelope(publicJob).describe('Queued job: { id, status: "created" }'),
            ...errorResponses,
          },
        },
      },
      async (request, reply) => {
        if (creationsInFlight >= deps.maxConcurrentCreations) {
          // Shed at once: queued behind this many, the request would miss its budget anyway.
          reply.header('retry-after', '1');
          throw new ServiceError('UNAVAILABLE', 'Too many job creations at once; retry shortly');
        }
        creationsInFlight++;
        try {
          // This route's schema is JOB_BODIES[pipeline]: the body is that pipeline's.
          const submission = { pipeline, body: request.body } as JobSubmission;
          const created = await submitJob(submissionDeps, submission, {
            account: request.account,
            idempotencyKey: request.headers['idempotency-key'],
          });
          const preset = (request.body as { preset?: string }).preset ?? 'custom';
          deps.jobsCreated?.inc({ pipeline, preset });
          return reply
            .status(created.httpStatus)
            .send({ success: true as const, data: created.job });
        } finally {
          creationsInFlight--;
        }
      },
    );
  }
};
