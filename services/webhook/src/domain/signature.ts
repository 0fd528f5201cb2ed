import { createHmac, timingSafeEqual } from 'node:crypto';
import { standardWebhooksKey, type WEBHOOK_DELIVERY_HEADERS } from '@tamp/proto';
import { Webhook } from 'standardwebhooks';

/** Receivers reject deliveries whose timestamp differs from now by this much or more (spec, Events). */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

const SERVICE_SIGNATURE_PREFIX = 'sha256=';
// Header values travel unescaped, so the id is limited to visible ASCII (no CR/LF injection).
const HEADER_SAFE_TOKEN = /^[\x21-\x7e]+$/;
const UNIX_SECONDS = /^\d{1,15}$/;
const HEX_SHA256 = /^[0-9a-f]{64}$/i;

export interface DeliverySignatureInput {
  /** The account secret exactly as the dashboard shows it: `whsec_` + base64. */
  secret: string;
  /**
   * Secrets a rotation replaced whose grace period has not ended: each adds a Standard Webhooks
   * signature after the current one, so receivers still holding an old secret keep verifying.
   */
  previousSecrets?: readonly string[];
  /** The exact bytes that will be sent as the request body. */
  body: Buffer | string;
  /** Unix time in seconds. */
  timestamp: number;
  /** Stable across the retries of one job event (Standard Webhooks `webhook-id`). */
  webhookId: string;
}

/** The delivery headers (named once, in proto's WEBHOOK_DELIVERY_HEADERS) a signature makes. */
export type DeliverySignatureHeaders = Pick<
  Record<keyof typeof WEBHOOK_DELIVERY_HEADERS, string>,
  | 'X-Service-Timestamp'
  | 'X-Service-Signature'
  | 'webhook-id'
  | 'webhook-timestamp'
  | 'webhook-signature'
>;

export interface ServiceSignatureCheck {
  secret: string;
  rawBody: Buffer | string;
  timestampHeader: string | undefined;
  signatureHeader: string | undefined;
  /** Defaults to the current time; injectable so the window is testable. */
  nowSec?: number;
  toleranceSec?: number;
}

/**
 * Signs one delivery the Tamp way (`X-Service-*`) and the Standard Webhooks way.
 * `X-Service-Signature` is exactly the spec's single `sha256=<hex>`, keyed with the current
 * secret. `webhook-signature` carries one signature per secret, current first
 * (`v1,<new> v1,<old>`): that header is defined as a list, and its verifiers accept a delivery
 * when any listed signature matches, so during a rotation's grace period it is the header that
 * verifies with either secret.
 */
export function signDelivery(input: DeliverySignatureInput): DeliverySignatureHeaders {
  const { timestamp, webhookId } = input;
  const secrets = [input.secret, ...(input.previousSecrets ?? [])];
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new TypeError('timestamp must be a non-negative integer number of seconds');
  }
  if (!HEADER_SAFE_TOKEN.test(webhookId)) {
    throw new TypeError('webhookId must be non-empty visible ASCII');
  }
  const body = toBytes(input.body);
  const timestampText = String(timestamp);
  const signedAt = new Date(timestamp * 1000);
  // proto's key check: the reference signer would decode any string it is given, and a
  // malformed secret must fail loudly rather than sign what no verifier accepts.
  const standardSignatures = secrets.map((secret) =>
    new Webhook(standardWebhooksKey(secret), { format: 'raw' }).sign(webhookId, signedAt, body),
  );
  return {
    'X-Service-Timestamp': timestampText,
    'X-Service-Signature': `${SERVICE_SIGNATURE_PREFIX}${serviceHmac(input.secret, timestampText, body).toString('hex')}`,
    'webhook-id': webhookId,
    'webhook-timestamp': timestampText,
    'webhook-signature': standardSignatures.join(' '),
  };
}

/**
 * Checks `X-Service-Signature` over the raw body bytes, in constant time, and refuses
 * timestamps `toleranceSec` or more away from now (replay protection).
 */
export function verifyServiceSignature(check: ServiceSignatureCheck): boolean {
  const { secret, timestampHeader, signatureHeader } = check;
  const nowSec = check.nowSec ?? Math.floor(Date.now() / 1000);
  const toleranceSec = check.toleranceSec ?? SIGNATURE_TOLERANCE_SECONDS;
  if (timestampHeader === undefined || !UNIX_SECONDS.test(timestampHeader)) return false;
  if (Math.abs(nowSec - Number(timestampHeader)) >= toleranceSec) return false;
  if (signatureHeader === undefined || !signatureHeader.startsWith(SERVICE_SIGNATURE_PREFIX)) {
    return false;
  }
  const givenHex = signatureHeader.slice(SERVICE_SIGNATURE_PREFIX.length);
  if (!HEX_SHA256.test(givenHex)) return false;
  const given = Buffer.from(givenHex, 'hex');
  const expected = serviceHmac(secret, timestampHeader, toBytes(check.rawBody));
  // timingSafeEqual throws on unequal lengths; the guard keeps that a plain `false`.
  return given.length === expected.length && timingSafeEqual(given, expected);
}

// The Tamp signature is keyed with the secret string itself (UTF-8), prefix included, as Stripe does.
function serviceHmac(secret: string, timestampText: string, body: Buffer): Buffer {
  return createHmac('sha256', Buffer.from(secret, 'utf8'))
    .update(`${timestampText}.`)
    .update(body)
    .digest();
}

function toBytes(body: Buffer | string): Buffer {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
}
