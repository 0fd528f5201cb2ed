import { randomBytes } from 'node:crypto';
import { newWebhookSecret } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { SecretSealer, secretInGrace } from './webhook-secret';

describe('webhook secrets', () => {
  it('are whsec_ plus base64 of 32 random bytes', () => {
    const secret = newWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
  });

  it('are sealed with AES-256-GCM when a key is configured, and opened again', () => {
    const sealer = new SecretSealer(randomBytes(32));
    const secret = newWebhookSecret();
    const sealed = sealer.seal(secret);
    expect(sealed).not.toContain(secret.slice(6));
    expect(sealer.seal(secret)).not.toBe(sealed);
    expect(sealer.open(sealed)).toBe(secret);
  });

  it('detects tampering and a wrong key', () => {
    const sealed = new SecretSealer(randomBytes(32)).seal(newWebhookSecret());
    expect(() => new SecretSealer(randomBytes(32)).open(sealed)).toThrow();
    expect(() => new SecretSealer(null).open(sealed)).toThrow(/SECRETS_ENCRYPTION_KEY/);
  });

  it('stay plain without a key, and plain values still open once a key is configured', () => {
    const secret = newWebhookSecret();
    expect(new SecretSealer(null).seal(secret)).toBe(secret);
    expect(new SecretSealer(randomBytes(32)).open(secret)).toBe(secret);
  });
});

describe('secretInGrace', () => {
  const validUntil = new Date('2025-01-16T12:00:00Z');
  const retired = { secret: 'enc:v1:…', validUntil };

  it('keeps a retired secret until, not including, validUntil', () => {
    expect(secretInGrace(retired, new Date(validUntil.getTime() - 1))).toBe(retired);
    expect(secretInGrace(retired, validUntil)).toBeNull();
    expect(secretInGrace(retired, new Date('2025-02-01T00:00:00Z'))).toBeNull();
  });

  it('is null for accounts never rotated', () => {
    expect(secretInGrace(null, validUntil)).toBeNull();
    expect(secretInGrace(undefined, validUntil)).toBeNull();
  });
});
