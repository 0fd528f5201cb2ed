/**
 * Every error code the public API can answer with, and its HTTP status. The spec defines the
 * first six; docs/decisions.md#responses-and-errors closes the rest.
 */
export const ERROR_CODES = {
  INVALID_FORMAT: 422,
  FILE_TOO_LARGE: 413,
  UPLOAD_NOT_FOUND: 404,
  UPLOAD_EXPIRED: 410,
  UPLOAD_NOT_COMPLETED: 409,
  JOB_NOT_FOUND: 404,
  UNAUTHORIZED: 401,
  VALIDATION_ERROR: 400,
  INSUFFICIENT_CREDITS: 402,
  IDEMPOTENCY_KEY_REUSED: 422,
  /**
   * A creation with this Idempotency-Key is still under way (or its outcome is being settled
   * after a failure): retry the same request after Retry-After; it never creates a second job.
   */
  IDEMPOTENCY_KEY_IN_USE: 409,
  RATE_LIMITED: 429,
  PAYLOAD_TOO_LARGE: 413,
  /** The request path is longer than the server reads (HTTP's own limit, not a field's). */
  URI_TOO_LONG: 414,
  /** The request line and headers together exceed 16 KB. */
  HEADERS_TOO_LARGE: 431,
  /** The request did not arrive completely in time. */
  REQUEST_TIMEOUT: 408,
  /** An `Expect` header asks for something other than 100-continue. */
  EXPECTATION_FAILED: 417,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  INTERNAL: 500,
  UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/** When each code is answered, for the OpenAPI document and every client's error messages. */
export const ERROR_CODE_MEANINGS: Record<ErrorCode, string> = {
  INVALID_FORMAT:
    'Filename extension not allowed, file content not of its format, or an upload of the wrong kind for the endpoint',
  FILE_TOO_LARGE: 'Declared or actual size over the plan limit',
  UPLOAD_NOT_FOUND: "Unknown, malformed or another account's upload id",
  UPLOAD_EXPIRED: 'More than 24 hours since the upload was created',
  UPLOAD_NOT_COMPLETED: 'The upload URL was never PUT to',
  JOB_NOT_FOUND: "Unknown, malformed or another account's job id",
  UNAUTHORIZED: 'Authorization missing, malformed, unknown or revoked (WWW-Authenticate: Bearer)',
  VALIDATION_ERROR:
    'The body, query or a header fails its schema (details lists each issue), or the JSON or HTTP is malformed',
  INSUFFICIENT_CREDITS: 'Not enough credits for the job; nothing was created',
  IDEMPOTENCY_KEY_REUSED: 'The Idempotency-Key was used with another endpoint or body',
  IDEMPOTENCY_KEY_IN_USE:
    'A creation with this Idempotency-Key is still being settled; retry the same request after Retry-After',
  RATE_LIMITED:
    'Over the account request rate, or too many connections from one address; Retry-After says when to retry',
  PAYLOAD_TOO_LARGE: "The request body is over the endpoint's limit",
  URI_TOO_LONG: 'The request path is longer than the server reads',
  HEADERS_TOO_LARGE: 'The request line and headers exceed 16 KB',
  REQUEST_TIMEOUT: 'The request did not arrive completely in time',
  EXPECTATION_FAILED: 'The Expect header asks for something other than 100-continue',
  NOT_FOUND: 'No such route',
  METHOD_NOT_ALLOWED: 'The path exists under other methods (listed in Allow)',
  INTERNAL: 'Unexpected; quote X-Request-Id',
  UNAVAILABLE:
    'A dependency is down or the system is saturated; retry after Retry-After. From a job creation: `details.jobId` and `details.outcome` say whether the job exists (`not-created`, or `unknown` until GET /v1/jobs/{jobId} tells); without them nothing was created',
};

/**
 * A failure that maps onto the public error envelope. Services throw it (or send its JSON over
 * NATS); the gateway renders it.
 */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly details: unknown;

  constructor(code: ErrorCode, message: string, details?: unknown) {
    super(message);
    this.name = 'ServiceError';
    this.code = code;
    this.details = details;
  }

  get httpStatus(): number {
    return ERROR_CODES[this.code];
  }

  toJSON(): { code: ErrorCode; message: string; details?: unknown } {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details };
  }
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}
