import { newWebhookSecret } from '@tamp/proto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { signDelivery } from '../../../services/webhook/src/domain/signature';
import { WebhookVerificationError } from '../../src/errors';
import { verifyWebhook } from '../../src/webhooks';

const body = JSON.stringify({ event: 'job.completed', job: { id: 'job_1', status: 'completed' } });
const secret = newWebhookSecret();
const now = 1_800_000_000;

/** Headers exactly as the webhook service signs a delivery. */
function signed(
  options: { secret?: string; previous?: string[]; timestamp?: number } = {},
): Record<string, string> {
  return {
    ...signDelivery({
      secret: options.secret ?? secret,
      ...(options.previous !== undefined && { previousSecrets: options.previous }),
      body,
      timestamp: options.timestamp ?? now,
      webhookId: 'msg_job_1_job.completed',
    }),
  };
}

describe('verifyWebhook', () => {
  it('accepts the Standard Webhooks signature, as the official library does', async () => {
    const headers = signed();
    const verified = await verifyWebhook(body, headers, secret, { nowSeconds: now });
    expect(verified).toMatchObject({
      format: 'standard-webhooks',
      id: 'msg_job_1_job.completed',
      timestamp: now,
      event: { event: 'job.completed' },
    });
    // Cross-check: the reference verifier agrees on the same delivery (it checks against now).
    const fresh = signed({ timestamp: Math.floor(Date.now() / 1000) });
    expect(() => new Webhook(secret).verify(body, fresh)).not.toThrow();
    await expect(verifyWebhook(body, fresh, secret)).resolves.toBeDefined();
  });

  it('accepts X-Service-Signature alone, with Node and Fetch header shapes', async () => {
    const { 'X-Service-Timestamp': timestamp = '', 'X-Service-Signature': signature = '' } =
      signed();
    const node = { 'x-service-timestamp': timestamp, 'x-service-signature': [signature] };
    const verified = await verifyWebhook(Buffer.from(body), node, secret, { nowSeconds: now });
    expect(verified).toMatchObject({ format: 'x-service', id: 'job_1:job.completed' });
    const fetchHeaders = new Headers({
      'X-Service-Timestamp': timestamp,
      'X-Service-Signature': signature,
    });
    await expect(
      verifyWebhook(body, fetchHeaders, secret, { nowSeconds: now }),
    ).resolves.toBeDefined();
  });

  it('during a rotation, either secret verifies', async () => {
    const oldSecret = newWebhookSecret();
    const headers = signed({ previous: [oldSecret] });
    await expect(
      verifyWebhook(body, headers, oldSecret, { nowSeconds: now }),
    ).resolves.toBeDefined();
    await expect(verifyWebhook(body, headers, secret, { nowSeconds: now })).resolves.toBeDefined();
    // X-Service-Signature carries only the new secret's: a receiver passes both while switching.
    const {
      'webhook-signature': _,
      'webhook-id': __,
      'webhook-timestamp': ___,
      ...service
    } = headers;
    await expect(
      verifyWebhook(body, service, [oldSecret, secret], { nowSeconds: now }),
    ).resolves.toMatchObject({ format: 'x-service' });
    await expect(verifyWebhook(body, service, oldSecret, { nowSeconds: now })).rejects.toThrow(
      'does not match',
    );
  });

  it.each([
    ['a changed body', { body: body.replace('completed', 'failed!!!') }],
    ['another secret', { secret: newWebhookSecret() }],
    ['299 s is fine but 300 s is stale', { now: now + 300 }],
    ['a timestamp from the future', { now: now - 300 }],
    ['no signature headers', { headers: {} }],
  ])(
    'refuses %s',
    async (_name, change: {
      body?: string;
      secret?: string;
      now?: number;
      headers?: Record<string, string>;
    }) => {
      const headers = change.headers ?? signed();
      await expect(
        verifyWebhook(change.body ?? body, headers, change.secret ?? secret, {
          nowSeconds: change.now ?? now,
        }),
      ).rejects.toBeInstanceOf(WebhookVerificationError);
    },
  );

  it('accepts 299 s of clock difference', async () => {
    await expect(
      verifyWebhook(body, signed(), secret, { nowSeconds: now + 299 }),
    ).resolves.toBeDefined();
  });
});
