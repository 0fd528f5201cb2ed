import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LOCAL_DEVELOPMENT_POLICY, newWebhookSecret } from '@tamp/proto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { deliverWebhook } from '../src/adapters/safe-http-client';
import { signDelivery } from '../src/domain/signature';
import { createTampWebhookHandler, type TampEvent, verifyTampDelivery } from './verify-delivery';

const secret = newWebhookSecret();

function payload(event: TampEvent['event'], jobId = 'job_01JD6ABCDEF'): Buffer {
  const completed: TampEvent = {
    event,
    job: {
      id: jobId,
      type: 'image',
      status: event === 'job.completed' ? 'completed' : 'failed',
      result:
        event === 'job.completed'
          ? {
              outputKey: `results/${jobId}/out.webp`,
              metrics: { inputSize: 2_000_000, outputSize: 500_000, compressionRatio: 4 },
            }
          : null,
      error: event === 'job.failed' ? 'unsupported colour profile' : null,
      createdAt: '2026-11-21T12:00:00.000Z',
      completedAt: '2026-11-21T12:00:03.000Z',
    },
  };
  return Buffer.from(JSON.stringify(completed));
}

function signedHeaders(
  body: Buffer,
  event: string,
  options: { key?: string; ageSec?: number } = {},
) {
  const timestamp = Math.floor(Date.now() / 1000) - (options.ageSec ?? 0);
  return {
    'content-type': 'application/json',
    'x-service-event': event,
    ...signDelivery({ secret: options.key ?? secret, body, timestamp, webhookId: `wh_${event}` }),
  };
}

describe('the receiver example, fed real signed deliveries', () => {
  let server: Server;
  let url: string;
  const handled: TampEvent[] = [];

  beforeAll(async () => {
    server = createServer(createTampWebhookHandler(secret, (event) => void handled.push(event)));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/tamp`;
  });
  beforeEach(() => {
    handled.length = 0;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const send = (body: Buffer, headers: Record<string, string>) =>
    deliverWebhook({ url, body, headers, policy: LOCAL_DEVELOPMENT_POLICY });

  it('accepts a genuine delivery and hands over the parsed event', async () => {
    const body = payload('job.completed');
    const result = await send(body, signedHeaders(body, 'job.completed'));
    expect(result).toMatchObject({ outcome: 'delivered', statusCode: 204 });
    expect(handled).toEqual([JSON.parse(body.toString('utf8'))]);
  });

  it('acknowledges a repeated delivery without handling it twice, per job id and event', async () => {
    const body = payload('job.completed', 'job_01JD6REPEAT');
    expect((await send(body, signedHeaders(body, 'job.completed'))).statusCode).toBe(204);
    // A retry is signed afresh, with a later timestamp, but carries the same event.
    const retry = await send(body, signedHeaders(body, 'job.completed'));
    expect(retry).toMatchObject({
      outcome: 'delivered',
      statusCode: 200,
      responseBody: 'duplicate',
    });
    const failed = payload('job.failed', 'job_01JD6REPEAT');
    expect((await send(failed, signedHeaders(failed, 'job.failed'))).statusCode).toBe(204);
    expect(handled.map((event) => `${event.job.id}:${event.event}`)).toEqual([
      'job_01JD6REPEAT:job.completed',
      'job_01JD6REPEAT:job.failed',
    ]);
  });

  it('rejects a tampered body, a foreign secret and a stale timestamp with 400', async () => {
    const body = payload('job.completed', 'job_01JD6BAD');
    const tampered = Buffer.from(
      body.toString('utf8').replace('"outputSize":500000', '"outputSize":5'),
    );
    const cases = [
      {
        body: tampered,
        headers: signedHeaders(body, 'job.completed'),
        reason: 'signature mismatch',
      },
      {
        body,
        headers: signedHeaders(body, 'job.completed', { key: newWebhookSecret() }),
        reason: 'signature mismatch',
      },
      {
        body,
        headers: signedHeaders(body, 'job.completed', { ageSec: 301 }),
        reason: '300-second window',
      },
    ];
    for (const { body: sent, headers, reason } of cases) {
      const result = await send(sent, headers);
      expect(result).toMatchObject({ outcome: 'failed', statusCode: 400 });
      expect(result.responseBody).toContain(reason);
    }
    expect(handled).toEqual([]);
  });
});

describe('verifyTampDelivery', () => {
  const body = payload('job.completed');
  const headers = signDelivery({ secret, body, timestamp: 1_800_000_000, webhookId: 'wh_1' });
  const asReceived = {
    'x-service-timestamp': headers['X-Service-Timestamp'],
    'x-service-signature': headers['X-Service-Signature'],
  };

  it('verifies the raw bytes and nothing else', () => {
    expect(verifyTampDelivery(body, asReceived, secret, 1_800_000_000)).toMatchObject({ ok: true });
    for (const position of [0, 17, body.length - 1]) {
      const flipped = Buffer.from(body);
      flipped[position] = (flipped[position] ?? 0) ^ 0x01;
      expect(verifyTampDelivery(flipped, asReceived, secret, 1_800_000_000).ok).toBe(false);
    }
    const reserialised = Buffer.from(JSON.stringify(JSON.parse(body.toString('utf8')), null, 1));
    expect(verifyTampDelivery(reserialised, asReceived, secret, 1_800_000_000).ok).toBe(false);
  });

  it('verifies a delivery signed during a secret rotation with the new secret', () => {
    const previous = newWebhookSecret();
    const rotating = signDelivery({
      secret,
      previousSecrets: [previous],
      body,
      timestamp: 1_800_000_000,
      webhookId: 'wh_1',
    });
    const received = {
      'x-service-timestamp': rotating['X-Service-Timestamp'],
      'x-service-signature': rotating['X-Service-Signature'],
    };
    expect(verifyTampDelivery(body, received, secret, 1_800_000_000)).toMatchObject({ ok: true });
    // The old secret verifies through webhook-signature (standardwebhooks), not this header.
    expect(verifyTampDelivery(body, received, previous, 1_800_000_000)).toEqual({
      ok: false,
      reason: 'signature mismatch',
    });
  });

  it('keeps to the 300-second window and needs both headers', () => {
    expect(verifyTampDelivery(body, asReceived, secret, 1_800_000_299).ok).toBe(true);
    expect(verifyTampDelivery(body, asReceived, secret, 1_800_000_300).ok).toBe(false);
    expect(verifyTampDelivery(body, asReceived, secret, 1_799_999_700).ok).toBe(false);
    expect(
      verifyTampDelivery(
        body,
        { 'x-service-timestamp': asReceived['x-service-timestamp'] },
        secret,
        1_800_000_000,
      ).ok,
    ).toBe(false);
  });
});
