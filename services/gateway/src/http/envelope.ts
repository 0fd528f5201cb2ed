import { randomUUID } from 'node:crypto';
import { type ErrorCode, ServiceError } from '@tamp/proto';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

/** Echo a well-formed incoming X-Request-Id; anything else gets a fresh one. */
export function requestIdFor(request: {
  headers: Record<string, string | string[] | undefined>;
}): string {
  const incoming = request.headers['x-request-id'];
  return typeof incoming === 'string' && REQUEST_ID_PATTERN.test(incoming)
    ? incoming
    : randomUUID();
}

export function sendError(
  reply: FastifyReply,
  code: ErrorCode,
  message: string,
  details?: unknown,
): FastifyReply {
  const error = new ServiceError(code, message, details);
  return reply.status(error.httpStatus).send({ success: false, error: error.toJSON() });
}

/**
 * The envelope every response wears: `{ success: true, data }` or `{ success: false, error }`,
 * with X-Request-Id on both. Framework errors (bad JSON, body too large, schema failures) are
 * translated into the documented codes here, in one place.
 */
export const envelopePlugin = fp(
  async (app: FastifyInstance) => {
    app.addHook('onRequest', async (request, reply) => {
      reply.header('x-request-id', request.id);
    });

    app.setNotFoundHandler((request, reply) =>
      sendError(reply, 'NOT_FOUND', `No route ${request.method} ${request.url.split('?')[0]}`),
    );

    app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      if (error instanceof ServiceError) {
        return sendError(reply, error.code, error.message, error.details);
      }
      if (error.validation !== undefined) {
        return sendError(
          reply,
          'VALIDATION_ERROR',
          'The request is invalid',
          error.validation.map((issue) => ({
            path: `${error.validationContext ?? 'body'}${issue.instancePath.replaceAll('/', '.')}`,
            message: issue.message ?? 'is invalid',
          })),
        );
      }
      switch (error.code) {
        case 'FST_ERR_CTP_BODY_TOO_LARGE':
          return sendError(
            reply,
            'PAYLOAD_TOO_LARGE',
            'The request body is too large for this endpoint',
          );
        case 'FST_ERR_CTP_INVALID_JSON_BODY':
        case 'FST_ERR_CTP_EMPTY_JSON_BODY':
          return sendError(reply, 'VALIDATION_ERROR', 'The request body is not valid JSON');
        case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
          return sendError(reply, 'VALIDATION_ERROR', 'Request bodies must be application/json');
      }
      if (error.statusCode === 400 && error instanceof SyntaxError) {
        return sendError(reply, 'VALIDATION_ERROR', 'The request body is not valid JSON');
      }
      request.log.error({ err: error }, 'unhandled error');
      return sendError(reply, 'INTERNAL', `Internal error; quote request id ${request.id}`);
    });
  },
  { name: 'envelope' },
);
