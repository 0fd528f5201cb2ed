import type { ServerResponse } from 'node:http';
import { LOCAL_DEVELOPMENT_POLICY, PRODUCTION_POLICY, type TargetPolicy } from '@tamp/proto';
import { afterEach, describe, expect, it } from 'vitest';
import type { HostnameResolver } from '../src/adapters/hostname-resolver';
import { deliverWebhook, type WebhookDeliveryRequest } from '../src/adapters/safe-http-client';
import { signDelivery, verifyServiceSignature } from '../src/domain/signature';
import {
  type LoopbackReceiver,
  startReceiver,
  watchConnectionAttempts,
} from './support/loopback-receiver';

const secret = `whsec_${Buffer.from('safe-http-client-test-secret-32b').toString('base64')}`;
const body = Buffer.from('{"event":"job.completed","job":{"id":"job_01TEST","type":"text"}}');
/** http allowed, but nothing allow-listed: loopback is refused. */
const HTTP_PUBLIC_ONLY: TargetPolicy = { allowHttp: true, allowCidrs: [] };

const receivers: LoopbackReceiver[] = [];
async function receiver(
  handler: Parameters<typeof startReceiver>[0],
  options?: Parameters<typeof startReceiver>[1],
): Promise<LoopbackReceiver> {
  const started = await startReceiver(handler, options);
  receivers.push(started);
  return started;
}
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

function answer(status: number, text = '', headers: Record<string, string> = {}) {
  return (_request: unknown, response: ServerResponse) => {
    response.writeHead(status, { 'content-type': 'text/plain', ...headers });
    response.end(text);
  };
}

function deliver(url: string, overrides: Partial<WebhookDeliveryRequest> = {}) {
  return deliverWebhook({
    url,
    body,
    headers: { 'content-type': 'application/json' },
    policy: LOCAL_DEVELOPMENT_POLICY,
    ...overrides,
  });
}

/** A fake DNS that answers from a table and counts its lookups. */
function fakeDns(answers: Record<string, string[] | ((call: number) => string[])>) {
  let calls = 0;
  const resolve: HostnameResolver = async (hostname) => {
    calls += 1;
    const entry = answers[hostname];
    if (entry === undefined) {
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    }
    return typeof entry === 'function' ? entry(calls) : entry;
  };
  return { resolve, calls: () => calls };
}

