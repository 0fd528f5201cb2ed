import {
  describeOperations,
  describePresets,
  jobEndpoints,
  newId,
  PIPELINE_DEFINITIONS,
  PIPELINES,
  type Pipeline,
  publicJob,
  publicOperationCatalogue,
  publicPresetCatalogue,
  ServiceError,
  storageKeys,
  successEnvelope,
} from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import {
  audioCreateJob,
  type CreateJobContext,
  type CreateJobRequest,
  imageCreateJob,
  textCreateJob,
} from '../domain/create-job';
import { planInlineText } from '../domain/inline-text';
import {
  type AudioJobBody,
  type ImageJobBody,
  idempotencyHeaders,
  JOB_BODIES,
  type TextJobBody,
} from '../domain/job-requests';
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
        const context: CreateJobContext = {
          jobId: newId('job'),
          account: request.account,
          idempotencyKey: request.headers['idempotency-key'],
        };
        let createRequest: CreateJobRequest;
        if (pipeline === 'audio') {
          createRequest = audioCreateJob(request.body as AudioJobBody, context);
        } else if (pipeline === 'image') {
          createRequest = imageCreateJob(request.body as ImageJobBody, context);
        } else {
          const body = request.body as TextJobBody;
          let inline: Parameters<typeof textCreateJob>[2];
          if (body.text !== undefined) {
            const plan = planInlineText(body.text);
            const storedKey = storageKeys.input(request.account.accountId, context.jobId);
            if (plan.kind === 'stored-text') {
              await deps.objectStore
                .putBuffer(storedKey, plan.bytes, 'text/plain; charset=utf-8')
                .catch((error: unknown) => {
                  request.log.warn({ err: error }, 'storing large text failed');
                  throw new ServiceError('UNAVAILABLE', 'Storage is unavailable; retry shortly');
                });
            }
            inline = { plan, storedKey };
          }
          createRequest = textCreateJob(body, context, inline);
        }
        const created = await deps.rpc.call(jobEndpoints.createJob, createRequest, {
          timeoutMs: deps.createJobTimeoutMs,
        });
        return reply.status(created.httpStatus).send({ success: true as const, data: created.job });
      },
    );
  }
};
