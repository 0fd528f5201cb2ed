import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isWellFormedToken, newSessionId, newToken, tokenHash } from './session-token';

describe('dashboard tokens', () => {
  it('are tsl_ or tss_ plus 43 base62 digits of 32 random bytes, all different', () => {
    for (const [kind, prefix] of [
      ['signInLink', 'tsl_'],
      ['session', 'tss_'],
    ] as const) {
      const tokens = new Set(Array.from({ length: 50 }, () => newToken(kind)));
      expect(tokens.size).toBe(50);
      for (const token of tokens) {
        expect(token).toMatch(new RegExp(`^${prefix}[0-9A-Za-z]{43}$`));
        expect(isWellFormedToken(kind, token)).toBe(true);
      }
    }
  });

  it('encode the bytes they are given, the extremes included', () => {
    expect(newToken('session', new Uint8Array(32))).toBe(`tss_${'0'.repeat(43)}`);
    expect(newToken('signInLink', new Uint8Array(32).fill(255))).toHaveLength(4 + 43);
  });

  it('are refused when malformed or of the other kind, before any lookup', () => {
    const session = newToken('session');
    const link = newToken('signInLink');
    expect(isWellFormedToken('signInLink', session)).toBe(false);
    expect(isWellFormedToken('session', link)).toBe(false);
    for (const value of [
      '',
      'tss_',
      session.slice(0, -1),
      `${session}0`,
      `${session.slice(0, -1)}-`,
    ]) {
      expect(isWellFormedToken('session', value)).toBe(false);
    }
    expect(isWellFormedToken('session', `tss_${'é'.repeat(43)}`)).toBe(false);
  });

  it('are stored as their SHA-256 in hex', () => {
    const token = newToken('session');
    expect(tokenHash(token)).toBe(createHash('sha256').update(token).digest('hex'));
    expect(tokenHash(token)).toMatch(/^[0-9a-f]{64}$/);
    expect(tokenHash(token)).not.toBe(tokenHash(newToken('session')));
  });

  it('name sessions with an id unrelated to the token', () => {
    expect(newSessionId(Uint8Array.of(0, 1, 2, 3, 4, 5, 6, 255))).toBe('ses_00010203040506ff');
    expect(newSessionId()).toMatch(/^ses_[0-9a-f]{16}$/);
    expect(newSessionId()).not.toBe(newSessionId());
  });
});
