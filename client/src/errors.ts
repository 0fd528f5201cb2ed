import { type ErrorCode, isErrorCode, type PublicJob } from '@tamp/proto';

/** Everything this package throws on purpose is a TampError. */
export class TampError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

export interface ApiErrorInit {
  message: string;
  status: number;
  details?: unknown;
  requestId?: string | undefined;
  /** Seconds from `Retry-After`, when the answer carried one. */
  retryAfterSeconds?: number | undefined;
}

/**
 * The API answered with its error envelope. `code` is one of proto's error codes (a newer
 * server may send one this client does not know yet: then it is the generic class with that
 * code as a string).
 */
export class TampApiError<Code extends string = ErrorCode | (string & {})> extends TampError {
  readonly code: Code;
  readonly status: number;
  readonly details: unknown;
  readonly requestId: string | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: Code, init: ApiErrorInit) {
    super(init.message);
    this.code = code;
    this.status = init.status;
    this.details = init.details;
    this.requestId = init.requestId;
    this.retryAfterSeconds = init.retryAfterSeconds;
  }
}

export class InvalidFormatError extends TampApiError<'INVALID_FORMAT'> {}
export class FileTooLargeError extends TampApiError<'FILE_TOO_LARGE'> {}
export class UploadNotFoundError extends TampApiError<'UPLOAD_NOT_FOUND'> {}
export class UploadExpiredError extends TampApiError<'UPLOAD_EXPIRED'> {}
export class UploadNotCompletedError extends TampApiError<'UPLOAD_NOT_COMPLETED'> {}
export class JobNotFoundError extends TampApiError<'JOB_NOT_FOUND'> {}
export class UnauthorizedError extends TampApiError<'UNAUTHORIZED'> {}
/** Also thrown before sending, when a request fails proto's schema (status 0 then). */
export class ValidationError extends TampApiError<'VALIDATION_ERROR'> {}
export class InsufficientCreditsError extends TampApiError<'INSUFFICIENT_CREDITS'> {}
export class IdempotencyKeyReusedError extends TampApiError<'IDEMPOTENCY_KEY_REUSED'> {}
export class IdempotencyKeyInUseError extends TampApiError<'IDEMPOTENCY_KEY_IN_USE'> {}
export class RateLimitedError extends TampApiError<'RATE_LIMITED'> {}
export class PayloadTooLargeError extends TampApiError<'PAYLOAD_TOO_LARGE'> {}
export class UriTooLongError extends TampApiError<'URI_TOO_LONG'> {}
export class HeadersTooLargeError extends TampApiError<'HEADERS_TOO_LARGE'> {}
export class RequestTimeoutError extends TampApiError<'REQUEST_TIMEOUT'> {}
export class ExpectationFailedError extends TampApiError<'EXPECTATION_FAILED'> {}
export class NotFoundError extends TampApiError<'NOT_FOUND'> {}
export class MethodNotAllowedError extends TampApiError<'METHOD_NOT_ALLOWED'> {}
export class InternalError extends TampApiError<'INTERNAL'> {}
export class UnavailableError extends TampApiError<'UNAVAILABLE'> {}

/** One class per code of proto's ERROR_CODES: a code added there fails to compile here. */
const API_ERROR_CLASSES: {
  [Code in ErrorCode]: new (
    code: Code,
    init: ApiErrorInit,
  ) => TampApiError<Code>;
} = {
  INVALID_FORMAT: InvalidFormatError,
  FILE_TOO_LARGE: FileTooLargeError,
  UPLOAD_NOT_FOUND: UploadNotFoundError,
  UPLOAD_EXPIRED: UploadExpiredError,
  UPLOAD_NOT_COMPLETED: UploadNotCompletedError,
  JOB_NOT_FOUND: JobNotFoundError,
  UNAUTHORIZED: UnauthorizedError,
  VALIDATION_ERROR: ValidationError,
  INSUFFICIENT_CREDITS: InsufficientCreditsError,
  IDEMPOTENCY_KEY_REUSED: IdempotencyKeyReusedError,
  IDEMPOTENCY_KEY_IN_USE: IdempotencyKeyInUseError,
  RATE_LIMITED: RateLimitedError,
  PAYLOAD_TOO_LARGE: PayloadTooLargeError,
  URI_TOO_LONG: UriTooLongError,
  HEADERS_TOO_LARGE: HeadersTooLargeError,
  REQUEST_TIMEOUT: RequestTimeoutError,
  EXPECTATION_FAILED: ExpectationFailedError,
  NOT_FOUND: NotFoundError,
  METHOD_NOT_ALLOWED: MethodNotAllowedError,
  INTERNAL: InternalError,
  UNAVAILABLE: UnavailableError,
};

export function apiErrorOf(code: string, init: ApiErrorInit): TampApiError {
  if (!isErrorCode(code)) return new TampApiError(code, init);
  const ErrorClass = API_ERROR_CLASSES[code] as new (
    code: ErrorCode,
    init: ApiErrorInit,
  ) => TampApiError<ErrorCode>;
  return new ErrorClass(code, init);
}

/** Codes that stand for a bare HTTP status, for answers that do not wear the envelope. */
const CODE_BY_STATUS: Readonly<Record<number, ErrorCode>> = {
  401: 'UNAUTHORIZED',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  413: 'PAYLOAD_TOO_LARGE',
  429: 'RATE_LIMITED',
  502: 'UNAVAILABLE',
  503: 'UNAVAILABLE',
  504: 'UNAVAILABLE',
};

/**
 * An answer without the API's envelope (a proxy's error page, a load balancer's 502): kept as
 * an API error with the code its status stands for, so callers handle one family of errors.
 */
export function apiErrorOfStatus(status: number, init: Omit<ApiErrorInit, 'status'>) {
  const code = CODE_BY_STATUS[status] ?? (status >= 500 ? 'INTERNAL' : `HTTP_${status}`);
  return apiErrorOf(code, { ...init, status });
}

/**
 * The request may not have reached the API, or its answer was lost: a refused connection, a
 * reset, a DNS failure or the client's own timeout. `maybeProcessed` is true when the request
 * could have been acted on (a job creation that was not retried because retrying it was not
 * safe).
 */
export class TampConnectionError extends TampError {
  constructor(
    message: string,
    readonly maybeProcessed: boolean,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The presigned PUT to storage or the result download was refused. */
export class TampTransferError extends TampError {
  constructor(
    message: string,
    readonly status: number,
    readonly body: string,
  ) {
    super(message);
  }
}

/** `waitForJob` ran out of time; `job` is the last state read. */
export class TampTimeoutError extends TampError {
  constructor(readonly job: PublicJob) {
    super(`job ${job.id} is still ${job.status} after the wait timed out`);
  }
}

/** `compress` created a job that ended `failed` (its credits are refunded). */
export class JobFailedError extends TampError {
  constructor(readonly job: PublicJob) {
    super(`job ${job.id} failed: ${job.error ?? 'no reason given'}`);
  }
}

/** A webhook delivery did not verify; `reason` says why (never which byte differed). */
export class WebhookVerificationError extends TampError {}
