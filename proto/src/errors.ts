/**
 * Every error code the public API can answer with, and its HTTP status. The spec defines the
 * first six; DECISIONS.md closes the rest.
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
   * A creation with the same Idempotency-Key is still in doubt (its claimant has not finished);
   * answered with Retry-After. Retrying with the same key is safe and returns the one job.
   * Added on the client-sdk branch for the client's retry policy; the lead reconciles it with
   * the job service, which answers UNAVAILABLE in that case until then.
   */
  IDEMPOTENCY_KEY_IN_USE: 409,
  RATE_LIMITED: 429,
  PAYLOAD_TOO_LARGE: 413,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  INTERNAL: 500,
  UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface ErrorIssue {
  path: string;
  message: string;
}

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
