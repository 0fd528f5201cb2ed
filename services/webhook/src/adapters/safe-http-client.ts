import { performance } from 'node:perf_hooks';
import { withTraceContextWithheld } from '@tamp/kit';
import { checkTargetUrl, type TargetPolicy } from '@tamp/proto';
import { Agent, request } from 'undici';
import { isRetryAfterStatus } from '../domain/retry-schedule';
import { createGuardedConnector, TargetRefusedError } from './guarded-connector';
import { type HostnameResolver, resolveWithSystemDns } from './hostname-resolver';

/** Receivers must answer within 10 seconds (spec, Events: delivery rules). */
export const DEFAULT_DELIVERY_TIMEOUT_MS = 10_000;
/** Enough of a receiver's answer to show an operator why it failed. */
export const DEFAULT_MAX_RESPONSE_BYTES = 4096;

export interface WebhookDeliveryRequest {
  url: string;
  /** Sent byte for byte; the signature headers must have been computed over exactly this. */
  body: Buffer | string;
  headers: Record<string, string>;
  policy: TargetPolicy;
  /** Hard deadline for the whole attempt: DNS, connect, TLS, headers and body. */
  timeoutMs?: number;
  /** The response body is read up to this many bytes, then the connection is dropped. */
  maxResponseBytes?: number;
  /** Defaults to the system resolver; tests inject a fake DNS. */
  resolveHostname?: HostnameResolver;
}

export type DeliveryOutcome = 'delivered' | 'failed' | 'refused';

/** The cap was reached, the deadline passed, or the receiver broke off mid-body. */
export type ResponseCut = 'size-limit' | 'deadline' | 'connection-error';

export interface WebhookDeliveryResult {
  /** `delivered` = 2xx; `failed` = retryable; `refused` = the target is not allowed, no socket was opened. */
  outcome: DeliveryOutcome;
  statusCode?: number;
  /** Duration of the whole attempt, body included. */
  latencyMs: number;
  error?: string;
  /** Raw `Retry-After` of a 429 or 503 answer, for `honourRetryAfter`. */
  retryAfter?: string;
  /** The first `maxResponseBytes` of the response body, decoded as UTF-8. */
  responseBody?: string;
  /** Why the response body was not read to its end, if it was not. */
  responseCut?: ResponseCut;
}

/**
 * Makes one webhook delivery attempt: a POST to a policy-checked address, no redirects, a
 * bounded response read, a hard deadline. Never throws for anything the receiver or the
 * network does; every attempt comes back as a result to record.
 */
export async function deliverWebhook(
  delivery: WebhookDeliveryRequest,
): Promise<WebhookDeliveryResult> {
  const started = performance.now();
  const latencyMs = () => Math.round(performance.now() - started);
  const timeoutMs = delivery.timeoutMs ?? DEFAULT_DELIVERY_TIMEOUT_MS;
  const maxResponseBytes = delivery.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(`timeoutMs must be a positive number, got ${timeoutMs}`);
  }
  if (!Number.isSafeInteger(maxResponseBytes) || maxResponseBytes < 0) {
    throw new RangeError(
      `maxResponseBytes must be a non-negative integer, got ${maxResponseBytes}`,
    );
  }

  const target = checkTargetUrl(delivery.url, delivery.policy);
  if (!target.allowed) return { outcome: 'refused', latencyMs: latencyMs(), error: target.reason };

  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), timeoutMs);
  // One agent per attempt: nothing is pooled, and destroying it is what drops the connection
  // after a capped read or a deadline.
  const agent = new Agent({
    connect: createGuardedConnector({
      policy: delivery.policy,
      resolveHostname: delivery.resolveHostname ?? resolveWithSystemDns,
      connectTimeoutMs: timeoutMs,
      abandonSignal: deadline.signal,
    }),
    connections: 1,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  let statusCode: number | undefined;
  try {
    // undici's request() never follows redirects, so a 3xx's Location is never fetched.
    // The receiver is a third party: it gets no `traceparent` (our trace ids stay ours).
    const pending = withTraceContextWithheld(() =>
      request(target.url, {
        method: 'POST',
        body: delivery.body,
        headers: delivery.headers,
        dispatcher: agent,
        signal: deadline.signal,
      }),
    );
    // undici only acts on the signal once the request is on a socket; while the connection is
    // still being made (a slow DNS answer, say) the deadline has to be enforced from outside.
    pending.catch(() => {});
    const response = await Promise.race([pending, rejectWhenAborted(deadline.signal)]);
    statusCode = response.statusCode;
    const read = await readCapped(response.body, maxResponseBytes, deadline.signal);
    const answer = {
      statusCode,
      latencyMs: latencyMs(),
      responseBody: read.bytes.toString('utf8'),
      ...(read.cut ? { responseCut: read.cut } : {}),
    };
    // The status is what the receiver answered; a slow or broken body after a 2xx does not undo it.
    if (statusCode >= 200 && statusCode < 300) return { outcome: 'delivered', ...answer };
    const retryAfter = firstHeader(response.headers['retry-after']);
    return {
      outcome: 'failed',
      ...answer,
      error: describeStatus(statusCode, firstHeader(response.headers.location)),
      ...(retryAfter !== undefined && isRetryAfterStatus(statusCode) ? { retryAfter } : {}),
    };
  } catch (error) {
    if (error instanceof TargetRefusedError) {
      return { outcome: 'refused', latencyMs: latencyMs(), error: error.message };
    }
    return {
      outcome: 'failed',
      latencyMs: latencyMs(),
      ...(statusCode !== undefined ? { statusCode } : {}),
      error: deadline.signal.aborted
        ? `no complete answer within the ${timeoutMs} ms deadline`
        : describeError(error),
    };
  } finally {
    clearTimeout(timer);
    await agent.destroy();
  }
}

function rejectWhenAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => {
    const fail = () => reject(new Error('deadline reached'));
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
}

interface CappedRead {
  bytes: Buffer;
  cut?: ResponseCut;
}

async function readCapped(
  body: AsyncIterable<Buffer>,
  maxBytes: number,
  deadline: AbortSignal,
): Promise<CappedRead> {
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of body) {
      const room = maxBytes - total;
      if (chunk.length > room) {
        chunks.push(chunk.subarray(0, room));
        // Leaving the loop destroys the stream; the caller then destroys the connection.
        return { bytes: Buffer.concat(chunks), cut: 'size-limit' };
      }
      chunks.push(chunk);
      total += chunk.length;
    }
  } catch {
    return {
      bytes: Buffer.concat(chunks),
      cut: deadline.aborted ? 'deadline' : 'connection-error',
    };
  }
  return { bytes: Buffer.concat(chunks) };
}

function describeStatus(statusCode: number, location: string | undefined): string {
  if (statusCode >= 300 && statusCode < 400) {
    const target = location === undefined ? '' : ` to ${location.slice(0, 200)}`;
    return `receiver answered ${statusCode} (redirect${target} not followed)`;
  }
  return `receiver answered ${statusCode}`;
}

function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as NodeJS.ErrnoException).code;
  return code && !error.message.includes(code) ? `${code}: ${error.message}` : error.message;
}

function firstHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
