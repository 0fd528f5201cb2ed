import { ServiceError } from '@tamp/proto';

/**
 * Errors that say a dependency (NATS, MongoDB, S3, a peer service) is down, restarting, paused
 * or overloaded, rather than that the request or the code is wrong. They become UNAVAILABLE
 * (503 with Retry-After for clients; "ask again" for workers), never INTERNAL: nothing about the
 * request is at fault and a retry will succeed once the dependency is back.
 */
const TRANSIENT_ERROR_NAMES = new Set([
  // nats.js
  'TimeoutError',
  'NoRespondersError',
  'ConnectionError',
  'ClosedConnectionError',
  'DrainingConnectionError',
  'RequestError',
  // MongoDB driver
  'MongoNetworkError',
  'MongoNetworkTimeoutError',
  'MongoServerSelectionError',
  'MongoTimeoutError',
  'MongoWaitQueueTimeoutError',
  'MongoPoolClearedError',
  'MongoNotConnectedError',
  'MongoTopologyClosedError',
  // fetch / AbortSignal.timeout
  'AbortError',
]);

/** Node's socket errors: refused, reset, timed out, broken pipe, unreachable. */
const TRANSIENT_SYSTEM_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
]);

export function isTransientError(error: unknown): boolean {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    if (current instanceof ServiceError) return current.code === 'UNAVAILABLE';
    if (typeof current !== 'object') return false;
    const { name, code } = current as { name?: unknown; code?: unknown };
    if (typeof name === 'string' && TRANSIENT_ERROR_NAMES.has(name)) return true;
    if (typeof code === 'string' && TRANSIENT_SYSTEM_CODES.has(code)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/** A dependency's failure as the UNAVAILABLE it is (see isTransientError), else unchanged. */
export function asServiceError(error: unknown): unknown {
  if (error instanceof ServiceError || !isTransientError(error)) return error;
  return new ServiceError('UNAVAILABLE', 'A dependency is unavailable; retry shortly');
}