describe('delivery under the local development policy', () => {
  it('POSTs the exact signed bytes to a loopback receiver, which verifies them', async () => {
    const target = await receiver(answer(200, 'ok'));
    const timestamp = Math.floor(Date.now() / 1000);
    const signature = signDelivery({
      secret,
      body,
      timestamp,
      webhookId: 'job_01TEST.job.completed',
    });
    const result = await deliver(`${target.origin}/hooks/tamp?source=test`, {
      headers: {
        'content-type': 'application/json',
        'x-service-event': 'job.completed',
        ...signature,
      },
    });

    expect(result).toMatchObject({ outcome: 'delivered', statusCode: 200, responseBody: 'ok' });
    expect(result.error).toBeUndefined();
    expect(result.latencyMs).toBeGreaterThanOrEqual(0);
    expect(target.requests).toHaveLength(1);
    const [received] = target.requests;
    expect(received?.method).toBe('POST');
    expect(received?.url).toBe('/hooks/tamp?source=test');
    expect(received?.body.equals(body)).toBe(true);
    expect(received?.headers['x-service-event']).toBe('job.completed');
    expect(
      verifyServiceSignature({
        secret,
        rawBody: received?.body ?? Buffer.alloc(0),
        timestampHeader: received?.headers['x-service-timestamp'] as string,
        signatureHeader: received?.headers['x-service-signature'] as string,
      }),
    ).toBe(true);
    // Nothing is kept open after the attempt.
    await target.allConnectionsClosed();
  });

  it('reaches an IPv6 loopback literal and a name the system resolves to loopback', async () => {
    const v6 = await receiver(answer(204), { host: '::1' });
    expect(await deliver(`${v6.origin}/`)).toMatchObject({ outcome: 'delivered', statusCode: 204 });
    const v4 = await receiver(answer(202));
    const byName = await deliver(`http://localhost:${v4.port}/`);
    expect(byName).toMatchObject({ outcome: 'delivered', statusCode: 202 });
    expect(v4.requests[0]?.headers.host).toBe(`localhost:${v4.port}`);
  });

  it('records 4xx and 5xx answers as failed, with the status and the start of the body', async () => {
    const rejecting = await receiver(answer(400, 'bad signature'));
    expect(await deliver(rejecting.origin)).toMatchObject({
      outcome: 'failed',
      statusCode: 400,
      responseBody: 'bad signature',
      error: expect.stringContaining('400'),
    });
    const broken = await receiver(answer(500, 'oops'));
    expect(await deliver(broken.origin)).toMatchObject({
      outcome: 'failed',
      statusCode: 500,
      error: expect.stringContaining('500'),
    });
  });

  it('hands back Retry-After from 429 and 503 only', async () => {
    const limited = await receiver(answer(429, '', { 'retry-after': '7' }));
    expect(await deliver(limited.origin)).toMatchObject({
      outcome: 'failed',
      statusCode: 429,
      retryAfter: '7',
    });
    const date = 'Sat, 21 Nov 2026 13:00:00 GMT';
    const unavailable = await receiver(answer(503, '', { 'retry-after': date }));
    expect(await deliver(unavailable.origin)).toMatchObject({ statusCode: 503, retryAfter: date });
    const other = await receiver(answer(500, '', { 'retry-after': '7' }));
    const result = await deliver(other.origin);
    expect(result.statusCode).toBe(500);
    expect(result.retryAfter).toBeUndefined();
  });

  it.each([301, 302, 303, 307, 308])(
    'records a %i as failed and never requests its Location',
    async (status) => {
      const inward = await receiver(answer(200, 'should never be reached'));
      const redirecting = await receiver(
        answer(status, '', { location: `${inward.origin}/internal/admin` }),
      );
      const result = await deliver(`${redirecting.origin}/hook`);
      expect(result).toMatchObject({
        outcome: 'failed',
        statusCode: status,
        error: expect.stringContaining('not followed'),
      });
      expect(redirecting.requests).toHaveLength(1);
      expect(inward.requests).toHaveLength(0);
      expect(inward.connectionCount()).toBe(0);
    },
  );

  it('cuts a receiver that never answers at the deadline and drops the connection', async () => {
    const silent = await receiver(() => {});
    const result = await deliver(silent.origin, { timeoutMs: 300 });
    expect(result).toMatchObject({ outcome: 'failed', error: expect.stringContaining('deadline') });
    expect(result.statusCode).toBeUndefined();
    expect(silent.requests).toHaveLength(1);
    await silent.allConnectionsClosed();
  });

  it('cuts a body that trickles past the deadline, keeping the 2xx it answered', async () => {
    let trickle: NodeJS.Timeout | undefined;
    const slow = await receiver((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.write('a');
      trickle = setInterval(() => response.write('a'), 20);
      response.on('close', () => clearInterval(trickle));
    });
    try {
      const result = await deliver(slow.origin, { timeoutMs: 400 });
      expect(result).toMatchObject({
        outcome: 'delivered',
        statusCode: 200,
        responseCut: 'deadline',
      });
      expect(result.responseBody).toMatch(/^a+$/);
      await slow.allConnectionsClosed();
    } finally {
      clearInterval(trickle);
    }
  });

  it('reads a huge body only up to the cap, then drops the connection', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const limitBytes = 1024 * 1024 * 1024;
    let written = 0;
    let responseClosed = false;
    const flood = await receiver((_request, response) => {
      response.writeHead(500, { 'content-type': 'text/plain' });
      response.on('close', () => {
        responseClosed = true;
      });
      const pump = () => {
        while (!response.destroyed && written < limitBytes) {
          written += chunk.length;
          if (!response.write(chunk)) {
            response.once('drain', pump);
            return;
          }
        }
        if (!response.destroyed) response.end();
      };
      pump();
    });
    const result = await deliver(flood.origin, { timeoutMs: 10_000 });
    expect(result).toMatchObject({ outcome: 'failed', statusCode: 500, responseCut: 'size-limit' });
    expect(result.responseBody).toBe('x'.repeat(4096));
    expect(result.error).not.toContain('deadline');
    await flood.allConnectionsClosed();
    expect(responseClosed).toBe(true);
    expect(written).toBeLessThan(limitBytes);
  });

  it('honours a custom cap and does not mark a body that fits as cut', async () => {
    const exact = await receiver(answer(200, 'y'.repeat(4096)));
    const whole = await deliver(exact.origin);
    expect(whole.responseBody).toHaveLength(4096);
    expect(whole.responseCut).toBeUndefined();
    const capped = await deliver(exact.origin, { maxResponseBytes: 10 });
    expect(capped).toMatchObject({ responseBody: 'y'.repeat(10), responseCut: 'size-limit' });
  });

  it('keeps a 2xx whose body breaks off, and fails a 5xx whose body does', async () => {
    const breakingOff = (status: number) =>
      receiver((_request, response) => {
        response.writeHead(status, { 'content-type': 'text/plain', 'content-length': '1000' });
        response.write('partial', () => response.socket?.destroy());
      });
    const ok = await deliver((await breakingOff(200)).origin);
    expect(ok).toMatchObject({
      outcome: 'delivered',
      statusCode: 200,
      responseBody: 'partial',
      responseCut: 'connection-error',
    });
    const broken = await deliver((await breakingOff(503)).origin);
    expect(broken).toMatchObject({
      outcome: 'failed',
      statusCode: 503,
      responseCut: 'connection-error',
    });
  });

  it('rejects nonsensical limits as programming errors', async () => {
    await expect(deliver('http://127.0.0.1/', { timeoutMs: 0 })).rejects.toThrow(RangeError);
    await expect(deliver('http://127.0.0.1/', { maxResponseBytes: -1 })).rejects.toThrow(
      RangeError,
    );
  });

  it('records a closed port and an unresolvable name as failed, to be retried', async () => {
    const gone = await receiver(answer(200));
    await gone.close();
    const refusedPort = await deliver(gone.origin);
    expect(refusedPort).toMatchObject({
      outcome: 'failed',
      error: expect.stringContaining('ECONNREFUSED'),
    });
    const dns = fakeDns({});
    const unresolvable = await deliver('http://nowhere.example/', { resolveHostname: dns.resolve });
    expect(unresolvable).toMatchObject({
      outcome: 'failed',
      error: expect.stringContaining('ENOTFOUND'),
    });
  });

  it('applies the deadline to a DNS lookup that never returns', async () => {
    const hanging: HostnameResolver = () => new Promise(() => {});
    const result = await deliver('http://slow-dns.example/', {
      resolveHostname: hanging,
      timeoutMs: 200,
    });
    expect(result).toMatchObject({ outcome: 'failed', error: expect.stringContaining('deadline') });
  });
});

