import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { ERROR_CODE_MEANINGS, ERROR_CODES, type ErrorCode } from '@tamp/proto';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';

/** Every error code, its HTTP status and when it is answered: the rules a client can break. */
function errorCodeTable(): string {
  const rows = (Object.keys(ERROR_CODES) as ErrorCode[]).map(
    (code) => `| ${code} | ${ERROR_CODES[code]} | ${ERROR_CODE_MEANINGS[code]} |`,
  );
  return ['Error codes:', '', '| Code | HTTP | When |', '|---|---|---|', ...rows].join('\n');
}

/**
 * OpenAPI 3.1 from the routes' zod schemas (the same ones that validate): the document at
 * GET /openapi.json and a docs page at GET /docs. Both are public.
 */
export const openapiPlugin = fp(
  async (app: FastifyInstance) => {
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'Tamp compression API',
          version: '1.0.0',
          description:
            'Compress audio, images and text through jobs. Every response is an envelope ' +
            '`{ success, data | error }` and carries `X-Request-Id`. Rate limits per account ' +
            '(free 60/min, pro 600/min) are reported in `RateLimit-*` headers; over the limit ' +
            'is 429 `RATE_LIMITED` with `Retry-After`.\n\n' +
            errorCodeTable(),
        },
        // Relative: the API is wherever this document was fetched from (behind any ingress).
        servers: [{ url: '/', description: 'The server that serves this document' }],
        components: {
          securitySchemes: {
            apiKey: { type: 'http', scheme: 'bearer', description: 'sk_live_… API key' },
          },
        },
        security: [{ apiKey: [] }],
      },
      transform: jsonSchemaTransform,
    });
    await app.register(swaggerUi, { routePrefix: '/docs' });
    app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  },
  { name: 'openapi' },
);
