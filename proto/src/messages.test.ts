import { describe, expect, it } from 'vitest';
import { compressionRatio, withCompressionRatio } from './messages';
import { newWebhookSecret, standardWebhooksKey, WEBHOOK_SECRET_PREFIX } from './secrets';

describe('compressionRatio', () => {
  it('is inputSize / outputSize to 3 decimals, and 0 for an empty output', () => {
    expect(compressionRatio(1000, 300)).toBe(3.333);
    expect(compressionRatio(100, 400)).toBe(0.25);
    expect(compressionRatio(10, 0)).toBe(0);
  });

  it("replaces whatever ratio a worker reported with this rule's", () => {
    const reported = {
      inputSize: 1000,
      outputSize: 300,
      compressionRatio: 3.3,
      operationsApplied: ['encode'],
      processingMs: 5,
    };
    expect(withCompressionRatio(reported)).toEqual({ ...reported, compressionRatio: 3.333 });
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
