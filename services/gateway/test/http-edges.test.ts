import { connect } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HttpLimits } from '../src/api/http-server';
import { Harness } from './harness';

/**
 * What a fuzzer finds at the edges of HTTP: odd methods, bytes that are not a path, requests
 * Node's own parser refuses before fastify sees them, requests that never finish arriving, more
 * connections than one client should hold. Each still answers with the envelope and the
 * documented code where an answer can still be given. Sent over a real socket, since injection
 * skips Node's HTTP server.
 */
const SHORT_TIMEOUTS: Partial<HttpLimits> = { headersTimeoutMs: 500, requestTimeoutMs: 1_000 };
const harness = new Harness();
let baseUrl: string;
let port: number;
let key: string;

beforeAll(async () => {
  await harness.start({ httpLimits: SHORT_TIMEOUTS });
  ({ apiKey: key } = harness.account());
  ({ baseUrl, port } = await listen(harness));
});
afterAll(() => harness.stop());

async function listen(started: Harness): Promise<{ baseUrl: string; port: number }> {
  const url = await started.app.listen({ port: 0, host: '127.0.0.1' });
  return { baseUrl: url, port: Number(new URL(url).port) };
}

interface Exchange {
  status: number;
  head: string;
  body: string;
  /** Everything the server sent, interim responses (100 Continue) included. */
  received: string;
  elapsedMs: number;
}

/**
 * One raw HTTP/1.1 exchange: writes `request` and reads until the server closes the
 * connection. `from` picks the local address, to look like another client.
 */
function raw(request: string, options: { port?: number; from?: string } = {}): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const startedAt = Date.now();
    const socket = connect({
      host: '127.0.0.1',
      port: options.port ?? port,
      ...(options.from !== undefined && { localAddress: options.from }),
    });
    let received = '';
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
    });
    socket.on('close', () => {
      const final = received.split(/(?=HTTP\/1\.1 [2-5]\d\d )/).at(-1) ?? '';
      const [head = '', body = ''] = final.split('\r\n\r\n');
      resolve({
        status: Number(head.split(' ')[1]),
        head,
        body,
        received,
        elapsedMs: Date.now() - startedAt,
      });
    });
    socket.on('error', reject);
    socket.write(request);
    socket.setTimeout(5_000, () => socket.destroy(new Error('no answer within 5 s')));
  });
}

/** A connection that is open and says nothing; `close()` ends it. */
function idleConnection(options: { port: number; from?: string }) {
  return new Promise<{ closed: Promise<string>; close(): void }>((resolve, reject) => {
    const socket = connect({
      host: '127.0.0.1',
      port: options.port,
      ...(options.from !== undefined && { localAddress: options.from }),
    });
    let received = '';
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
    });
    const closed = new Promise<string>((done) => socket.on('close', () => done(received)));
    socket.on('error', () => {});
    socket.once('connect', () => resolve({ closed, close: () => socket.end() }));
    socket.once('error', reject);
  });
}

const envelope = (body: string) =>
  JSON.parse(body) as { success: boolean; error: { code: string; message: string } };

describe('HTTP edges', () => {
  it('answers an HTTP method the router does not know (QUERY) with 405 and Allow', async () => {
    const response = await fetch(`${baseUrl}/v1/jobs`, {
      method: 'QUERY',
      headers: { authorization: `Bearer ${key}` },
    });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toContain('GET');
    expect(await response.json()).toMatchObject({ error: { code: 'METHOD_NOT_ALLOWED' } });
  });

  it('reports a job id that is not even valid UTF-8 as JOB_NOT_FOUND', async () => {
    const response = await fetch(`${baseUrl}/v1/jobs/%FF%FE`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ error: { code: 'JOB_NOT_FOUND' } });
  });

  it('reports an id longer than any id as JOB_NOT_FOUND, not as a router error', async () => {
    const response = await fetch(`${baseUrl}/v1/jobs/job_${'x'.repeat(500)}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ error: { code: 'JOB_NOT_FOUND' } });
  });

  it('still asks for a key first: an undecodable id without one is 401', async () => {
    const response = await fetch(`${baseUrl}/v1/jobs/%FF%FE`);
    expect(response.status).toBe(401);
  });

  it.each([
    [
      'a malformed request line',
      400,
      'VALIDATION_ERROR',
      'GET /v1/jobs HTTP/1.1 extra\r\nHost: x\r\n\r\n',
    ],
    [
      'an oversized header section',
      431,
      'HEADERS_TOO_LARGE',
      `GET /v1/jobs HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    ],
    [
      'a header value holding U+0000',
      400,
      'VALIDATION_ERROR',
      'GET /v1/jobs HTTP/1.1\r\nHost: x\r\nIdempotency-Key: a\u0000b\r\n\r\n',
    ],
    ['an HTTP/1.1 request without Host', 400, 'VALIDATION_ERROR', 'GET /v1/jobs HTTP/1.1\r\n\r\n'],
    [
      'an expectation other than 100-continue',
      417,
      'EXPECTATION_FAILED',
      'GET /v1/jobs HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nConnection: close\r\n\r\n',
    ],
    [
      'CONNECT',
      405,
      'METHOD_NOT_ALLOWED',
      'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n',
    ],
  ])('answers %s in the error envelope (%i %s)', async (_name, status, code, request) => {
    const response = await raw(request);
    expect(response.status, response.received).toBe(status);
    expect(response.head.toLowerCase()).toContain('content-type: application/json');
    expect(response.head.toLowerCase()).toMatch(/x-request-id: \S+/);
    expect(envelope(response.body)).toMatchObject({ success: false, error: { code } });
  });

  it('still honours Expect: 100-continue', async () => {
    const body = JSON.stringify({ filename: 'a.png', size: 1 });
    const response = await raw(
      'POST /v1/upload HTTP/1.1\r\nHost: x\r\n' +
        `Authorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(response.received).toMatch(/^HTTP\/1\.1 100 Continue\r\n/);
    expect(response.status).toBe(200);
  });

  it('refuses an empty wait= as VALIDATION_ERROR', async () => {
    const response = await fetch(`${baseUrl}/v1/jobs/job_01J0000000000000000000000?wait=`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { code: 'VALIDATION_ERROR' } });
  });
});

describe('time limits', () => {
  // SHORT_TIMEOUTS: headers within 0.5 s, the whole request within 1 s.
  it('answers a body that never ends with 408 REQUEST_TIMEOUT and closes the connection', async () => {
    const response = await raw(
      'POST /v1/text HTTP/1.1\r\nHost: x\r\n' +
        `Authorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
        'Content-Length: 1000\r\n\r\n{"',
    );
    expect(response.status, response.received).toBe(408);
    expect(envelope(response.body).error.code).toBe('REQUEST_TIMEOUT');
    expect(response.elapsedMs).toBeGreaterThanOrEqual(900);
    expect(response.elapsedMs).toBeLessThan(3_000);
  });

  it('answers headers that never end with 408 REQUEST_TIMEOUT', async () => {
    const response = await raw('GET /v1/jobs HTTP/1.1\r\nHost: x\r\n');
    expect(response.status, response.received).toBe(408);
    expect(envelope(response.body).error.code).toBe('REQUEST_TIMEOUT');
    expect(response.elapsedMs).toBeLessThan(2_500);
  });

  it('sets the limits it is given on the server, and no default leaves one off', () => {
    const { server } = harness.app;
    expect(server.requestTimeout).toBe(SHORT_TIMEOUTS.requestTimeoutMs);
    expect(server.headersTimeout).toBe(SHORT_TIMEOUTS.headersTimeoutMs);
    for (const [name, value] of Object.entries(harness.defaults.httpLimits)) {
      expect(value, name).toBeGreaterThan(0);
    }
  });
});

