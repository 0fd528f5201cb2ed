import {
  apiErrorOf,
  apiErrorOfStatus,
  TampApiError,
  TampConnectionError,
  TampError,
} from './errors';
import {
  isNetworkFailure,
  parseRetryAfter,
  type RetryPolicy,
  type RetryReason,
  retryDelayMs,
  retryReasonOf,
  sleep,
} from './retry';

export interface RetryEvent {
  method: string;
  path: string;
  /** 1 for the first retry. */
  retry: number;
  delayMs: number;
  reason: RetryReason;
  error: Error;
}

export interface TransportOptions {
  apiKey: string;
  baseUrl: string;
  fetch: typeof fetch;
  /** Per attempt; a long-poll's own wait is added to it. */
  timeoutMs: number;
  retry: RetryPolicy;
  onRetry?: ((event: RetryEvent) => void) | undefined;
}

export interface ApiRequest {
  method: 'GET' | 'POST';
  /** From the base URL, e.g. `/v1/upload`. */
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  /** A second copy does no harm if the first was acted on (see retryReasonOf). */
  repeatable: boolean;
  signal?: AbortSignal | undefined;
  /** How long the server may hold the answer on purpose (long-poll), on top of timeoutMs. */
  holdMs?: number;
}

export interface ApiAnswer<Data> {
  data: Data;
  status: number;
  headers: Headers;
}

/**
 * The API's HTTP conversation: bearer auth, the `{ success, data | error }` envelope turned into
 * data or a typed error, and retries where they are safe. One request id is sent with every
 * attempt of a call (`X-Request-Id`), so the server's logs show the retries of one call together.
 */
export class Transport {
  private readonly baseUrl: string;

  constructor(private readonly options: TransportOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
  }

  async send<Data>(request: ApiRequest): Promise<ApiAnswer<Data>> {
    const requestId = globalThis.crypto.randomUUID();
    const { retry: policy } = this.options;
    for (let retry = 1; ; retry++) {
      try {
        return await this.attempt<Data>(request, requestId);
      } catch (error) {
        if (request.signal?.aborted) throw request.signal.reason;
        const reason = retryReasonOf(error, request.repeatable);
        const delayMs =
          reason !== undefined && retry <= policy.maxRetries
            ? retryDelayMs(
                retry,
                error instanceof TampApiError ? error.retryAfterSeconds : undefined,
                policy,
              )
            : undefined;
        if (delayMs === undefined) throw finalError(error, request);
        this.options.onRetry?.({
          method: request.method,
          path: request.path,
          retry,
          delayMs,
          reason: reason as RetryReason,
          error: error as Error,
        });
        await sleep(delayMs, request.signal);
      }
    }
  }

  private async attempt<Data>(request: ApiRequest, requestId: string): Promise<ApiAnswer<Data>> {
    const url = new URL(`${this.baseUrl}${request.path}`);
    for (const [name, value] of Object.entries(request.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    const timeout = AbortSignal.timeout(this.options.timeoutMs + (request.holdMs ?? 0));
    const signal =
      request.signal === undefined ? timeout : AbortSignal.any([timeout, request.signal]);
    const response = await this.options.fetch(url, {
      method: request.method,
      headers: {
        authorization: `Bearer ${this.options.apiKey}`,
        accept: 'application/json',
        'x-request-id': requestId,
        ...(request.body !== undefined && { 'content-type': 'application/json' }),
        ...request.headers,
      },
      ...(request.body !== undefined && { body: JSON.stringify(request.body) }),
      signal,
    });
    const text = await response.text();
    const envelope = parseEnvelope(text);
    const common = {
      requestId: response.headers.get('x-request-id') ?? requestId,
      retryAfterSeconds: parseRetryAfter(response.headers.get('retry-after')),
    };
    if (envelope?.success === true && response.ok) {
      return { data: envelope.data as Data, status: response.status, headers: response.headers };
    }
    if (envelope?.success === false && typeof envelope.error?.code === 'string') {
      throw apiErrorOf(envelope.error.code, {
        ...common,
        message: envelope.error.message ?? envelope.error.code,
        status: response.status,
        details: envelope.error.details,
      });
    }
    throw apiErrorOfStatus(response.status, {
      ...common,
      message: `HTTP ${response.status} from ${url.origin} without the Tamp envelope: ${text.slice(0, 200)}`,
    });
  }
}

interface Envelope {
  success?: unknown;
  data?: unknown;
  error?: { code?: unknown; message?: string; details?: unknown };
}

function parseEnvelope(text: string): Envelope | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null ? (value as Envelope) : undefined;
  } catch {
    return undefined;
  }
}

function finalError(error: unknown, request: ApiRequest): unknown {
  if (error instanceof TampError || !isNetworkFailure(error)) return error;
  const cause = error as Error & { cause?: { code?: string } };
  const detail = cause.cause?.code ?? cause.message;
  return new TampConnectionError(
    `${request.method} ${request.path}: no answer from the API (${detail})`,
    !request.repeatable,
    { cause: error },
  );
}