describe('refused targets', () => {
  it('(control) the connection watcher does see an allowed delivery connect', async () => {
    const local = await receiver(answer(200));
    const watch = watchConnectionAttempts();
    try {
      expect((await deliver(local.origin)).outcome).toBe('delivered');
      expect(watch.announced()).toBe(1);
      expect(watch.sockets()).toBe(1);
    } finally {
      watch.stop();
    }
  });

  it.each([
    ['http://10.0.0.1/', HTTP_PUBLIC_ONLY],
    ['https://10.0.0.1/', PRODUCTION_POLICY],
    ['http://169.254.169.254/latest/meta-data/', LOCAL_DEVELOPMENT_POLICY],
    ['http://[fd00::1]/', LOCAL_DEVELOPMENT_POLICY],
    ['http://[fd00:ec2::254]/', LOCAL_DEVELOPMENT_POLICY],
    ['http://[64:ff9b::a9fe:a9fe]/', LOCAL_DEVELOPMENT_POLICY],
    ['http://0.0.0.0/', LOCAL_DEVELOPMENT_POLICY],
    ['http://192.168.1.1/', LOCAL_DEVELOPMENT_POLICY],
    ['http://100.64.0.1/', LOCAL_DEVELOPMENT_POLICY],
  ] as const)('refuses %s before any connection attempt', async (url, policy) => {
    const watch = watchConnectionAttempts();
    try {
      const result = await deliver(url, { policy });
      expect(result.outcome).toBe('refused');
      expect(result.error).toBeTruthy();
      expect(result.statusCode).toBeUndefined();
      expect(watch.announced()).toBe(0);
      expect(watch.sockets()).toBe(0);
    } finally {
      watch.stop();
    }
  });

  it('refuses loopback receivers, however written, when loopback is not allow-listed', async () => {
    const v4 = await receiver(answer(200));
    const v6 = await receiver(answer(200), { host: '::1' });
    const watch = watchConnectionAttempts();
    try {
      for (const url of [
        `http://127.0.0.1:${v4.port}/`,
        `http://[::1]:${v6.port}/`,
        `http://[::ffff:127.0.0.1]:${v4.port}/`,
        `http://[::ffff:7f00:1]:${v4.port}/`,
        `http://2130706433:${v4.port}/`,
        `http://127.1:${v4.port}/`,
      ]) {
        const result = await deliver(url, { policy: HTTP_PUBLIC_ONLY });
        expect(result, url).toMatchObject({
          outcome: 'refused',
          error: expect.stringContaining('loopback'),
        });
      }
      expect(watch.announced()).toBe(0);
      expect(watch.sockets()).toBe(0);
    } finally {
      watch.stop();
    }
    expect(v4.connectionCount()).toBe(0);
    expect(v6.connectionCount()).toBe(0);
  });

  it('refuses localhost, which the system resolver maps to loopback, without connecting', async () => {
    const local = await receiver(answer(200));
    const watch = watchConnectionAttempts();
    try {
      const result = await deliver(`http://localhost:${local.port}/`, { policy: HTTP_PUBLIC_ONLY });
      expect(result).toMatchObject({
        outcome: 'refused',
        error: expect.stringMatching(/localhost resolves to .*loopback/),
      });
      // undici got as far as asking the connector, which refused before making a socket.
      expect(watch.announced()).toBe(1);
      expect(watch.sockets()).toBe(0);
    } finally {
      watch.stop();
    }
    expect(local.connectionCount()).toBe(0);
  });

  it('refuses a name that resolves to loopback, over http and https, opening no socket', async () => {
    const local = await receiver(answer(200));
    const dns = fakeDns({ 'evil.example': ['127.0.0.1'] });
    const watch = watchConnectionAttempts();
    for (const url of [
      `http://evil.example:${local.port}/`,
      `https://evil.example:${local.port}/`,
    ]) {
      const result = await deliver(url, { policy: HTTP_PUBLIC_ONLY, resolveHostname: dns.resolve });
      expect(result, url).toMatchObject({
        outcome: 'refused',
        error: expect.stringContaining('evil.example resolves to 127.0.0.1'),
      });
    }
    watch.stop();
    expect(watch.sockets()).toBe(0);
    expect(local.connectionCount()).toBe(0);
  });

  it('refuses a name when ANY of its addresses is refused, even after an allowed one', async () => {
    const allowed = await receiver(answer(200), { host: '127.0.0.2' });
    const forbidden = await receiver(answer(200), { host: '127.0.0.1', port: allowed.port });
    const policy: TargetPolicy = { allowHttp: true, allowCidrs: ['127.0.0.2/32'] };
    const dns = fakeDns({ 'mixed.example': ['127.0.0.2', '127.0.0.1'] });
    const result = await deliver(`http://mixed.example:${allowed.port}/`, {
      policy,
      resolveHostname: dns.resolve,
    });
    expect(result).toMatchObject({
      outcome: 'refused',
      error: expect.stringContaining('127.0.0.1'),
    });
    expect(allowed.connectionCount()).toBe(0);
    expect(forbidden.connectionCount()).toBe(0);
    // The same name with only the allowed address goes through: the refusal was the mix.
    const clean = fakeDns({ 'mixed.example': ['127.0.0.2'] });
    const ok = await deliver(`http://mixed.example:${allowed.port}/`, {
      policy,
      resolveHostname: clean.resolve,
    });
    expect(ok.outcome).toBe('delivered');
    expect(allowed.requests).toHaveLength(1);
  });

  it('refuses plain http under the production policy without connecting', async () => {
    const local = await receiver(answer(200));
    const result = await deliver(`http://public.example:${local.port}/`, {
      policy: PRODUCTION_POLICY,
      resolveHostname: fakeDns({ 'public.example': ['127.0.0.1'] }).resolve,
    });
    expect(result).toMatchObject({
      outcome: 'refused',
      error: expect.stringContaining('plain http'),
    });
    expect(local.connectionCount()).toBe(0);
  });

  it('refuses URLs carrying credentials and non-http schemes', async () => {
    const local = await receiver(answer(200));
    for (const url of [
      `http://user:pw@127.0.0.1:${local.port}/`,
      `ftp://127.0.0.1:${local.port}/`,
    ]) {
      expect((await deliver(url)).outcome, url).toBe('refused');
    }
    expect(local.connectionCount()).toBe(0);
  });
});