describe('connection limits', () => {
  const limited = new Harness();
  let limitedPort: number;

  beforeAll(async () => {
    await limited.start({
      httpLimits: { maxConnectionsPerAddress: 2 },
    });
    ({ port: limitedPort } = await listen(limited));
  });
  afterAll(() => limited.stop());

  const request = 'GET /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';

  it("answers a connection over its address's limit with 429 RATE_LIMITED, others as usual", async () => {
    const first = await idleConnection({ port: limitedPort });
    const second = await idleConnection({ port: limitedPort });
    const refused = await raw(request, { port: limitedPort });
    expect(refused.status, refused.received).toBe(429);
    expect(refused.head.toLowerCase()).toContain('connection: close');
    expect(refused.head.toLowerCase()).toContain('retry-after: 1');
    expect(envelope(refused.body).error.code).toBe('RATE_LIMITED');
    // Another address is not affected.
    expect((await raw(request, { port: limitedPort, from: '127.0.0.2' })).status).toBe(401);
    // Once one closes, the address may connect again.
    first.close();
    await first.closed;
    // The server counts the close when its side of the socket has seen it: until then a new
    // connection is still refused.
    await expect
      .poll(async () => (await raw(request, { port: limitedPort })).status, {
        timeout: 10_000,
        interval: 50,
      })
      .toBe(401);
    second.close();
    await second.closed;
  });

  it('closes a refused connection that sends nothing within a second', async () => {
    const held = [
      await idleConnection({ port: limitedPort }),
      await idleConnection({ port: limitedPort }),
    ];
    const startedAt = Date.now();
    const refused = await idleConnection({ port: limitedPort });
    expect(await refused.closed).toBe('');
    expect(Date.now() - startedAt).toBeLessThan(2_500);
    for (const connection of held) connection.close();
    await Promise.all(held.map((connection) => connection.closed));
  });

  it('drops connections beyond the total limit', async () => {
    const capped = new Harness();
    await capped.start({
      httpLimits: { maxConnections: 2, maxConnectionsPerAddress: 0 },
    });
    try {
      const { port: cappedPort } = await listen(capped);
      const held = [
        await idleConnection({ port: cappedPort }),
        await idleConnection({ port: cappedPort, from: '127.0.0.2' }),
      ];
      const dropped = await idleConnection({ port: cappedPort, from: '127.0.0.3' });
      expect(await dropped.closed).toBe('');
      for (const connection of held) connection.close();
      await Promise.all(held.map((connection) => connection.closed));
    } finally {
      await capped.stop();
    }
  });
});

describe('request logging', () => {
  const lines: Array<{ level: number; msg: string }> = [];
  const logged = new Harness(
    pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) }),
  );
  beforeAll(() => logged.start());
  afterAll(() => logged.stop());
  const requestLines = () =>
    lines.filter((line) => ['incoming request', 'request completed'].includes(line.msg));

  it("writes no line per request at info, and fastify's two at debug", async () => {
    await logged.app.inject({ method: 'GET', url: '/v1/jobs' });
    expect(requestLines()).toEqual([]);
    logged.logger.level = 'debug';
    await logged.app.inject({ method: 'GET', url: '/v1/jobs' });
    expect(requestLines().map((line) => line.msg)).toEqual([
      'incoming request',
      'request completed',
    ]);
  });
});
