/**
 * Webhook signing secrets (docs/decisions.md#webhooks): `whsec_` + base64 of 32 random bytes, so
 * the same string keys Tamp's `X-Service-Signature` (as UTF-8) and, decoded, the Standard
 * Webhooks signature. Built on WebCrypto and `atob`/`btoa`, so servers and the browser client
 * share it.
 */
export const WEBHOOK_SECRET_PREFIX = 'whsec_';
const WEBHOOK_SECRET_BYTES = 32;
const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export function newWebhookSecret(): string {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(WEBHOOK_SECRET_BYTES));
  return WEBHOOK_SECRET_PREFIX + btoa(String.fromCharCode(...bytes));
}

/**
 * The Standard Webhooks key: the bytes the base64 after the prefix encodes. A malformed secret
 * throws: signatures no official verifier accepts must not be produced silently.
 */
export function standardWebhooksKey(secret: string): Uint8Array<ArrayBuffer> {
  if (!secret.startsWith(WEBHOOK_SECRET_PREFIX)) {
    throw new TypeError(`a webhook secret starts with "${WEBHOOK_SECRET_PREFIX}"`);
  }
  const encoded = secret.slice(WEBHOOK_SECRET_PREFIX.length);
  if (encoded.length === 0 || !STRICT_BASE64.test(encoded)) {
    throw new TypeError(`a webhook secret is "${WEBHOOK_SECRET_PREFIX}" followed by base64`);
  }
  return Uint8Array.from(atob(encoded), (char) => char.charCodeAt(0));
}
