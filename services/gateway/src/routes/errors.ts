import { errorEnvelope } from '@tamp/proto';

/** Documented error responses, shared by every route's schema (OpenAPI and serialization). */
export const errorResponses = {
  '4xx': errorEnvelope.describe('Error envelope; see the error codes table'),
  '5xx': errorEnvelope.describe('INTERNAL or UNAVAILABLE (with Retry-After)'),
} as const;
