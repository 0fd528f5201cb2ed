import type { PublicWebhookEvent } from '@tamp/proto';
import { WebhookVerificationError } from './errors';

/** A delivery is refused when its timestamp is this far from now or further (spec, Events). */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

/** Fetch's Headers, Node's IncomingHttpHeaders, or a plain object of header names. */
export type WebhookHeaders = Headers | Record<string, string | readonly string[] | undefined>;

export interface VerifyWebhookOptions {
  toleranceSeconds?: number;
  /** Unix seconds to check the timestamp against; default now. */
  nowSeconds?: number;
}

export interface VerifiedWebhook {
  event: PublicWebhookEvent;
  /** Which signature verified: Standard Webhooks (`webhook-*`) or Tamp's `X-Service-*`. */
  format: 'standard-webhooks' | 'x-service';
  /**
   * Deduplication help: `webhook-id` (stable across retries of one job event) for Standard
   * Webhooks; for `X-Service-*`, `<job id>:<event>`, which is what the spec says to dedupe on.
   */
  id: string;
  timestamp: number;
}

type Bytes = Uint8Array<ArrayBuffer>;

const UNIX_SECONDS = /^\d{1,15}$/;
const HEX_SHA256 = /^[0-9a-f]{64}$/i;

/**
 * Verifies a webhook delivery over its raw body, as received (re-serialised JSON does not
 * verify). Both signatures Tamp sends are understood; `webhook-signature` is preferred when
 * present because it carries one signature per valid secret during a rotation. Pass several
 * secrets (new and old) while rotating. Comparison is constant-time (WebCrypto's HMAC verify),
 * and deliveries 300 s or more away from now are refused (replay protection).
 * Throws WebhookVerificationError; works in Node.js, browsers and edge runtimes.
 */
export async function verifyWebhook(
  rawBody: string | Uint8Array | ArrayBuffer,
  headers: WebhookHeaders,
  secret: string | readonly string[],
  options: VerifyWebhookOptions = {},
): Promise<VerifiedWebhook> {
  const body = bytesOf(rawBody);
  const secrets = typeof secret === 'string' ? [secret] : secret;
  if (secrets.length === 0) throw new WebhookVerificationError('no secret to verify with');
  const header = headerReader(headers);
  const standardSignature = header('webhook-signature');
  const serviceSignature = header('x-service-signature');
  let verified: Omit<VerifiedWebhook, 'event'>;
  if (standardSignature !== undefined) {
    const id = header('webhook-id');
    if (id === undefined || id === '') throw new WebhookVerificationError('missing webhook-id');
    const timestamp = checkedTimestamp(header('webhook-timestamp'), 'webhook-timestamp', options);
    const given = standardSignature
      .split(' ')
      .filter((entry) => entry.startsWith('v1,'))
      .map((entry) => base64Bytes(entry.slice(3)))
      .filter((bytes) => bytes !== undefined);
    const signed = concat(new TextEncoder().encode(`${id}.${timestamp}.`), body);
    const keys = secrets.map((candidate) => standardWebhooksKey(candidate));
    if (!(await anyVerifies(keys, given, signed))) {
      throw new WebhookVerificationError('webhook-signature does not match');
    }
    verified = { format: 'standard-webhooks', id, timestamp };
  } else if (serviceSignature !== undefined) {
    const timestamp = checkedTimestamp(
      header('x-service-timestamp'),
      'X-Service-Timestamp',
      options,
    );
    const hex = serviceSignature.startsWith('sha256=') ? serviceSignature.slice(7) : '';
    if (!HEX_SHA256.test(hex)) {
      throw new WebhookVerificationError('malformed X-Service-Signature');
    }
    const signed = concat(new TextEncoder().encode(`${timestamp}.`), body);
    // The Tamp signature is keyed with the whole secret string, `whsec_` included.
    const keys = secrets.map((candidate) => new TextEncoder().encode(candidate));
    if (!(await anyVerifies(keys, [hexBytes(hex)], signed))) {
      throw new WebhookVerificationError('X-Service-Signature does not match');
    }
    verified = { format: 'x-service', id: '', timestamp };
  } else {
    throw new WebhookVerificationError(
      'no signature: expected webhook-signature or X-Service-Signature',
    );
  }
  let event: PublicWebhookEvent;
  try {
    event = JSON.parse(new TextDecoder().decode(body)) as PublicWebhookEvent;
  } catch {
    throw new WebhookVerificationError('the signed body is not JSON');
  }
  const id = verified.id === '' ? `${event.job?.id}:${event.event}` : verified.id;
  return { ...verified, id, event };
}

function headerReader(headers: WebhookHeaders): (name: string) => string | undefined {
  if (headers instanceof Headers) return (name) => headers.get(name) ?? undefined;
  const lowered = new Map(
    Object.entries(headers).map(([name, value]) => [
      name.toLowerCase(),
      typeof value === 'string' ? value : value?.[0],
    ]),
  );
  return (name) => lowered.get(name);
}

function checkedTimestamp(
  value: string | undefined,
  name: string,
  options: VerifyWebhookOptions,
): number {
  if (value === undefined || !UNIX_SECONDS.test(value)) {
    throw new WebhookVerificationError(`missing or malformed ${name}`);
  }
  const timestamp = Number(value);
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  const tolerance = options.toleranceSeconds ?? WEBHOOK_TOLERANCE_SECONDS;
  if (Math.abs(now - timestamp) >= tolerance) {
    throw new WebhookVerificationError(
      `${name} is ${Math.abs(now - timestamp)} s from now (tolerance ${tolerance} s)`,
    );
  }
  return timestamp;
}

/** Standard Webhooks keys are the base64 bytes after `whsec_` (the prefix is optional). */
function standardWebhooksKey(secret: string): Bytes {
  const key = base64Bytes(secret.startsWith('whsec_') ? secret.slice(6) : secret);
  if (key === undefined || key.byteLength === 0) {
    throw new WebhookVerificationError('the secret must be "whsec_" followed by base64');
  }
  return key;
}

async function anyVerifies(
  keys: readonly Bytes[],
  signatures: readonly Bytes[],
  signed: Bytes,
): Promise<boolean> {
  for (const raw of keys) {
    const key = await globalThis.crypto.subtle.importKey(
      'raw',
      raw,
      { name: 'HMAC', hash: 'SHA-256' },
      false,
      ['verify'],
    );
    for (const signature of signatures) {
      // HMAC verify compares in constant time, unlike comparing two computed strings.
      const ok = await globalThis.crypto.subtle.verify('HMAC', key, signature, signed);
      if (ok) return true;
    }
  }
  return false;
}

function bytesOf(body: string | Uint8Array | ArrayBuffer): Bytes {
  if (typeof body === 'string') return new TextEncoder().encode(body);
  // A copy: WebCrypto takes bytes over a plain ArrayBuffer, and Node's Buffers may share one.
  return new Uint8Array(body);
}

function concat(head: Bytes, tail: Bytes): Bytes {
  const joined = new Uint8Array(head.byteLength + tail.byteLength);
  joined.set(head, 0);
  joined.set(tail, head.byteLength);
  return joined;
}

function base64Bytes(text: string): Bytes | undefined {
  try {
    return Uint8Array.from(atob(text), (character) => character.charCodeAt(0));
  } catch {
    return undefined;
  }
}

function hexBytes(hex: string): Bytes {
  const bytes = new Uint8Array(hex.length / 2);
  for (let index = 0; index < bytes.length; index++) {
    bytes[index] = Number.parseInt(hex.slice(index * 2, index * 2 + 2), 16);
  }
  return bytes;
}
