import {
  describeOperations,
  describePresets,
  PIPELINE_DEFINITIONS,
  PIPELINES,
  type Pipeline,
  publicJob,
  ServiceError,
  successEnvelope,
} from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
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

const presetsResponse = z.object({
  presets: z.array(
    z.object({
      name: z.string(),
      description: z.string(),
      operations: z.array(z.object({ type: z.string(), params: z.unknown() })),
      output: z.record(z.string(), z.unknown()),
      queued: z.boolean(),
    }),
  ),
});

const operationsResponse = z.object({
  operations: z.array(
    z.object({
      type: z.string(),
      description: z.string(),
      params: z.record(
        z.string(),
        z.object({
          type: z.string(),
          description: z.string().optional(),
          min: z.number().optional(),
          max: z.number().optional(),
          default: z.unknown().optional(),
          enum: z.array(z.unknown()).readonly().optional(),
        }),
      ),
    }),
  ),
});

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

    app.get(
      `/${pipeline}/presets`,
      {
        schema: {
          summary: `The ${pipeline} presets and the chains they expand to`,
          tags: [pipeline],
          response: { 200: successEnvelope(presetsResponse), ...errorResponses },
        },
      },
      async () => ({ success: true as const, data: presets }),
    );

    app.get(
      `/${pipeline}/operations`,
      {
        schema: {
          summary: `The ${pipeline} operations, their parameters, ranges and defaults`,
          tags: [pipeline],
          response: { 200: successEnvelope(operationsResponse), ...errorResponses },
        },
      },
      async () => ({ success: true as const, data: operations }),
    );

    app.post(
      `/${pipeline}`,
      {
        bodyLimit: pipeline === 'text' ? TEXT_BODY_LIMIT : undefined,
        schema: {
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
