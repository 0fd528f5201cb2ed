import { jetstreamManager } from '@nats-io/jetstream';
import { ERROR_CODES, LIMITS } from '@tamp/proto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { rateLimitWindowWithRoom } from '../../../test/support/rate-limit-window';
import { retireRateLimitBucket } from '../src/adapters/rate-limiter';
import { Harness } from './harness';

const harness = new Harness();
let key: string;
let accountId: string;

beforeAll(async () => {
  await harness.start({ gateways: 2, authCacheTtlMs: 300 });
  ({ apiKey: key, accountId } = harness.account());
});
afterAll(() => harness.stop());

const auth = (apiKey: string = key) => ({ authorization: `Bearer ${apiKey}` });
const post = (url: string, payload: unknown, headers: Record<string, string> = {}) =>
  harness.app.inject({
    method: 'POST',
    url,
    headers: { ...auth(), ...headers },
    payload: payload as object,
  });

describe('authentication', () => {
  it.each([
    ['missing', undefined],
    ['malformed scheme', 'Basic abc'],
    ['not an sk_live key', 'Bearer pk_test_123456789012345678'],
    ['unknown key', `Bearer sk_live_${'z'.repeat(40)}`],
  ])('%s → 401 UNAUTHORIZED with WWW-Authenticate', async (_name, header) => {
    const response = await harness.app.inject({
      method: 'GET',
      url: '/v1/jobs',
      headers: header === undefined ? {} : { authorization: header },
    });
    expect(response.statusCode).toBe(401);
    expect(response.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(response.json()).toMatchObject({ success: false, error: { code: 'UNAUTHORIZED' } });
  });

  it('a revoked key stops working once the short cache TTL passes', async () => {
    const { apiKey } = harness.account();
    const first = await harness.app.inject({
      method: 'GET',
      url: '/v1/jobs',
      headers: auth(apiKey),
    });
    expect(first.statusCode).toBe(200);
    harness.revoked.add(apiKey);
    await expect
      .poll(
        async () =>
          (await harness.app.inject({ method: 'GET', url: '/v1/jobs', headers: auth(apiKey) }))
            .statusCode,
        { timeout: 10_000, interval: 100 },
      )
      .toBe(401);
  });

  it('caches successful checks instead of asking billing on every request', async () => {
    const { apiKey } = harness.account();
    const before = harness.authenticateCalls;
    await Promise.all(
      Array.from({ length: 5 }, () =>
        harness.app.inject({ method: 'GET', url: '/v1/jobs', headers: auth(apiKey) }),
      ),
    );
    expect(harness.authenticateCalls - before).toBe(1);
  });
});

describe('rate limits', () => {
  it('are shared across gateway replicas: headers, then 429 with Retry-After', async () => {
    const [a, b] = [harness.gateways[0]!.publicApp, harness.gateways[1]!.publicApp];
    const { apiKey } = harness.account({ rateLimitPerMinute: 3 });
    const get = (app: typeof a) =>
      app.inject({ method: 'GET', url: '/v1/jobs', headers: auth(apiKey) });
    // The four requests must be counted in one window: start them with 10 s of it left.
    await rateLimitWindowWithRoom(10_000);
    const first = await get(a);
    expect(first.headers['ratelimit-limit']).toBe('3');
    expect(first.headers['ratelimit-remaining']).toBe('2');
    expect((await get(b)).headers['ratelimit-remaining']).toBe('1');
    expect((await get(a)).headers['ratelimit-remaining']).toBe('0');
    const limited = await get(b);
    expect(limited.statusCode).toBe(429);
    expect(limited.json().error.code).toBe('RATE_LIMITED');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(limited.headers['ratelimit-remaining']).toBe('0');
  });

  it('let exactly the limit through when many requests race on two replicas', async () => {
    const [a, b] = [harness.gateways[0]!.publicApp, harness.gateways[1]!.publicApp];
    const { apiKey } = harness.account({ rateLimitPerMinute: 25 });
    // The probe and the 60 racing requests must be counted in one window: 15 s of it left.
    await rateLimitWindowWithRoom(15_000);
    await a.inject({ method: 'GET', url: '/v1/jobs', headers: auth(apiKey) }); // the probe
    const responses = await Promise.all(
      Array.from({ length: 60 }, (_, index) =>
        (index % 2 === 0 ? a : b).inject({
          method: 'GET',
          url: '/v1/jobs',
          headers: auth(apiKey),
        }),
      ),
    );
    // The probe took one of the 25.
    expect(responses.filter((response) => response.statusCode === 200)).toHaveLength(24);
    expect(responses.filter((response) => response.statusCode === 429)).toHaveLength(36);
    const remaining = responses
      .filter((response) => response.statusCode === 200)
      .map((response) => Number(response.headers['ratelimit-remaining']))
      .sort((x, y) => x - y);
    expect(remaining).toEqual(Array.from({ length: 24 }, (_, index) => index));
  });
  it('delete the KV bucket earlier releases counted in, and start when there is none', async () => {
    const manager = await jetstreamManager(harness.peers);
    const retired = `KV_${harness.topology.namespace}_RATE_LIMITS`;
    await manager.streams.add({ name: retired, subjects: [`$KV.${retired.slice(3)}.>`] });
    await retireRateLimitBucket(harness.peers, harness.topology, harness.logger);
    await expect(manager.streams.info(retired)).rejects.toThrow(/stream not found/);
    await retireRateLimitBucket(harness.peers, harness.topology, harness.logger);
  });
});

describe('strings that cannot be stored (docs/decisions.md#strings)', () => {
  const NUL = '\u0000';

  it.each<[string, string, unknown, string, Record<string, string>]>([
    ['inline text', '/v1/text', { text: `a${NUL}b`, preset: 'chill' }, 'body.text', {}],
    [
      'inline text over the fast path',
      '/v1/text',
      { text: `${'x'.repeat(60 * 1024)}${NUL}`, preset: 'chill' },
      'body.text',
      {},
    ],
    ['a filename', '/v1/upload', { filename: `a${NUL}.png`, size: 1 }, 'body.filename', {}],
    [
      'a webhookUrl',
      '/v1/audio',
      { audioId: 'upl_x', preset: 'podcast', webhookUrl: `https://example.com/a${NUL}b` },
      'body.webhookUrl',
      {},
    ],
    [
      'an Idempotency-Key',
      '/v1/audio',
      { audioId: 'upl_x', preset: 'podcast' },
      'headers.idempotency-key',
      // Injected: Node's HTTP parser would refuse the header first (400, in the envelope).
      { 'idempotency-key': `key${NUL}` },
    ],
  ])('refuses U+0000 in %s, creating nothing', async (_name, url, body, path, headers) => {
    const created = harness.createJobRequests.length;
    const response = await post(url, body, headers);
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toEqual({
      code: 'VALIDATION_ERROR',
      message: expect.any(String),
      details: [{ path, message: expect.stringContaining('U+0000') }],
    });
    expect(harness.createJobRequests.length).toBe(created);
  });

  it('refuses U+0000 in a list cursor', async () => {
    const response = await harness.app.inject({ url: '/v1/jobs?cursor=a%00b', headers: auth() });
    expect(response.statusCode).toBe(400);
    expect(response.json().error.details[0].path).toBe('querystring.cursor');
  });
});

describe('webhook targets, checked when given (docs/decisions.md#webhooks)', () => {
  // The harness gateway runs the production policy: https only, public addresses only.
  it.each([
    ['cloud metadata', 'https://169.254.169.254/latest/meta-data/'],
    ['cloud metadata written as IPv4-mapped IPv6', 'https://[::ffff:a9fe:a9fe]/'],
    ['a private address', 'https://10.1.2.3/hook'],
    ['loopback', 'https://127.0.0.1:8443/hook'],
    ['plain http', 'http://hooks.example.com/tamp'],
    ['credentials in the URL', 'https://user:secret@hooks.example.com/tamp'],
  ])('refuses %s (%s), creating nothing', async (_name, webhookUrl) => {
    const created = harness.createJobRequests.length;
    const response = await post('/v1/text', { text: 'hi', preset: 'chill', webhookUrl });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toEqual({
      code: 'VALIDATION_ERROR',
      message: expect.any(String),
      details: [{ path: 'body.webhookUrl', message: expect.any(String) }],
    });
    expect(harness.createJobRequests.length).toBe(created);
  });

  it('leaves host names to delivery, which checks what they resolve to then', async () => {
    const response = await post('/v1/text', {
      text: 'hi',
      preset: 'chill',
      webhookUrl: 'https://localhost/hook',
    });
    expect(response.statusCode).toBe(202);
  });
});

describe('validation and envelope', () => {
  const cases: [string, string, unknown, string[], Record<string, string>?][] = [
    [
      'both preset and operations',
      '/v1/audio',
      { audioId: 'upl_x', preset: 'chill', operations: [{ type: 'encode' }] },
      ['body.operations'],
    ],
    ['neither preset nor operations', '/v1/audio', { audioId: 'upl_x' }, ['body.preset']],
    [
      'both text and fileId',
      '/v1/text',
      { text: 'a', fileId: 'upl_x', preset: 'chill' },
      ['body.fileId'],
    ],
    ['neither text nor fileId', '/v1/text', { preset: 'chill' }, ['body.text']],
    [
      'a webhookUrl that is not http(s)',
      '/v1/image',
      { imageId: 'upl_x', preset: 'chill', webhookUrl: 'ftp://example.com/x' },
      ['body.webhookUrl'],
    ],
    [
      'a relative webhookUrl',
      '/v1/image',
      { imageId: 'upl_x', preset: 'chill', webhookUrl: '/hooks' },
      ['body.webhookUrl'],
    ],
    ['an unknown preset', '/v1/image', { imageId: 'upl_x', preset: 'huge' }, ['body.preset']],
    [
      'an unknown operation',
      '/v1/image',
      { imageId: 'upl_x', operations: [{ type: 'blur' }] },
      ['body.operations.0.type'],
    ],
    [
      'a parameter out of range',
      '/v1/audio',
      { audioId: 'upl_x', operations: [{ type: 'speedup', params: { rate: 9 } }] },
      ['body.operations.0.params.rate'],
    ],
    [
      '11 operations',
      '/v1/text',
      { text: 'a', operations: Array.from({ length: 11 }, () => ({ type: 'trim' })) },
      ['body.operations'],
    ],
    ['zero operations', '/v1/text', { text: 'a', operations: [] }, ['body.operations']],
    [
      'several problems at once',
      '/v1/audio',
      { audioId: 5, webhookUrl: 'nope' },
      ['body.audioId', 'body.webhookUrl', 'body.preset'],
    ],
    [
      'an empty Idempotency-Key',
      '/v1/audio',
      { audioId: 'upl_x', preset: 'chill' },
      ['headers.idempotency-key'],
      { 'idempotency-key': '' },
    ],
    [
      'a 256-character Idempotency-Key',
      '/v1/audio',
      { audioId: 'upl_x', preset: 'chill' },
      ['headers.idempotency-key'],
      { 'idempotency-key': 'k'.repeat(256) },
    ],
    [
      'a filename that is too long',
      '/v1/upload',
      { filename: `${'a'.repeat(256)}.png`, size: 1 },
      ['body.filename'],
    ],
    ['a size of 0', '/v1/upload', { filename: 'a.png', size: 0 }, ['body.size']],
  ];
  it.each(cases)(
    '%s → VALIDATION_ERROR naming the paths',
    async (_name, url, body, paths, headers) => {
      const response = await post(url, body, headers);
      expect(response.statusCode).toBe(400);
      const { error } = response.json();
      expect(error.code).toBe('VALIDATION_ERROR');
      expect(error.details.map((issue: { path: string }) => issue.path).sort()).toEqual(
        [...paths].sort(),
      );
    },
  );

  it.each(['31', '-1', 'x'])('wait=%s → VALIDATION_ERROR', async (wait) => {
    const response = await harness.app.inject({
      url: `/v1/jobs/job_x?wait=${wait}`,
      headers: auth(),
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().error.details[0].path).toBe('querystring.wait');
  });

  it.each(['0x10', '1e1', '1.5', '+5', ' 5', '5 ', '０'])(
    'wait=%j → VALIDATION_ERROR: whole numbers in decimal digits only',
    async (wait) => {
      const response = await harness.app.inject({
        url: `/v1/jobs/job_x?wait=${encodeURIComponent(wait)}`,
        headers: auth(),
      });
      expect(response.statusCode).toBe(400);
      expect(response.json().error.details[0].path).toBe('querystring.wait');
    },
  );

  it.each(['1e2', '0x10', '2.0', '-1', ''])(
    'limit=%j → VALIDATION_ERROR: whole numbers in decimal digits only',
    async (limit) => {
      const response = await harness.app.inject({
        url: `/v1/jobs?limit=${encodeURIComponent(limit)}`,
        headers: auth(),
      });
      expect(response.statusCode).toBe(400);
      expect(response.json().error.details[0].path).toBe('querystring.limit');
    },
  );

  it('reads decimal digits, leading zeros included', async () => {
    const listed = await harness.app.inject({ url: '/v1/jobs?limit=05', headers: auth() });
    expect(listed.statusCode).toBe(200);
    expect(harness.adminCalls.at(-1)).toMatchObject({
      endpoint: 'listJobs',
      request: { limit: 5 },
    });
    const read = await harness.app.inject({ url: '/v1/jobs/job_x?wait=00', headers: auth() });
    expect(read.json().error.code).toBe('JOB_NOT_FOUND');
  });

  it('malformed JSON → VALIDATION_ERROR', async () => {
    const response = await harness.app.inject({
      method: 'POST',
      url: '/v1/audio',
      headers: { ...auth(), 'content-type': 'application/json' },
      payload: '{"audioId": ',
    });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
  });

  it('an oversized body → 413 PAYLOAD_TOO_LARGE', async () => {
    const response = await post('/v1/upload', {
      filename: 'a.png',
      size: 1,
      pad: 'x'.repeat(70_000),
    });
    expect(response.statusCode).toBe(413);
    expect(response.json().error.code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('a known path with a wrong method → 405 with Allow', async () => {
    const response = await harness.app.inject({
      method: 'DELETE',
      url: '/v1/jobs/job_1',
      headers: auth(),
    });
    expect(response.statusCode).toBe(405);
    expect(response.headers.allow).toContain('GET');
    expect(response.json().error.code).toBe('METHOD_NOT_ALLOWED');
    const put = await harness.app.inject({ method: 'PUT', url: '/v1/text', headers: auth() });
    expect(put.statusCode).toBe(405);
    expect(put.headers.allow).toBe('POST');
  });

  it('an unknown route → 404 NOT_FOUND', async () => {
    const response = await harness.app.inject({ url: '/v2/nothing', headers: auth() });
    expect(response.statusCode).toBe(404);
    expect(response.json().error.code).toBe('NOT_FOUND');
  });

  it('echoes a valid X-Request-Id and generates one otherwise', async () => {
    const echoed = await harness.app.inject({
      url: '/v1/jobs',
      headers: { ...auth(), 'x-request-id': 'abc-123' },
    });
    expect(echoed.headers['x-request-id']).toBe('abc-123');
    const generated = await harness.app.inject({
      url: '/v1/jobs',
      headers: { 'x-request-id': 'bad id!' },
    });
    expect(generated.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('a dependency that is down → 503 UNAVAILABLE with Retry-After', async () => {
    const response = await harness.app.inject({ url: '/v1/usage/current', headers: auth() });
    expect(response.statusCode).toBe(503);
    expect(response.headers['retry-after']).toBeDefined();
    expect(response.json().error.code).toBe('UNAVAILABLE');
  });

  it('peer errors keep their code: IDEMPOTENCY_KEY_REUSED', async () => {
    const response = await post(
      '/v1/audio',
      { audioId: 'upl_x', preset: 'chill' },
      { 'idempotency-key': 'reused' },
    );
    expect(response.statusCode).toBe(422);
    expect(response.json().error.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });
});

describe('job creation', () => {
  const last = () => harness.createJobRequests.at(-1)!;

  it('expands an audio preset and passes account, key and hash to createJob', async () => {
    const response = await post(
      '/v1/audio',
      { audioId: 'upl_a', preset: 'aggressive' },
      { 'idempotency-key': 'k1' },
    );
    expect(response.statusCode).toBe(202);
    const body = response.json();
    expect(body).toEqual({
      success: true,
      data: { id: expect.stringMatching(/^job_/), status: 'created' },
    });
    expect(response.headers['ratelimit-limit']).toBeDefined();
    const request = last();
    expect(request).toMatchObject({
      jobId: body.data.id,
      accountId,
      pipeline: 'audio',
      source: { kind: 'upload', uploadId: 'upl_a' },
      preset: 'aggressive',
      idempotencyKey: 'k1',
      webhookUrl: null,
      maxUploadBytes: 25 * 1024 * 1024,
    });
    expect(request.operations.map((operation) => operation.type)).toEqual([
      'trim-silence',
      'speedup',
      'normalize',
      'compress',
      'encode',
    ]);
    expect(request.operations.at(-1)).toEqual({
      type: 'encode',
      params: { format: 'opus', bitrate: 12, channels: 1 },
    });
    expect(request.requestHash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('places encode last (last one wins) and appends the default when missing', async () => {
    await post('/v1/image', {
      imageId: 'upl_i',
      operations: [
        { type: 'encode', params: { format: 'png' } },
        { type: 'resize', params: { width: 100 } },
        { type: 'encode', params: { format: 'jpeg', quality: 60 } },
      ],
    });
    expect(last().operations.map((operation) => operation.type)).toEqual(['resize', 'encode']);
    expect(last().operations[1]).toEqual({
      type: 'encode',
      params: { format: 'jpeg', quality: 60, effort: 4 },
    });
    expect(last().preset).toBeUndefined();
    await post('/v1/image', {
      imageId: 'upl_i',
      operations: [{ type: 'resize', params: { width: 100 } }],
    });
    expect(last().operations[1]).toEqual({
      type: 'encode',
      params: { format: 'webp', quality: 80, effort: 4 },
    });
  });

  it('the same body hashes the same whatever the key order; another body differs', async () => {
    await post('/v1/text', { text: 'hi', preset: 'chill' });
    const first = last().requestHash;
    await post('/v1/text', { preset: 'chill', text: 'hi' });
    expect(last().requestHash).toBe(first);
    await post('/v1/text', { preset: 'medium', text: 'hi' });
    expect(last().requestHash).not.toBe(first);
  });

  it('small inline text travels in the message and comes back 200 completed', async () => {
    const response = await post('/v1/text', { text: '  hello  ', operations: [{ type: 'trim' }] });
    expect(response.statusCode).toBe(200);
    expect(response.json().data).toMatchObject({
      status: 'completed',
      result: { outputText: 'hello' },
    });
    expect(last().source).toEqual({ kind: 'text', text: '  hello  ' });
    expect(last().operations).toEqual([{ type: 'trim', params: { intensity: 50 } }]);
  });

  it('accepts 5,000,000 characters: stored in S3, createJob gets stored-text', async () => {
    const text = `${'é'.repeat(10)}${'a'.repeat(LIMITS.inlineTextCharacters - 10)}`;
    const response = await post('/v1/text', {
      text,
      preset: 'medium',
      webhookUrl: 'https://example.com/hook',
    });
    expect(response.statusCode).toBe(202);
    const request = last();
    expect(request.webhookUrl).toBe('https://example.com/hook');
    expect(request.source).toEqual({
      kind: 'stored-text',
      key: `inputs/${accountId}/${request.jobId}`,
      size: LIMITS.inlineTextCharacters + 10,
      characters: LIMITS.inlineTextCharacters,
    });
    const stored = await harness.objectStore.getBuffer(`inputs/${accountId}/${request.jobId}`);
    expect(stored.toString('utf8')).toBe(text);
  });

  it('refuses 5,000,001 characters', async () => {
    const response = await post('/v1/text', {
      text: 'a'.repeat(LIMITS.inlineTextCharacters + 1),
      preset: 'chill',
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().error.details[0].path).toBe('body.text');
  });

  it('POST /v1/upload passes the plan limit; list passes its query', async () => {
    const upload = await post('/v1/upload', { filename: 'a.png', size: 10 });
    expect(upload.statusCode).toBe(200);
    expect(upload.json().data.id).toMatch(/^upl_/);
    const tooBig = await post('/v1/upload', { filename: 'a.png', size: 26 * 1024 * 1024 });
    expect(tooBig.json().error.code).toBe('FILE_TOO_LARGE');
    const list = await harness.app.inject({
      url: '/v1/jobs?type=image&status=failed&limit=5&cursor=abc',
      headers: auth(),
    });
    expect(list.json()).toEqual({ success: true, data: { items: [], nextCursor: null } });
    expect(harness.adminCalls.at(-1)?.request).toEqual({
      accountId,
      type: 'image',
      status: 'failed',
      limit: 5,
      cursor: 'abc',
    });
    await harness.app.inject({ url: '/v1/jobs', headers: auth() });
    expect(harness.adminCalls.at(-1)?.request).toEqual({ accountId, limit: 20 });
  });
});

describe('long-poll', () => {
  it('returns early when the job notification arrives', async () => {
    const created = await post('/v1/audio', { audioId: 'upl_a', preset: 'chill' });
    const jobId = created.json().data.id as string;
    const gateway = harness.gateways[0]!;
    const pending = harness.app.inject({ url: `/v1/jobs/${jobId}?wait=30`, headers: auth() });
    await vi.waitFor(() => expect(gateway.waiters.size).toBeGreaterThan(0), { timeout: 10_000 });
    harness.jobs.set(jobId, { id: jobId, status: 'failed', error: 'boom' });
    harness.peers.publish(
      harness.topology.subjects.jobNotification(jobId),
      JSON.stringify({ jobId, status: 'failed' }),
    );
    const response = await pending;
    expect(response.statusCode).toBe(200);
    expect(response.json().data).toEqual({ id: jobId, status: 'failed', error: 'boom' });
    expect(gateway.waiters.size).toBe(0);
  });

  it('returns the current job when the wait passes without a notification', async () => {
    const created = await post('/v1/audio', { audioId: 'upl_a', preset: 'chill' });
    const jobId = created.json().data.id as string;
    const response = await harness.app.inject({ url: `/v1/jobs/${jobId}?wait=1`, headers: auth() });
    expect(response.json()).toEqual({ success: true, data: { id: jobId, status: 'created' } });
    expect(harness.gateways[0]!.waiters.size).toBe(0);
  });

  it('unknown jobs are JOB_NOT_FOUND', async () => {
    const response = await harness.app.inject({ url: '/v1/jobs/nope?wait=5', headers: auth() });
    expect(response.statusCode).toBe(404);
    expect(response.json().error.code).toBe('JOB_NOT_FOUND');
  });
});

describe('discovery', () => {
  it('presets and operations come from proto', async () => {
    const presets = await harness.app.inject({ url: '/v1/image/presets', headers: auth() });
    const aggressive = presets
      .json()
      .data.presets.find((preset: { name: string }) => preset.name === 'aggressive');
    expect(aggressive).toMatchObject({ queued: true, output: { format: 'avif' } });
    const operations = await harness.app.inject({ url: '/v1/audio/operations', headers: auth() });
    const speedup = operations
      .json()
      .data.operations.find((operation: { type: string }) => operation.type === 'speedup');
    expect(speedup.params.rate).toMatchObject({ type: 'number', min: 0.5, max: 5, default: 1.25 });
  });

  /** A POST's body schema: a named one, in components.schemas. */
  const requestBodySchema = (
    document: {
      paths: Record<
        string,
        { post: { requestBody: { content: Record<string, { schema: { $ref: string } }> } } }
      >;
      components: {
        schemas: Record<
          string,
          { properties: Record<string, { pattern: string }>; allOf?: unknown }
        >;
      };
    },
    path: string,
  ) => {
    const { $ref } = document.paths[path]!.post.requestBody.content['application/json']!.schema;
    return document.components.schemas[$ref.replace('#/components/schemas/', '')]!;
  };

  it('serves an OpenAPI 3.1 document with every route, and a docs page', async () => {
    const response = await harness.app.inject({ url: '/openapi.json' });
    expect(response.statusCode).toBe(200);
    const document = JSON.parse(response.body);
    expect(document.openapi).toBe('3.1.0');
    for (const path of [
      '/v1/upload',
      '/v1/audio',
      '/v1/image',
      '/v1/text',
      '/v1/jobs',
      '/v1/jobs/{id}',
      '/v1/usage/current',
      '/v1/text/presets',
      '/v1/image/operations',
    ]) {
      expect(Object.keys(document.paths)).toContain(path);
    }
    expect(requestBodySchema(document, '/v1/text').properties.text).toBeDefined();
    const docs = await harness.app.inject({ url: '/docs' });
    expect([200, 302]).toContain(docs.statusCode);
  });

  it('states the rules a client can break: exclusive fields, extensions, every error code', async () => {
    const document = (await harness.app.inject({ url: '/openapi.json' })).json();
    const body = (path: string) => requestBodySchema(document, path);
    const exclusive = (pair: string[]) => ({
      oneOf: pair.map((field) => ({ required: [field] })),
    });
    expect(body('/v1/audio').allOf).toEqual([exclusive(['preset', 'operations'])]);
    expect(body('/v1/text').allOf).toEqual([
      exclusive(['preset', 'operations']),
      exclusive(['text', 'fileId']),
    ]);
    const filename = new RegExp(body('/v1/upload').properties.filename!.pattern);
    expect(['a.mp3', 'B.JPEG', 'c.webp', 'd.TXT'].every((name) => filename.test(name))).toBe(true);
    expect(['a.doc', 'jpg', 'a.mp4'].some((name) => filename.test(name))).toBe(false);
    for (const [code, status] of Object.entries(ERROR_CODES)) {
      expect(document.info.description).toContain(`| ${code} | ${status} |`);
    }
  });
});
