import { createHash, randomBytes } from 'node:crypto';

export const API_KEY_PREFIX = 'sk_live_';
const KEY_BYTES = 32;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** 62^43 > 2^256: every 32-byte value fits in 43 base62 digits (left-padded with '0'). */
const BODY_LENGTH = 43;
const API_KEY_PATTERN = new RegExp(`^${API_KEY_PREFIX}[0-9A-Za-z]{${BODY_LENGTH}}$`);
/** Enough for people to tell keys apart, far too little to guess the rest. */
const DISPLAY_PREFIX_LENGTH = 12;

export function base62(bytes: Uint8Array, length: number): string {
  let value = BigInt(`0x${Buffer.from(bytes).toString('hex') || '0'}`);
  let digits = '';
  while (value > 0n) {
    digits = BASE62[Number(value % 62n)] + digits;
    value /= 62n;
  }
  return digits.padStart(length, '0');
}

export function generateApiKey(): string {
  return API_KEY_PREFIX + base62(randomBytes(KEY_BYTES), BODY_LENGTH);
}

/** Malformed keys are rejected before any lookup. */
export function isWellFormedApiKey(value: string): boolean {
  return API_KEY_PATTERN.test(value);
}

/** SHA-256 (hex): keys carry 256 random bits, so a fast unsalted hash is enough to store. */
export function hashApiKey(apiKey: string): string {
  return createHash('sha256').update(apiKey, 'utf8').digest('hex');
}

export function displayPrefix(apiKey: string): string {
  return apiKey.slice(0, DISPLAY_PREFIX_LENGTH);
}

/**
 * How precisely a key's last use is kept: a busy key then costs one write a minute rather than
 * one per request.
 */
export const KEY_USE_RESOLUTION_MS = 60_000;

/** The start of the minute `now` falls in (epoch milliseconds): what `lastUsedAt` records. */
export function keyUseMinute(now: Date): number {
  return now.getTime() - (now.getTime() % KEY_USE_RESOLUTION_MS);
}
