import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { base62, displayPrefix, generateApiKey, hashApiKey, isWellFormedApiKey } from './api-key';

describe('API keys', () => {
  it('are sk_live_ plus 43 base62 digits (32 random bytes), all different', () => {
    const keys = new Set(Array.from({ length: 50 }, generateApiKey));
    expect(keys.size).toBe(50);
    for (const key of keys) {
      expect(key).toMatch(/^sk_live_[0-9A-Za-z]{43}$/);
      expect(isWellFormedApiKey(key)).toBe(true);
    }
  });

  it('encodes base62 without losing the extremes', () => {
    expect(base62(new Uint8Array(32), 43)).toBe('0'.repeat(43));
    expect(base62(new Uint8Array(32).fill(255), 43)).toHaveLength(43);
    expect(base62(Uint8Array.of(61), 2)).toBe('0z');
    expect(base62(Uint8Array.of(62), 2)).toBe('10');
  });

  it('rejects malformed keys before any lookup', () => {
    for (const key of ['', 'sk_live_', `sk_test_${'a'.repeat(43)}`, `sk_live_${'a'.repeat(42)}`]) {
      expect(isWellFormedApiKey(key)).toBe(false);
    }
    expect(isWellFormedApiKey(`sk_live_${'a'.repeat(42)}-`)).toBe(false);
  });

  it('hashes with SHA-256 hex and shows only a short prefix', () => {
    const key = generateApiKey();
    expect(hashApiKey(key)).toBe(createHash('sha256').update(key).digest('hex'));
    expect(displayPrefix(key)).toBe(key.slice(0, 12));
  });
});
