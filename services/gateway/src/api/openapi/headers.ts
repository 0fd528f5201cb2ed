import type { OpenAPIV3_1 } from 'openapi-types';
import { REQUEST_ID_PATTERN } from '../plugins/envelope';

/**
 * The response headers the gateway sends beyond HTTP's own, as `components.headers`: the
 * envelope plugin's X-Request-Id, the rate-limit plugin's RateLimit-* and Retry-After, the auth
 * plugin's WWW-Authenticate (docs/decisions.md#responses-and-errors).
 */
export const RESPONSE_HEADERS = {
  'X-Request-Id': {
    description:
      "The request's id: the caller's own X-Request-Id when it is well-formed, else a new UUID. " +
      'Quote it when reporting a problem',
    required: true,
    schema: { type: 'string', pattern: REQUEST_ID_PATTERN.source },
    example: '6f1c2a9e-3b7d-4c55-9a0e-2d8f4b1c7e30',
  },
  'RateLimit-Limit': {
    description:
      'Requests the account may make per minute, by its plan. On every answer to an authenticated request',
    schema: { type: 'integer', minimum: 1 },
    example: 60,
  },
  'RateLimit-Remaining': {
    description: 'Requests left in the current one-minute window, across every gateway replica',
    schema: { type: 'integer', minimum: 0 },
    example: 57,
  },
  'RateLimit-Reset': {
    description: 'Seconds until the current one-minute window ends and the count starts again',
    schema: { type: 'integer', minimum: 1, maximum: 60 },
    example: 42,
  },
  'Retry-After': {
    description:
      'Seconds to wait before sending the same request again: the rest of the rate-limit window ' +
      '(429), or how soon a dependency or a creation under the same Idempotency-Key should be ' +
      'settled (503, 409 IDEMPOTENCY_KEY_IN_USE)',
    schema: { type: 'integer', minimum: 1 },
    example: 5,
  },
  'WWW-Authenticate': {
    description: 'How to authenticate: a bearer API key',
    required: true,
    schema: { type: 'string' },
    example: 'Bearer realm="tamp"',
  },
} as const satisfies Record<string, OpenAPIV3_1.HeaderObject>;

export type ResponseHeaderName = keyof typeof RESPONSE_HEADERS;

/** Sent with every answer once the API key is known (the limiter runs after authentication). */
export const RATE_LIMIT_HEADERS = [
  'RateLimit-Limit',
  'RateLimit-Remaining',
  'RateLimit-Reset',
] as const satisfies readonly ResponseHeaderName[];

/** The headers of a successful answer. */
export const SUCCESS_HEADERS: readonly ResponseHeaderName[] = [
  'X-Request-Id',
  ...RATE_LIMIT_HEADERS,
];

/** A response's headers, each a reference to its component. */
export function headerRefs(
  names: readonly ResponseHeaderName[],
): Record<string, OpenAPIV3_1.ReferenceObject> {
  return Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));
}

/** The one request header every operation takes besides its own: a caller's request id. */
export const REQUEST_ID_PARAMETER = {
  name: 'X-Request-Id',
  in: 'header',
  required: false,
  description:
    'Optional id of your own for this request (1–128 of A–Z a–z 0–9 . _ : -), echoed in the ' +
    'response and logged with it; anything else is replaced by a new UUID',
  schema: { type: 'string', pattern: REQUEST_ID_PATTERN.source },
} as const satisfies OpenAPIV3_1.ParameterObject;