describe('DNS rebinding', () => {
  it('connects to the very address it checked, resolving once per connection', async () => {
    const checked = await receiver(answer(200, 'checked'), { host: '127.0.0.1' });
    const rebound = await receiver(answer(200, 'rebound'), {
      host: '127.0.0.2',
      port: checked.port,
    });
    const policy: TargetPolicy = { allowHttp: true, allowCidrs: ['127.0.0.1/32'] };
    // First answer passes the check; any later lookup would point somewhere refused.
    const dns = fakeDns({
      'rebind.example': (call) => (call === 1 ? ['127.0.0.1'] : ['127.0.0.2']),
    });
    const result = await deliver(`http://rebind.example:${checked.port}/hook`, {
      policy,
      resolveHostname: dns.resolve,
    });
    expect(result).toMatchObject({ outcome: 'delivered', responseBody: 'checked' });
    expect(dns.calls()).toBe(1);
    expect(checked.requests[0]?.headers.host).toBe(`rebind.example:${checked.port}`);
    expect(rebound.connectionCount()).toBe(0);
  });

  it('refuses when the lookup made for the connection answers a refused address', async () => {
    const rebound = await receiver(answer(200), { host: '127.0.0.2' });
    const policy: TargetPolicy = { allowHttp: true, allowCidrs: ['127.0.0.1/32'] };
    const dns = fakeDns({ 'rebind.example': ['127.0.0.2'] });
    const result = await deliver(`http://rebind.example:${rebound.port}/`, {
      policy,
      resolveHostname: dns.resolve,
    });
    expect(result.outcome).toBe('refused');
    expect(rebound.connectionCount()).toBe(0);
  });
});
