/**
 * Receiving Tamp webhooks: verify the signature over the raw body, refuse stale deliveries,
 * and process each job event once. Needs only Node.js; copy it into your receiver.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';

const TOLERANCE_SECONDS = 300;
const SIGNATURE_PREFIX = 'sha256=';

export interface TampEvent {
  event: 'job.completed' | 'job.failed';
  job: {
    id: string;
    type: 'audio' | 'image' | 'text';
    status: string;
    result: {
      outputKey: string;
      metrics: { inputSize: number; outputSize: number; compressionRatio: number };
    } | null;
    error: string | null;
    createdAt: string;
    completedAt: string;
  };
}

export type Verification = { ok: true; event: TampEvent } | { ok: false; reason: string };

/**
 * Checks one delivery. `rawBody` must be the bytes exactly as received: parsing and
 * re-serialising the JSON first changes them and breaks the signature.
 */
export function verifyTampDelivery(
  rawBody: Buffer,
  headers: IncomingHttpHeaders,
  secret: string,
  nowSec: number = Math.floor(Date.now() / 1000),
): Verification {
  const timestamp = headers['x-service-timestamp'];
  const signature = headers['x-service-signature'];
  if (typeof timestamp !== 'string' || !/^\d+$/.test(timestamp)) {
    return { ok: false, reason: 'missing or malformed X-Service-Timestamp' };
  }
  // Replay protection: a captured delivery stops working after five minutes.
  if (Math.abs(nowSec - Number(timestamp)) >= TOLERANCE_SECONDS) {
    return { ok: false, reason: 'timestamp outside the 300-second window' };
  }
  if (typeof signature !== 'string' || !signature.startsWith(SIGNATURE_PREFIX)) {
    return { ok: false, reason: 'missing or malformed X-Service-Signature' };
  }
  // The key is the whole secret string as shown in the dashboard, "whsec_" included.
  const expected = createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest();
  const given = Buffer.from(signature.slice(SIGNATURE_PREFIX.length), 'hex');
  // Constant-time comparison, so response timing reveals nothing about the expected value.
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return { ok: false, reason: 'signature mismatch' };
  }
  return { ok: true, event: JSON.parse(rawBody.toString('utf8')) as TampEvent };
}

/**
 * Deliveries can repeat and arrive out of order; `job.id` plus `event` identifies one.
 * In memory here; in production use a unique index in your database.
 */
export class ProcessedEvents {
  readonly #seen = new Set<string>();

  has(event: TampEvent): boolean {
    return this.#seen.has(ProcessedEvents.key(event));
  }

  add(event: TampEvent): void {
    this.#seen.add(ProcessedEvents.key(event));
  }

  private static key(event: TampEvent): string {
    return `${event.job.id}:${event.event}`;
  }
}

/**
 * A node:http handler: 400 for anything unverified, 2xx once the event is handled or known.
 * Answer within 10 seconds — hand slow work to a queue inside `onEvent`. If `onEvent`
 * throws, the 500 makes Tamp retry later.
 */
export function createTampWebhookHandler(
  secret: string,
  onEvent: (event: TampEvent) => void | Promise<void>,
  processed: ProcessedEvents = new ProcessedEvents(),
): (request: IncomingMessage, response: ServerResponse) => Promise<void> {
  return async (request, response) => {
    const rawBody = await readRawBody(request);
    const verification = verifyTampDelivery(rawBody, request.headers, secret);
    if (!verification.ok) {
      response.writeHead(400, { 'content-type': 'text/plain' }).end(verification.reason);
      return;
    }
    if (processed.has(verification.event)) {
      response.writeHead(200, { 'content-type': 'text/plain' }).end('duplicate');
      return;
    }
    try {
      await onEvent(verification.event);
      processed.add(verification.event);
      response.writeHead(204).end();
    } catch {
      response.writeHead(500, { 'content-type': 'text/plain' }).end('try again later');
    }
  };
}

async function readRawBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
