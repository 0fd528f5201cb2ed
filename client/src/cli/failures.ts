import type { ErrorCode } from '@tamp/proto';
import {
  JobFailedError,
  TampApiError,
  TampConnectionError,
  TampError,
  TampTimeoutError,
  TampTransferError,
  WebhookVerificationError,
} from '../errors';

/** The `tamp` exit codes (documented in the README and `tamp --help`). */
export const EXIT = {
  ok: 0,
  /** Some files or jobs failed, or the API refused a request. */
  failed: 1,
  /** Bad arguments, nothing to compress, an invalid preset or operation, no API key. */
  usage: 2,
  /** The API key was refused. */
  unauthorized: 3,
  /** Not enough credits. */
  credits: 4,
  /** The API could not be reached, or stayed unavailable or over its rate while retrying. */
  unavailable: 5,
  /** `tamp jobs wait` ran out of time. */
  timeout: 6,
  /** `tamp webhook verify`: the delivery does not verify. */
  unverified: 7,
  /** Ctrl-C. */
  interrupted: 130,
} as const;

export const EXIT_CODES_HELP = `Exit codes:
  0    done (every file compressed or already done)
  1    some files or jobs failed, or the API refused a request
  2    usage: bad arguments, no files matched, invalid preset or operations, no API key
  3    the API key was refused (UNAUTHORIZED)
  4    not enough credits (INSUFFICIENT_CREDITS)
  5    the API was unreachable, unavailable or over its rate limit after retrying
  6    tamp jobs wait: timed out
  7    tamp webhook verify: the delivery does not verify
  130  interrupted (Ctrl-C): run the same command again to resume`;

/** A mistake in how the command was called (exit 2). */
export class UsageError extends Error {}

/** What to tell the user about each error code, beyond the server's own message. */
const HINTS: Record<ErrorCode, string> = {
  INVALID_FORMAT:
    'The file is not what its extension says, or that extension is not accepted ' +
    '(.mp3 .wav .pdf .txt .jpg .jpeg .png .webp).',
  FILE_TOO_LARGE: "The file is larger than your plan's upload limit.",
  UPLOAD_NOT_FOUND: 'This account has no such upload (was it made with another API key?).',
  UPLOAD_EXPIRED: 'Uploads are usable for 24 hours; upload the file again.',
  UPLOAD_NOT_COMPLETED: 'The file never reached storage; upload it again.',
  JOB_NOT_FOUND:
    'This account has no such job: check the id, and that TAMP_API_KEY belongs to the account that created it.',
  UNAUTHORIZED:
    'The API key was refused: set TAMP_API_KEY (or --api-key) to an active sk_live_… key.',
  VALIDATION_ERROR:
    'The request is not valid; `tamp presets <pipeline>` lists the presets and their operations.',
  INSUFFICIENT_CREDITS:
    'Not enough credits; nothing was charged for this file. The allowance renews each billing ' +
    'period (`tamp usage` shows the current one), or an operator can add credits.',
  IDEMPOTENCY_KEY_REUSED:
    'This Idempotency-Key belongs to a different request. For `tamp compress`, run again with --force.',
  IDEMPOTENCY_KEY_IN_USE: 'The same request is still being created; try again in a few seconds.',
  RATE_LIMITED:
    "Still over the account's request rate after retrying; lower --concurrency or try again in a minute.",
  PAYLOAD_TOO_LARGE: 'The request body is too large; send big text as a .txt file instead.',
  URI_TOO_LONG: 'The request path is too long; check the job id.',
  HEADERS_TOO_LARGE: 'The request headers are too large; check TAMP_API_KEY.',
  REQUEST_TIMEOUT: 'The request did not reach the server in time; check the network and retry.',
  EXPECTATION_FAILED:
    'A proxy between you and the API added an Expect header the API cannot meet (check TAMP_BASE_URL).',
  NOT_FOUND: 'The base URL does not look like a Tamp API (check TAMP_BASE_URL).',
  METHOD_NOT_ALLOWED: 'The base URL does not look like a Tamp API (check TAMP_BASE_URL).',
  INTERNAL: 'The service failed unexpectedly; give its operators the request id.',
  UNAVAILABLE: 'The service stayed unavailable while retrying; try again shortly.',
};

export interface Failure {
  message: string;
  hint?: string;
  exitCode: number;
  code?: string;
}

/** Turns anything thrown into what the user reads and the exit code. */
export function describeFailure(error: unknown, baseUrl: string): Failure {
  if (error instanceof UsageError) return { message: error.message, exitCode: EXIT.usage };
  if (error instanceof TampApiError) {
    const code = error.code as ErrorCode;
    const hint = HINTS[code] as string | undefined;
    const requestId =
      error.requestId !== undefined && error.status !== 0 ? ` (request ${error.requestId})` : '';
    return {
      message: `${error.code}: ${error.message}${requestId}`,
      ...(hint !== undefined && { hint }),
      exitCode: exitCodeOf(code, error.status),
      code: error.code,
    };
  }
  if (error instanceof TampConnectionError) {
    return {
      message: error.message,
      hint: `Cannot reach the API at ${baseUrl}: is it running (npm start)? Set TAMP_BASE_URL or --base-url.${
        error.maybeProcessed ? ' The request may have been processed: check `tamp jobs list`.' : ''
      }`,
      exitCode: EXIT.unavailable,
      code: 'NETWORK',
    };
  }
  if (error instanceof TampTimeoutError) {
    return { message: error.message, exitCode: EXIT.timeout, code: 'TIMEOUT' };
  }
  if (error instanceof WebhookVerificationError) {
    return { message: `not verified: ${error.message}`, exitCode: EXIT.unverified };
  }
  if (error instanceof JobFailedError) {
    return { message: error.message, exitCode: EXIT.failed, code: 'JOB_FAILED' };
  }
  if (error instanceof TampTransferError) {
    return { message: error.message, exitCode: EXIT.failed, code: 'TRANSFER' };
  }
  if (error instanceof TampError) return { message: error.message, exitCode: EXIT.failed };
  const text = error instanceof Error ? error.message : String(error);
  return { message: text, exitCode: EXIT.failed };
}

function exitCodeOf(code: ErrorCode, status: number): number {
  switch (code) {
    case 'UNAUTHORIZED':
      return EXIT.unauthorized;
    case 'INSUFFICIENT_CREDITS':
      return EXIT.credits;
    case 'UNAVAILABLE':
    case 'RATE_LIMITED':
    case 'INTERNAL':
      return EXIT.unavailable;
    case 'VALIDATION_ERROR':
      // Refused before sending (status 0) means the arguments were wrong.
      return status === 0 ? EXIT.usage : EXIT.failed;
    default:
      return EXIT.failed;
  }
}

/** Failures after which starting more files is pointless. */
export function stopsTheRun(error: unknown): boolean {
  return (
    error instanceof TampApiError &&
    (error.code === 'UNAUTHORIZED' || error.code === 'INSUFFICIENT_CREDITS')
  );
}
