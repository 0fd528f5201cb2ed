import { publicUpload, uploadEndpoints, uploadRequestBody } from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { RouteDependencies } from './dependencies';
import { ok, responds } from './responses';

export const uploadRoutes: FastifyPluginAsyncZod<RouteDependencies> = async (app, deps) => {
  app.post(
    '/upload',
    {
      schema: {
        operationId: 'createUpload',
        summary: 'Request a presigned upload URL',
        tags: ['uploads'],
        body: uploadRequestBody,
        response: responds(publicUpload, 'The upload: PUT the file to uploadUrl'),
      },
    },
    async (request) =>
      ok(
        await deps.rpc.call(uploadEndpoints.createUpload, {
          accountId: request.account.accountId,
          filename: request.body.filename,
          size: request.body.size,
          maxUploadBytes: request.account.maxUploadBytes,
        }),
      ),
  );
};
