import { errorEnvelope, successEnvelope } from '@tamp/proto';
import type { FastifyReply } from 'fastify';
import type { z } from 'zod';

/** Documented error responses, shared by every route's schema (OpenAPI and serialization). */
export const errorResponses = {
  '4xx': errorEnvelope.describe('Error envelope; see the error codes table'),
  '5xx': errorEnvelope.describe('INTERNAL or UNAVAILABLE (with Retry-After)'),
} as const;

/** A route's responses: `data` in the success envelope with 200, and the error envelopes. */
export function responds<Data extends z.ZodType>(data: Data) {
  return { 200: successEnvelope(data), ...errorResponses };
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
