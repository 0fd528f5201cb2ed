import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import type { OpenAPIV3_1 } from 'openapi-types';
import { completeDocument, type DocumentSettings, documentHead } from '../openapi/document';
import { REFERENCE_PAGE } from '../openapi/reference-page';

/**
 * OpenAPI 3.1 from the routes' zod schemas (the same ones that validate), completed by
 * api/openapi/document.ts: the document at GET /openapi.json and the API reference page at
 * GET /docs. Both are public.
 */
export const openapiPlugin = fp(
  async (app: FastifyInstance, settings: DocumentSettings) => {
    await app.register(swagger, {
      openapi: documentHead(settings),
      transform: jsonSchemaTransform,
      // The named schemas proto declares go to components.schemas; then the rest of the document.
      transformObject: (input) =>
        completeDocument(jsonSchemaTransformObject(input) as OpenAPIV3_1.Document),
    });
    await app.register(swaggerUi, REFERENCE_PAGE);
    app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  },
  { name: 'openapi' },
);
