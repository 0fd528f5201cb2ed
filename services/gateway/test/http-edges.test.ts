import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Harness } from './harness';

/**
 * What a fuzzer finds at the edges of HTTP: odd methods, bytes that are not a path, requests
 * Node's own parser refuses before fastify sees them. Each still answers with the envelope and
 * the documented code. Sent over a real socket, since injection skips Node's parser.
 */
const harness = new Harness();
let baseUrl: string;
let port: number;
let key: string;

beforeAll(async () => {
  await harness.start();
  ({ apiKey: key } = harness.account());
  baseUrl = await harness.app.listen({ port: 0, host: '127.0.0.1' });
  port = Number(new URL(baseUrl).port);
});
afterAll(() => harness.stop());

/** One raw HTTP/1.1 exchange; the response's status line and body. */
function raw(request: string): Promise<{ status: number; body: string; head: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    let received = '';
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
    });
    socket.on('end', () => {
      const [head = '', body = ''] = received.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), head, body });
    });
    socket.on('error', reject);
    socket.write(request);
    socket.setTimeout(5_000, () => socket.destroy(new Error('no answer')));
  });
}

const envelope = (body: string) =>
  JSON.parse(body) as { success: boolean; error: { code: string } };

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
    ['a malformed request line (400)', 'GET /v1/jobs HTTP/1.1 extra\r\nHost: x\r\n\r\n', 400],
    [
      'an oversized header section (431)',
      `GET /v1/jobs HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      431,
    ],
  ])(
    'wraps what Node itself refuses, %s, in the error envelope',
    async (_name, request, status) => {
      const response = await raw(request);
      expect(response.status).toBe(status);
      expect(response.head.toLowerCase()).toContain('content-type: application/json');
      expect(envelope(response.body)).toMatchObject({ success: false });
    },
  );

  it('refuses an empty wait= as VALIDATION_ERROR', async () => {
    const response = await fetch(`${baseUrl}/v1/jobs/job_01J0000000000000000000000?wait=`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { code: 'VALIDATION_ERROR' } });
  });
});
