import { createHmac } from 'node:crypto';
import { newWebhookSecret } from '@tamp/proto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { signDelivery, verifyServiceSignature } from './signature';

const secret = `whsec_${Buffer.from('tamp-test-signing-key-32-bytes!!').toString('base64')}`;
const body = Buffer.from(
  JSON.stringify({
    event: 'job.completed',
    job: { id: 'job_01JD5ZQ7Y8K9', type: 'text', status: 'completed', error: null },
  }),
);
const nowSec = 1_732_190_400;
const webhookId = 'job_01JD5ZQ7Y8K9.job.completed';

function signed(overrides: Partial<Parameters<typeof signDelivery>[0]> = {}) {
  return signDelivery({ secret, body, timestamp: nowSec, webhookId, ...overrides });
}

function verify(rawBody: Buffer | string, headers = signed(), at = nowSec): boolean {
  return verifyServiceSignature({
    secret,
    rawBody,
    timestampHeader: headers['X-Service-Timestamp'],
    signatureHeader: headers['X-Service-Signature'],
    nowSec: at,
  });
}

describe('signDelivery', () => {
  it('signs "<timestamp>.<raw body>" with the secret string as the key, in hex', () => {
    const headers = signed();
    const expected = createHmac('sha256', secret).update(`${nowSec}.${body}`).digest('hex');
    expect(headers['X-Service-Timestamp']).toBe(String(nowSec));
    expect(headers['X-Service-Signature']).toBe(`sha256=${expected}`);
  });

  it('produces the same signature for the body given as string or as bytes', () => {
    expect(signed({ body: body.toString('utf8') })).toEqual(signed());
  });

  it('produces Standard Webhooks headers that the official verifier accepts', () => {
    const headers = signed({ timestamp: Math.floor(Date.now() / 1000) });
    expect(headers['webhook-id']).toBe(webhookId);
    expect(headers['webhook-timestamp']).toBe(headers['X-Service-Timestamp']);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    const payload = new Webhook(secret).verify(body, { ...headers });
    expect(payload).toEqual(JSON.parse(body.toString('utf8')));
  });

  it('is rejected by the official verifier once the body or the id changes', () => {
    const headers = signed({ timestamp: Math.floor(Date.now() / 1000) });
    const tampered = Buffer.from(body);
    tampered[10] = (tampered[10] ?? 0) ^ 0x01;
    expect(() => new Webhook(secret).verify(tampered, { ...headers })).toThrow();
    expect(() =>
      new Webhook(secret).verify(body, { ...headers, 'webhook-id': 'job_other.job.completed' }),
    ).toThrow();
  });

  it('refuses malformed secrets, timestamps and ids instead of signing them', () => {
    expect(() => signed({ secret: 'sk_live_abc' })).toThrow(/whsec_/);
    expect(() => signed({ secret: 'whsec_' })).toThrow(/base64/);
    expect(() => signed({ secret: 'whsec_not base64!' })).toThrow(/base64/);
    expect(() => signed({ timestamp: 1.5 })).toThrow(/timestamp/);
    expect(() => signed({ timestamp: -1 })).toThrow(/timestamp/);
    expect(() => signed({ webhookId: '' })).toThrow(/webhookId/);
    expect(() => signed({ webhookId: 'a\r\nX-Injected: 1' })).toThrow(/webhookId/);
  });
});

