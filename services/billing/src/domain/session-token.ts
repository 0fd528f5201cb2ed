import { createHash, randomBytes } from 'node:crypto';
import { base62 } from './api-key';

/**
 * Dashboard bearer secrets. Each is a prefix (so a leaked one says what it is) and 43 base62
 * digits of 32 random bytes. Billing stores only their SHA-256: with 256 random bits a fast
 * unsalted hash is enough, and a lookup by hash compares no secret in application code.
 */
export const TOKEN_PREFIXES = {
  /** One-time sign-in link. */
  signInLink: 'tsl_',
  /** Dashboard session, held in an HttpOnly cookie by the gateway. */
  session: 'tss_',
} as const;
export type TokenKind = keyof typeof TOKEN_PREFIXES;

const TOKEN_BYTES = 32;
/** 62^43 > 2^256: every 32-byte value fits in 43 base62 digits. */
const BODY_LENGTH = 43;
const SESSION_ID_BYTES = 8;

export function newToken(kind: TokenKind, bytes: Uint8Array = randomBytes(TOKEN_BYTES)): string {
  return TOKEN_PREFIXES[kind] + base62(bytes, BODY_LENGTH);
}

/** Malformed tokens are refused before any lookup. */
export function isWellFormedToken(kind: TokenKind, value: string): boolean {
  const prefix = TOKEN_PREFIXES[kind];
  return (
    value.length === prefix.length + BODY_LENGTH &&
    value.startsWith(prefix) &&
    /^[0-9A-Za-z]+$/.test(value.slice(prefix.length))
  );
}

/** SHA-256 (hex): what is stored, and what a token is looked up by. */
export function tokenHash(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/**
 * Names a session in logs and views without being able to authenticate it: independent random
 * bytes, not derived from the token.
 */
export function newSessionId(bytes: Uint8Array = randomBytes(SESSION_ID_BYTES)): string {
  return `ses_${Buffer.from(bytes).toString('hex')}`;
}
