import { describe, expect, it } from 'vitest';
import { compressionRatio } from './messages';
import { newWebhookSecret, standardWebhooksKey, WEBHOOK_SECRET_PREFIX } from './secrets';

describe('compressionRatio', () => {
  it('is inputSize / outputSize to 3 decimals, and 0 for an empty output', () => {
    expect(compressionRatio(1000, 300)).toBe(3.333);
    expect(compressionRatio(100, 400)).toBe(0.25);
    expect(compressionRatio(10, 0)).toBe(0);
  });
});

describe('webhook secrets', () => {
  it('are whsec_ + base64 of 32 random bytes, whose decoded bytes key Standard Webhooks', () => {
    const secret = newWebhookSecret();
    expect(secret.startsWith(WEBHOOK_SECRET_PREFIX)).toBe(true);
    expect(standardWebhooksKey(secret)).toHaveLength(32);
    expect(newWebhookSecret()).not.toBe(secret);
    expect(() => standardWebhooksKey('whsec_not base64!')).toThrow(TypeError);
    expect(() => standardWebhooksKey('sk_live_abc')).toThrow(TypeError);
  });
});