describe('verifyServiceSignature', () => {
  it('accepts the untouched raw body', () => {
    expect(verify(body)).toBe(true);
    expect(verify(body.toString('utf8'))).toBe(true);
  });

  it('rejects the body after flipping any single byte', () => {
    const positions = [
      0,
      1,
      Math.floor(body.length / 3),
      Math.floor(body.length / 2),
      body.length - 1,
    ];
    for (const position of positions) {
      const tampered = Buffer.from(body);
      tampered[position] = (tampered[position] ?? 0) ^ 0x20;
      expect(verify(tampered), `byte ${position} flipped`).toBe(false);
    }
  });

  it('rejects a re-serialised body even when it means the same JSON', () => {
    const reserialised = JSON.stringify(JSON.parse(body.toString('utf8')), null, 2);
    expect(verify(reserialised)).toBe(false);
  });

  it('rejects a changed timestamp header', () => {
    const headers = signed();
    expect(verify(body, { ...headers, 'X-Service-Timestamp': String(nowSec + 1) })).toBe(false);
    expect(verify(body, { ...headers, 'X-Service-Timestamp': ` ${nowSec}` })).toBe(false);
  });

  it('rejects a wrong secret, a truncated or mangled signature and missing headers', () => {
    const headers = signed();
    const signature = headers['X-Service-Signature'];
    expect(
      verifyServiceSignature({
        secret: newWebhookSecret(),
        rawBody: body,
        timestampHeader: headers['X-Service-Timestamp'],
        signatureHeader: signature,
        nowSec,
      }),
    ).toBe(false);
    expect(verify(body, { ...headers, 'X-Service-Signature': signature.slice(0, -2) })).toBe(false);
    expect(verify(body, { ...headers, 'X-Service-Signature': `${signature}00` })).toBe(false);
    expect(verify(body, { ...headers, 'X-Service-Signature': signature.slice(7) })).toBe(false);
    expect(
      verifyServiceSignature({
        secret,
        rawBody: body,
        timestampHeader: undefined,
        signatureHeader: signature,
        nowSec,
      }),
    ).toBe(false);
    expect(
      verifyServiceSignature({
        secret,
        rawBody: body,
        timestampHeader: headers['X-Service-Timestamp'],
        signatureHeader: undefined,
        nowSec,
      }),
    ).toBe(false);
  });

  it('accepts an upper-case hex signature', () => {
    const headers = signed();
    const upper = `sha256=${headers['X-Service-Signature'].slice(7).toUpperCase()}`;
    expect(verify(body, { ...headers, 'X-Service-Signature': upper })).toBe(true);
  });

  it('accepts timestamps less than 300 s away and rejects 300 s or more, either way', () => {
    expect(verify(body, signed(), nowSec + 299)).toBe(true);
    expect(verify(body, signed(), nowSec - 299)).toBe(true);
    expect(verify(body, signed(), nowSec + 300)).toBe(false);
    expect(verify(body, signed(), nowSec - 300)).toBe(false);
    expect(verify(body, signed(), nowSec + 86_400)).toBe(false);
  });

  it('uses the current time when none is given', () => {
    const headers = signed({ timestamp: Math.floor(Date.now() / 1000) });
    const check = {
      secret,
      rawBody: body,
      timestampHeader: headers['X-Service-Timestamp'],
      signatureHeader: headers['X-Service-Signature'],
    };
    expect(verifyServiceSignature(check)).toBe(true);
    const old = signed({ timestamp: Math.floor(Date.now() / 1000) - 301 });
    expect(
      verifyServiceSignature({
        ...check,
        timestampHeader: old['X-Service-Timestamp'],
        signatureHeader: old['X-Service-Signature'],
      }),
    ).toBe(false);
  });
});

describe('signing during a secret rotation', () => {
  const previous = newWebhookSecret();
  const stranger = newWebhookSecret();
  const timestamp = Math.floor(Date.now() / 1000);
  const headers = signDelivery({ secret, previousSecrets: [previous], body, timestamp, webhookId });
  const check = (key: string) =>
    verifyServiceSignature({
      secret: key,
      rawBody: body,
      timestampHeader: headers['X-Service-Timestamp'],
      signatureHeader: headers['X-Service-Signature'],
    });

  it('lists one Standard Webhooks signature per secret, current first; X-Service-Signature stays single', () => {
    const current = signDelivery({ secret, body, timestamp, webhookId });
    const old = signDelivery({ secret: previous, body, timestamp, webhookId });
    expect(headers['webhook-signature']).toBe(
      `${current['webhook-signature']} ${old['webhook-signature']}`,
    );
    // The spec defines exactly one `sha256=<hex>`, keyed with the account's (current) secret.
    expect(headers['X-Service-Signature']).toBe(current['X-Service-Signature']);
    expect(headers['X-Service-Signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
  });

  it('verifies the Standard Webhooks way with either secret, and not with any other', () => {
    for (const key of [secret, previous]) {
      expect(new Webhook(key).verify(body, { ...headers })).toEqual(
        JSON.parse(body.toString('utf8')),
      );
    }
    expect(() => new Webhook(stranger).verify(body, { ...headers })).toThrow();
    expect(check(secret)).toBe(true);
    expect(check(previous)).toBe(false);
    expect(check(stranger)).toBe(false);
  });

  it('refuses a list in X-Service-Signature: the header is one signature', () => {
    const listed = `${headers['X-Service-Signature']},${headers['X-Service-Signature']}`;
    expect(
      verifyServiceSignature({
        secret,
        rawBody: body,
        timestampHeader: headers['X-Service-Timestamp'],
        signatureHeader: listed,
      }),
    ).toBe(false);
  });
});

describe("proto's newWebhookSecret", () => {
  it('is whsec_ plus base64 of 32 random bytes, different every time', () => {
    const first = newWebhookSecret();
    const second = newWebhookSecret();
    expect(first).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(first.slice(6), 'base64')).toHaveLength(32);
    expect(first).not.toBe(second);
  });

  it('produces secrets that sign verifiable deliveries both ways', () => {
    const fresh = newWebhookSecret();
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = signDelivery({ secret: fresh, body, timestamp, webhookId });
    expect(new Webhook(fresh).verify(body, { ...headers })).toBeTruthy();
    expect(
      verifyServiceSignature({
        secret: fresh,
        rawBody: body,
        timestampHeader: headers['X-Service-Timestamp'],
        signatureHeader: headers['X-Service-Signature'],
      }),
    ).toBe(true);
  });
});
