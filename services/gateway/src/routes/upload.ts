import {
  LIMITS,
  publicUpload,
  successEnvelope,
  UPLOAD_FILENAME_PATTERN,
  uploadEndpoints,
} from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { RouteDependencies } from './dependencies';
import { errorResponses } from './errors';

const uploadBody = z.strictObject({
  filename: z
    .string()
    .min(LIMITS.filenameLength.min)
    .max(LIMITS.filenameLength.max)
    .describe(
      'Extension decides the content type: .mp3 .wav .pdf .txt .jpg .jpeg .png .webp ' +
        '(any case); another extension, or none, is 422 INVALID_FORMAT',
    )
    .meta({ pattern: UPLOAD_FILENAME_PATTERN }),
  size: z.number().int().min(1).describe('Declared size in bytes; checked against the plan limit'),
});

export const uploadRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, deps) => {
  app.post(
    '/upload',
    {
      schema: {
        summary: 'Request a presigned upload URL',
        tags: ['uploads'],
        body: uploadBody,
        response: { 200: successEnvelope(publicUpload), ...errorResponses },
      },
    },
    async (request) => {
      const upload = await deps.rpc.call(uploadEndpoints.createUpload, {
        accountId: request.account.accountId,
        filename: request.body.filename,
        size: request.body.size,
        maxUploadBytes: request.account.maxUploadBytes,
      });
      return { success: true as const, data: upload };
    },
  );
};
