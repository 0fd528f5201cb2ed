import { errorEnvelope, successEnvelope } from '@tamp/proto';
import type { FastifyReply } from 'fastify';
import type { z } from 'zod';

/**
 * The error responses every route declares (serialization, and the OpenAPI document, which
 * names each one with its headers and examples in api/openapi/error-responses.ts): 401 from the
 * API key check, 429 from the rate limit, 503 when a dependency is down, and any other code.
 */
export const errorResponses = {
  401: errorEnvelope,
  429: errorEnvelope,
  '4xx': errorEnvelope,
  503: errorEnvelope,
  '5xx': errorEnvelope,
} as const;

/** A route's responses: `data` in the success envelope with 200, and the error envelopes. */
export function responds<Data extends z.ZodType>(data: Data, description: string) {
  return { 200: successEnvelope(data).describe(description), ...errorResponses };
}

/** The success envelope around `data`. */
export function ok<Data>(data: Data): { success: true; data: Data } {
  return { success: true, data };
}

/** Aborts when the client goes away before its answer (a long-poll stops waiting for it). */
export function abandonedSignal(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => controller.abort());
  return controller.signal;
}
