import { createHash } from 'node:crypto';

/** JSON with object keys sorted at every level, so equal bodies hash equally. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, entry]) => entry !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, entry]) => `${JSON.stringify(key)}:${canonicalJson(entry)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** SHA-256 over the endpoint and the canonical body: a reused Idempotency-Key is detected by it. */
export function requestHash(endpoint: string, body: unknown): string {
  return createHash('sha256')
    .update(endpoint)
    .update('\n')
    .update(canonicalJson(body))
    .digest('hex');
}
