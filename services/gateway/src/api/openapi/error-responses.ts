import {
  creationOutcomeUnknown,
  ERROR_CODE_MEANINGS,
  type ErrorCode,
  type errorEnvelope,
  ServiceError,
} from '@tamp/proto';
import type { OpenAPIV3_1 } from 'openapi-types';
import type { z } from 'zod';
import { EXAMPLE_IDS, type NamedExamples } from './examples';
import {
  headerRefs,
  RATE_LIMIT_HEADERS,
  RESPONSE_HEADERS,
  type ResponseHeaderName,
} from './headers';

type ErrorAnswer = z.input<typeof errorEnvelope>;

/** One of the error responses routes declare (routes/responses.ts), named in the document. */
interface ErrorResponse {
  /** Its key in `components.responses`. */
  name: string;
  /** The codes answered with this status, described from proto; none: any other code. */
  codes: readonly ErrorCode[];
  /** Said instead of the codes' meanings when `codes` is empty. */
  description?: string;
  headers: readonly ResponseHeaderName[];
  examples: NamedExamples<ErrorAnswer>;
}

/** The envelope a ServiceError is answered with (plugins/envelope.ts). */
const answer = (code: ErrorCode, message: string, details?: unknown): ErrorAnswer => ({
  success: false,
  error: new ServiceError(code, message, details).toJSON(),
});

const AFTER_AUTHENTICATION: readonly ResponseHeaderName[] = ['X-Request-Id', ...RATE_LIMIT_HEADERS];

/**
 * Each error status a route declares, keyed as @fastify/swagger writes it ('4xx' becomes '4XX'),
 * with the headers the gateway sends with it: X-Request-Id always, RateLimit-* once the key is
 * known (so not with 401), Retry-After where the plugins set it.
 */
export const ERROR_RESPONSES: Record<string, ErrorResponse> = {
  '401': {
    name: 'Unauthorized',
    codes: ['UNAUTHORIZED'],
    headers: ['X-Request-Id', 'WWW-Authenticate'],
    examples: {
      missingKey: {
        summary: 'No Authorization header',
        value: answer(
          'UNAUTHORIZED',
          'Missing Authorization header; send Authorization: Bearer <API key>',
        ),
      },
      unknownKey: {
        summary: 'An unknown or revoked key',
        value: answer('UNAUTHORIZED', 'Unknown or revoked API key'),
      },
    },
  },
  '409': {
    name: 'Conflict',
    codes: ['UPLOAD_NOT_COMPLETED', 'IDEMPOTENCY_KEY_IN_USE'],
    headers: [...AFTER_AUTHENTICATION, 'Retry-After'],
    examples: {
      uploadNotCompleted: {
        summary: 'The file was never PUT',
        value: answer(
          'UPLOAD_NOT_COMPLETED',
          'The file was never uploaded: send it with PUT to the uploadUrl first',
        ),
      },
      idempotencyKeyInUse: {
        summary: 'A creation with this Idempotency-Key is still being settled (Retry-After)',
        value: answer(
          'IDEMPOTENCY_KEY_IN_USE',
          'A request with this Idempotency-Key is still being processed; retry shortly with the same key',
        ),
      },
    },
  },
  '429': {
    name: 'RateLimited',
    codes: ['RATE_LIMITED'],
    headers: [...AFTER_AUTHENTICATION, 'Retry-After'],
    examples: {
      rateLimited: {
        summary: 'Over the per-minute limit',
        value: answer(
          'RATE_LIMITED',
          'Rate limit of 60 requests per minute exceeded; retry in 42 s',
        ),
      },
    },
  },
  '4XX': {
    name: 'ClientError',
    codes: [],
    description:
      'Any other client error: `error.code` says which (the error codes table in the API ' +
      'description); VALIDATION_ERROR (400) lists every issue in `details`',
    headers: AFTER_AUTHENTICATION,
    examples: {
      validationError: {
        summary: 'Both preset and operations sent',
        value: answer('VALIDATION_ERROR', 'The request is invalid', [
          { path: 'body.operations', message: 'Send either preset or operations, not both' },
        ]),
      },
      uploadNotFound: {
        summary: "An unknown, malformed or another account's upload id",
        value: answer('UPLOAD_NOT_FOUND', 'No upload with this id exists'),
      },
      jobNotFound: {
        summary: "An unknown, malformed or another account's job id",
        value: answer('JOB_NOT_FOUND', 'No such job'),
      },
    },
  },
  '503': {
    name: 'Unavailable',
    codes: ['UNAVAILABLE'],
    headers: [...AFTER_AUTHENTICATION, 'Retry-After'],
    examples: {
      dependencyDown: {
        summary: 'A dependency is down: nothing was done',
        value: answer('UNAVAILABLE', 'A dependency is unavailable; retry shortly'),
      },
      creationOutcomeUnknown: {
        summary: 'A job creation whose outcome is not known yet',
        value: { success: false, error: creationOutcomeUnknown(EXAMPLE_IDS.job).toJSON() },
      },
    },
  },
  '5XX': {
    name: 'ServerError',
    codes: ['INTERNAL'],
    headers: AFTER_AUTHENTICATION,
    examples: {
      internal: {
        summary: 'Unexpected',
        value: answer(
          'INTERNAL',
          `Internal error; quote request id ${RESPONSE_HEADERS['X-Request-Id'].example}`,
        ),
      },
    },
  },
};

function describe(response: ErrorResponse): string {
  if (response.codes.length === 0) return response.description ?? '';
  return response.codes.map((code) => `${code}: ${ERROR_CODE_MEANINGS[code]}`).join('. ');
}

/** `components.responses`: every error response, its headers and examples. */
export function errorResponseComponents(
  errorEnvelopeRef: string,
): Record<string, OpenAPIV3_1.ResponseObject> {
  return Object.fromEntries(
    Object.values(ERROR_RESPONSES).map((response) => [
      response.name,
      {
        description: describe(response),
        headers: headerRefs(response.headers),
        content: {
          'application/json': { schema: { $ref: errorEnvelopeRef }, examples: response.examples },
        },
      },
    ]),
  );
}
