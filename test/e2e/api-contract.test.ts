import { photo, speechWav, tinyPng } from '@tamp/scripts/fixtures/media';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { rateLimitWindowWithRoom } from '../support/rate-limit-window';
import { startTestStack, type TestAccount, type TestStack, uploadFile } from '../support/stack';

/**
 * The public contract (spec + docs/decisions.md) driven over HTTP against every service running as
 * its own process on the real servers. Sections follow the spec's headings.
 */
let stack: TestStack;
let account: TestAccount;
let other: TestAccount;

interface Job {
  id: string;
  status: string;
  error?: string;
  result?: {
    outputUrl?: string;
    outputText?: string;
    metrics: Record<string, unknown>;
    expired?: true;
  };
}

beforeAll(async () => {
  stack = await startTestStack();
  account = await stack.createAccount({ plan: 'pro' });
  other = await stack.createAccount({ plan: 'pro' });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
});

async function waitForJob(apiKey: string, id: string): Promise<Job> {
  for (let round = 0; round < 6; round++) {
    const response = await stack.api<Job>('GET', `/v1/jobs/${id}?wait=30`, { token: apiKey });
    expect(response.status).toBe(200);
    const job = response.body.data!;
    if (job.status === 'completed' || job.status === 'failed') return job;
  }
  throw new Error(`job ${id} did not finish\n${stack.logs()}`);
}

describe('Authentication', () => {
  it('requires a Bearer key: missing, malformed, unknown → 401 UNAUTHORIZED with WWW-Authenticate', async () => {
    const attempts: Array<Record<string, string>> = [
      {},
      { authorization: 'Basic abc' },
      { authorization: 'Bearer sk_live_unknown' },
    ];
    for (const headers of attempts) {
      const response = await stack.api('GET', '/v1/usage/current', { headers });
      expect(response.status).toBe(401);
      expect(response.body).toMatchObject({ success: false, error: { code: 'UNAUTHORIZED' } });
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
  });

  it('stops accepting a revoked key within 5 seconds', async () => {
    const key = await stack.admin<{ keyId: string; apiKey: string }>(
      'POST',
      `/admin/accounts/${account.accountId}/keys`,
    );
    const { keyId, apiKey } = key.body.data!;
    expect((await stack.api('GET', '/v1/usage/current', { token: apiKey })).status).toBe(200);
    expect((await stack.admin('DELETE', `/admin/keys/${keyId}`)).status).toBe(200);
    await expect
      .poll(async () => (await stack.api('GET', '/v1/usage/current', { token: apiKey })).status, {
        timeout: 5_000,
        interval: 100,
      })
      .toBe(401);
  });
});

describe('Envelopes and generic errors', () => {
  it('wraps success in { success: true, data } and echoes a valid X-Request-Id', async () => {
    const response = await stack.api('GET', '/v1/usage/current', {
      token: account.apiKey,
      headers: { 'x-request-id': 'client-req-42' },
    });
    expect(response.body.success).toBe(true);
    expect(response.headers.get('x-request-id')).toBe('client-req-42');
  });

  it('answers unknown routes 404 NOT_FOUND and wrong methods 405 METHOD_NOT_ALLOWED', async () => {
    expect((await stack.api('GET', '/v1/nope', { token: account.apiKey })).body.error?.code).toBe(
      'NOT_FOUND',
    );
    const wrongMethod = await stack.api('DELETE', '/v1/upload', { token: account.apiKey });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.body.error?.code).toBe('METHOD_NOT_ALLOWED');
  });

  it('answers malformed JSON with 400 VALIDATION_ERROR', async () => {
    const response = await fetch(`${stack.publicUrl}/v1/upload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${account.apiKey}`, 'content-type': 'application/json' },
      body: '{"filename": ',
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe(
      'VALIDATION_ERROR',
    );
  });

  it('answers a body over the endpoint limit with 413 PAYLOAD_TOO_LARGE', async () => {
    const response = await stack.api('POST', '/v1/upload', {
      token: account.apiKey,
      body: { filename: 'a.png', size: 1, padding: 'x'.repeat(2_000_000) },
    });
    expect(response.status).toBe(413);
    expect(response.body.error?.code).toBe('PAYLOAD_TOO_LARGE');
  });
});

describe('POST /v1/upload', () => {
  it('returns the Upload object with a 15-minute PUT URL bound to the content type', async () => {
    const response = await stack.api<Record<string, unknown>>('POST', '/v1/upload', {
      token: account.apiKey,
      body: { filename: 'holiday.JPG', size: 1234 },
    });
    expect(response.status).toBe(200);
    const upload = response.body.data!;
    expect(upload.id).toMatch(/^upl_/);
    expect(upload.contentType).toBe('image/jpeg');
    expect(upload.uploadUrlExpiresIn).toBe(900);
    const expiresIn = Date.parse(upload.expiresAt as string) - Date.now();
    expect(expiresIn).toBeGreaterThan(23.9 * 3600_000);
    expect(expiresIn).toBeLessThanOrEqual(24 * 3600_000);
    const wrongType = await fetch(upload.uploadUrl as string, {
      method: 'PUT',
      headers: { 'content-type': 'image/png' },
      body: 'x',
    });
    expect(wrongType.status).toBe(403);
  });

  it.each([
    [{ filename: 'a.gif', size: 10 }, 422, 'INVALID_FORMAT'],
    [{ filename: 'noextension', size: 10 }, 422, 'INVALID_FORMAT'],
    [{ filename: 'big.wav', size: 100 * 1024 * 1024 + 1 }, 413, 'FILE_TOO_LARGE'],
    [{ filename: '', size: 10 }, 400, 'VALIDATION_ERROR'],
    [{ filename: `${'a'.repeat(252)}.png`, size: 10 }, 400, 'VALIDATION_ERROR'],
    [{ filename: 'a.png', size: 0 }, 400, 'VALIDATION_ERROR'],
    [{ size: 10 }, 400, 'VALIDATION_ERROR'],
  ])('%j → %i %s', async (body, status, code) => {
    const response = await stack.api('POST', '/v1/upload', { token: account.apiKey, body });
    expect(response.status).toBe(status);
    expect(response.body.error?.code).toBe(code);
  });

  it('applies the plan limit: 25 MB on free', async () => {
    const free = await stack.createAccount({ plan: 'free' });
    const response = await stack.api('POST', '/v1/upload', {
      token: free.apiKey,
      body: { filename: 'big.wav', size: 25 * 1024 * 1024 + 1 },
    });
    expect(response.body.error?.code).toBe('FILE_TOO_LARGE');
  });
});

describe('Checks when a job first consumes an upload', () => {
  it('409 UPLOAD_NOT_COMPLETED before the PUT', async () => {
    const created = await stack.api<{ id: string }>('POST', '/v1/upload', {
      token: account.apiKey,
      body: { filename: 'later.png', size: 100 },
    });
    const response = await stack.api('POST', '/v1/image', {
      token: account.apiKey,
      body: { imageId: created.body.data!.id, preset: 'chill' },
    });
    expect(response.status).toBe(409);
    expect(response.body.error?.code).toBe('UPLOAD_NOT_COMPLETED');
  });

  it('422 INVALID_FORMAT when the bytes do not match the extension, or the kind the endpoint takes', async () => {
    const fake = await uploadFile(
      stack,
      account.apiKey,
      'fake.png',
      Buffer.from('not a png at all'),
    );
    const badBytes = await stack.api('POST', '/v1/image', {
      token: account.apiKey,
      body: { imageId: fake, preset: 'chill' },
    });
    expect(badBytes.status).toBe(422);
    expect(badBytes.body.error?.code).toBe('INVALID_FORMAT');
    const png = await uploadFile(stack, account.apiKey, 'real.png', await tinyPng());
    const wrongKind = await stack.api('POST', '/v1/audio', {
      token: account.apiKey,
      body: { audioId: png, preset: 'chill' },
    });
    expect(wrongKind.status).toBe(422);
    expect(wrongKind.body.error?.code).toBe('INVALID_FORMAT');
  });

  it('404 UPLOAD_NOT_FOUND for unknown, malformed and other accounts’ uploads, on every endpoint', async () => {
    const image = await uploadFile(stack, account.apiKey, 'mine.png', await tinyPng());
    const audio = await uploadFile(stack, account.apiKey, 'mine.wav', await speechWav('mine'));
    const text = await uploadFile(stack, account.apiKey, 'mine.txt', Buffer.from('mine'));
    const attempts: Array<[string, Record<string, string>]> = [];
    for (const id of ['upl_01HZZZZZZZZZZZZZZZZZZZZZZZ', 'garbage']) {
      attempts.push(
        ['/v1/image', { imageId: id }],
        ['/v1/audio', { audioId: id }],
        ['/v1/text', { fileId: id }],
      );
    }
    attempts.push(
      ['/v1/image', { imageId: image }],
      ['/v1/audio', { audioId: audio }],
      ['/v1/text', { fileId: text }],
    );
    for (const [path, source] of attempts) {
      const response = await stack.api('POST', path, {
        token: other.apiKey,
        body: { ...source, preset: 'chill' },
      });
      expect(response.status, `${path} ${JSON.stringify(source)}`).toBe(404);
      expect(response.body.error?.code).toBe('UPLOAD_NOT_FOUND');
    }
    // The owner can use its own upload.
    const own = await stack.api('POST', '/v1/text', {
      token: account.apiKey,
      body: { fileId: text, preset: 'chill' },
    });
    expect(own.status).toBe(202);
  });
});

describe('Job creation: validation', () => {
  it.each([
    ['neither preset nor operations', '/v1/text', { text: 'hi' }],
    [
      'both preset and operations',
      '/v1/text',
      { text: 'hi', preset: 'chill', operations: [{ type: 'trim' }] },
    ],
    ['neither text nor fileId', '/v1/text', { preset: 'chill' }],
    ['both text and fileId', '/v1/text', { preset: 'chill', text: 'a', fileId: 'upl_x' }],
    ['unknown preset', '/v1/text', { text: 'hi', preset: 'extreme' }],
    ['unknown operation', '/v1/text', { text: 'hi', operations: [{ type: 'shout' }] }],
    [
      'out-of-range param',
      '/v1/text',
      { text: 'hi', operations: [{ type: 'trim', params: { intensity: 101 } }] },
    ],
    ['no operations', '/v1/text', { text: 'hi', operations: [] }],
    [
      'eleven operations',
      '/v1/text',
      { text: 'hi', operations: Array.from({ length: 11 }, () => ({ type: 'trim' })) },
    ],
    ['bad webhookUrl', '/v1/text', { text: 'hi', preset: 'chill', webhookUrl: 'not a url' }],
    [
      'resize without dimensions',
      '/v1/image',
      { imageId: 'upl_x', operations: [{ type: 'resize', params: {} }] },
    ],
    ['missing audioId', '/v1/audio', { preset: 'podcast' }],
  ])('%s → 400 VALIDATION_ERROR with details', async (_name, path, body) => {
    const response = await stack.api(path === '/v1/text' ? 'POST' : 'POST', path, {
      token: account.apiKey,
      body,
    });
    expect(response.status).toBe(400);
    expect(response.body.error?.code).toBe('VALIDATION_ERROR');
    expect(Array.isArray(response.body.error?.details)).toBe(true);
  });

  it('rejects an Idempotency-Key longer than 255 characters', async () => {
    const response = await stack.api('POST', '/v1/text', {
      token: account.apiKey,
      headers: { 'idempotency-key': 'k'.repeat(256) },
      body: { text: 'hi', preset: 'chill', webhookUrl: 'http://127.0.0.1:9/hook' },
    });
    expect(response.body.error?.code).toBe('VALIDATION_ERROR');
  });
});

describe('Strings that cannot be stored (docs/decisions.md#strings)', () => {
  const NUL = '\u0000';

  it.each([
    ['inline text', '/v1/text', { text: `a${NUL}b`, preset: 'chill' }, 'body.text'],
    [
      'inline text over the fast path, stored in S3 before its job',
      '/v1/text',
      { text: `${'x'.repeat(60 * 1024)}${NUL}`, preset: 'chill' },
      'body.text',
    ],
    [
      'a webhookUrl',
      '/v1/text',
      { text: 'hi', preset: 'chill', webhookUrl: `http://127.0.0.1:9/a${NUL}b` },
      'body.webhookUrl',
    ],
    ['a filename', '/v1/upload', { filename: `a${NUL}b.png`, size: 10 }, 'body.filename'],
  ])(
    'refuses U+0000 in %s with 400 VALIDATION_ERROR, creating nothing',
    async (_name, path, body, field) => {
      const caller = await stack.createAccount({ plan: 'pro' });
      const response = await stack.api('POST', path, { token: caller.apiKey, body });
      expect(response.status, JSON.stringify(response.body)).toBe(400);
      expect(response.body.error?.code).toBe('VALIDATION_ERROR');
      expect(response.body.error?.details).toEqual([
        { path: field, message: expect.stringContaining('U+0000') },
      ]);
      const jobs = await stack.api<{ items: unknown[] }>('GET', '/v1/jobs', {
        token: caller.apiKey,
      });
      expect(jobs.body.data!.items).toEqual([]);
    },
  );

  it('refuses U+0000 in an account webhook URL set through the admin API', async () => {
    const created = await stack.admin('POST', '/admin/accounts', {
      webhookUrl: `http://127.0.0.1:9/a${NUL}b`,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(400);
    expect(created.body.error?.code).toBe('VALIDATION_ERROR');
    const updated = await stack.admin('PATCH', `/admin/accounts/${account.accountId}`, {
      webhookUrl: `http://127.0.0.1:9/a${NUL}b`,
    });
    expect(updated.status, JSON.stringify(updated.body)).toBe(400);
    expect(updated.body.error?.code).toBe('VALIDATION_ERROR');
  });

  it('stores JSON that escapes U+0000 faithfully through json-to-toon, inline and queued', async () => {
    const rows = Array.from({ length: 60 }, (_, index) => ({
      id: index,
      name: `user${NUL}${index}`,
      [`key${NUL}`]: index % 2 === 0,
    }));
    // JSON.stringify writes U+0000 as the escape \u0000: the text itself holds no NUL.
    const text = JSON.stringify(rows);
    expect(text).not.toContain(NUL);
    const inline = await stack.api<Job>('POST', '/v1/text', {
      token: account.apiKey,
      body: { text, preset: 'aggressive' },
    });
    expect(inline.status, JSON.stringify(inline.body)).toBe(200);
    expect(inline.body.data!.status).toBe('completed');
    const queued = await stack.api<Job>('POST', '/v1/text', {
      token: account.apiKey,
      body: { text, preset: 'aggressive', webhookUrl: 'http://127.0.0.1:9/hook' },
    });
    expect(queued.status).toBe(202);
    const job = await waitForJob(account.apiKey, queued.body.data!.id);
    expect(job.status, job.error).toBe('completed');
    for (const output of [inline.body.data!.result!.outputText!, job.result!.outputText!]) {
      expect(output).not.toContain(NUL);
      expect(output).toContain('\\u0000');
    }
  });

  it('still reports an upload id holding U+0000 as unknown, like any id that does not parse', async () => {
    const response = await stack.api('POST', '/v1/image', {
      token: account.apiKey,
      body: { imageId: `upl_${NUL}`, preset: 'chill' },
    });
    expect(response.status).toBe(404);
    expect(response.body.error?.code).toBe('UPLOAD_NOT_FOUND');
  });
});

describe('Webhook targets, checked when given (docs/decisions.md#webhooks)', () => {
  // The local stack allows http and loopback targets; these are refused by every deployment.
  const FORBIDDEN = [
    'http://169.254.169.254/latest/meta-data/',
    'http://[::ffff:a9fe:a9fe]/',
    'http://10.0.0.1/hook',
    'http://0.0.0.0:8080/hook',
    'ftp://127.0.0.1/hook',
    'http://user:secret@127.0.0.1:9/hook',
  ];

  it.each(FORBIDDEN)('refuses a job whose webhookUrl is %s, creating nothing', async (url) => {
    const caller = await stack.createAccount({ plan: 'pro' });
    const response = await stack.api('POST', '/v1/text', {
      token: caller.apiKey,
      body: { text: 'hi', preset: 'chill', webhookUrl: url },
    });
    expect(response.status, JSON.stringify(response.body)).toBe(400);
    expect(response.body.error?.code).toBe('VALIDATION_ERROR');
    expect(response.body.error?.details).toEqual([
      { path: 'body.webhookUrl', message: expect.any(String) },
    ]);
    const jobs = await stack.api<{ items: unknown[] }>('GET', '/v1/jobs', { token: caller.apiKey });
    expect(jobs.body.data!.items).toEqual([]);
  });

  it('refuses a forbidden account default from the admin API and keeps the one it had', async () => {
    const hook = 'http://127.0.0.1:9/account-hook';
    const owner = await stack.createAccount({ webhookUrl: hook });
    const metadata = 'http://169.254.169.254/latest/meta-data/';
    const created = await stack.admin('POST', '/admin/accounts', { webhookUrl: metadata });
    expect(created.status, JSON.stringify(created.body)).toBe(400);
    expect(created.body.error?.code).toBe('VALIDATION_ERROR');
    const updated = await stack.admin('PATCH', `/admin/accounts/${owner.accountId}`, {
      webhookUrl: metadata,
    });
    expect(updated.status, JSON.stringify(updated.body)).toBe(400);
    expect(updated.body.error?.code).toBe('VALIDATION_ERROR');
    const shown = await stack.admin<{ webhookUrl: string }>(
      'GET',
      `/admin/accounts/${owner.accountId}`,
    );
    expect(shown.body.data!.webhookUrl).toBe(hook);
  });

  it('accepts what this deployment allows: http to loopback locally, and host names', async () => {
    for (const webhookUrl of ['http://127.0.0.1:9/hook', 'https://hooks.example.com/tamp']) {
      const response = await stack.api('POST', '/v1/text', {
        token: account.apiKey,
        body: { text: 'hi', preset: 'chill', webhookUrl },
      });
      expect(response.status, JSON.stringify(response.body)).toBe(202);
    }
  });
});

describe('Text jobs', () => {
  it('runs small inline text on the fast path: HTTP 200, completed, outputText', async () => {
    const response = await stack.api<Job>('POST', '/v1/text', {
      token: account.apiKey,
      body: { text: 'Hello   world!\r\n\r\n\r\nSecond   paragraph.   ', preset: 'medium' },
    });
    expect(response.status).toBe(200);
    const job = response.body.data!;
    expect(job.status).toBe('completed');
    expect(job.result?.outputText).toContain('Hello world!');
    expect(job.result?.metrics).toMatchObject({ operationsApplied: ['trim'] });
    expect(typeof job.result?.metrics.processingMs).toBe('number');
  });

  it('queues text over 50 KB and still answers with outputText', async () => {
    const text = 'Lorem ipsum   dolor sit amet.  '.repeat(2_000);
    const created = await stack.api<Job>('POST', '/v1/text', {
      token: account.apiKey,
      body: { text, preset: 'chill' },
    });
    expect(created.status).toBe(202);
    expect(created.body.data).toEqual({ id: expect.stringMatching(/^job_/), status: 'created' });
    const job = await waitForJob(account.apiKey, created.body.data!.id);
    expect(job.status).toBe('completed');
    expect(job.result?.outputText?.length).toBeLessThan(text.length);
  });

  it('accepts 5,000,000 characters of inline text and answers the whole output as outputText', async () => {
    const text = 'abcd '.repeat(1_000_000);
    const created = await stack.api<Job>('POST', '/v1/text', {
      token: account.apiKey,
      body: { text, preset: 'chill' },
    });
    expect(created.status).toBe(202);
    // Five times NATS's 1 MB message limit: the read must not travel as one message.
    const job = await waitForJob(account.apiKey, created.body.data!.id);
    expect(job.status).toBe('completed');
    expect(job.result?.outputText).toBe(text.trimEnd());
    expect(JSON.stringify(job.result)).not.toContain('outputTextKey');
  });

  it('converts JSON to TOON in the aggressive preset', async () => {
    const rows = Array.from({ length: 60 }, (_, index) => ({
      id: index,
      name: `user${index}`,
      active: index % 2 === 0,
    }));
    const response = await stack.api<Job>('POST', '/v1/text', {
      token: account.apiKey,
      body: { text: JSON.stringify(rows), preset: 'aggressive' },
    });
    expect(response.status).toBe(200);
    const metrics = response.body.data!.result!.metrics as { tokensIn: number; tokensOut: number };
    expect(metrics.tokensOut).toBeLessThan(metrics.tokensIn * 0.7);
  });
});

describe('Image jobs', () => {
  it('runs a small image inline: HTTP 200 with a downloadable WebP', async () => {
    const imageId = await uploadFile(stack, account.apiKey, 'photo.jpg', await photo(800, 600));
    const response = await stack.api<Job>('POST', '/v1/image', {
      token: account.apiKey,
      body: { imageId, preset: 'thumbnail' },
    });
    expect(response.status).toBe(200);
    const job = response.body.data!;
    expect(job.status).toBe('completed');
    expect(job.result?.metrics).toMatchObject({ operationsApplied: ['resize', 'encode'] });
    const download = await fetch(job.result!.outputUrl!);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-disposition')).toContain('result.webp');
    const bytes = Buffer.from(await download.arrayBuffer());
    expect(bytes.subarray(8, 12).toString()).toBe('WEBP');
  });

  it('always queues AVIF, and a fresh outputUrl is signed on every read', async () => {
    const imageId = await uploadFile(stack, account.apiKey, 'photo.png', await tinyPng());
    const created = await stack.api<Job>('POST', '/v1/image', {
      token: account.apiKey,
      body: { imageId, preset: 'aggressive' },
    });
    expect(created.status).toBe(202);
    const job = await waitForJob(account.apiKey, created.body.data!.id);
    expect(job.status).toBe('completed');
    // A signature carries its time to the second (X-Amz-Date): read again once this machine's
    // clock, which the services sign with, has left the first URL's second.
    const signedAt = (url: string) => new URL(url).searchParams.get('X-Amz-Date') ?? '';
    const firstSignedAt = signedAt(job.result!.outputUrl!);
    expect(firstSignedAt).toMatch(/^\d{8}T\d{6}Z$/);
    const amzNow = () => new Date().toISOString().replace(/[-:]|\.\d{3}/g, '');
    await vi.waitFor(() => expect(amzNow() > firstSignedAt).toBe(true), {
      timeout: 5_000,
      interval: 20,
    });
    const again = await stack.api<Job>('GET', `/v1/jobs/${job.id}`, { token: account.apiKey });
    expect(again.body.data!.result!.outputUrl).not.toBe(job.result!.outputUrl);
    expect(signedAt(again.body.data!.result!.outputUrl!) > firstSignedAt).toBe(true);
  });
});

describe('Audio jobs', () => {
  it('are always queued and produce Opus in Ogg', async () => {
    const audioId = await uploadFile(stack, account.apiKey, 'speech.wav', await speechWav());
    const created = await stack.api<Job>('POST', '/v1/audio', {
      token: account.apiKey,
      body: { audioId, preset: 'podcast' },
    });
    expect(created.status).toBe(202);
    const job = await waitForJob(account.apiKey, created.body.data!.id);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    const bytes = Buffer.from(await (await fetch(job.result!.outputUrl!)).arrayBuffer());
    expect(bytes.subarray(0, 4).toString()).toBe('OggS');
  });
});

describe('GET /v1/jobs/:id', () => {
  it('answers JOB_NOT_FOUND for unknown, malformed and other accounts’ ids', async () => {
    const mine = await stack.api<Job>('POST', '/v1/text', {
      token: account.apiKey,
      body: { text: 'x', preset: 'chill' },
    });
    for (const id of [mine.body.data!.id, 'job_01HZZZZZZZZZZZZZZZZZZZZZZZ', 'not-an-id']) {
      const response = await stack.api('GET', `/v1/jobs/${id}`, { token: other.apiKey });
      expect(response.status, id).toBe(404);
      expect(response.body.error?.code).toBe('JOB_NOT_FOUND');
    }
  });

  it.each(['31', '-1', 'soon'])('rejects wait=%s', async (wait) => {
    const response = await stack.api(
      'GET',
      `/v1/jobs/job_01HZZZZZZZZZZZZZZZZZZZZZZZ?wait=${wait}`,
      { token: account.apiKey },
    );
    expect(response.body.error?.code).toBe('VALIDATION_ERROR');
  });
});

describe('GET /v1/jobs', () => {
  it('lists newest first with filters, an opaque cursor and summaries without URLs or text', async () => {
    const lister = await stack.createAccount({ plan: 'pro' });
    const ids: string[] = [];
    for (let index = 0; index < 5; index++) {
      const response = await stack.api<Job>('POST', '/v1/text', {
        token: lister.apiKey,
        body: { text: `t${index}`, preset: 'chill' },
      });
      ids.push(response.body.data!.id);
    }
    const first = await stack.api<{
      items: Array<Record<string, unknown>>;
      nextCursor: string | null;
    }>('GET', '/v1/jobs?limit=2&type=text', { token: lister.apiKey });
    expect(first.body.data!.items.map((item) => item.id)).toEqual([ids[4], ids[3]]);
    const summary = first.body.data!.items[0]!;
    expect(summary).toMatchObject({ type: 'text', status: 'completed' });
    expect(summary.metrics).toEqual({
      inputSize: expect.any(Number),
      outputSize: expect.any(Number),
      compressionRatio: expect.any(Number),
    });
    expect(summary).not.toHaveProperty('outputUrl');
    expect(JSON.stringify(summary)).not.toContain('outputText');
    const second = await stack.api<{ items: Array<{ id: string }>; nextCursor: string | null }>(
      'GET',
      `/v1/jobs?limit=2&type=text&cursor=${first.body.data!.nextCursor}`,
      { token: lister.apiKey },
    );
    expect(second.body.data!.items.map((item) => item.id)).toEqual([ids[2], ids[1]]);
    const tampered = await stack.api('GET', '/v1/jobs?cursor=bm9wZQ', { token: lister.apiKey });
    expect(tampered.body.error?.code).toBe('VALIDATION_ERROR');
    const none = await stack.api<{ items: unknown[] }>('GET', '/v1/jobs?type=audio', {
      token: lister.apiKey,
    });
    expect(none.body.data!.items).toEqual([]);
    for (const query of ['limit=0', 'limit=101', 'type=gif', 'status=done']) {
      expect(
        (await stack.api('GET', `/v1/jobs?${query}`, { token: lister.apiKey })).body.error?.code,
      ).toBe('VALIDATION_ERROR');
    }
  });
});

describe('Idempotency-Key', () => {
  it('gives 50 concurrent identical creations exactly one job and one reservation', async () => {
    const buyer = await stack.createAccount({ plan: 'pro', credits: 2 });
    const body = { text: 'same request', preset: 'chill', webhookUrl: 'http://127.0.0.1:9/hook' };
    const responses = await Promise.all(
      Array.from({ length: 50 }, () =>
        stack.api<Job>('POST', '/v1/text', {
          token: buyer.apiKey,
          headers: { 'idempotency-key': 'order-1' },
          body,
        }),
      ),
    );
    expect(responses.map((response) => response.status)).toEqual(Array(50).fill(202));
    expect(new Set(responses.map((response) => response.body.data!.id)).size).toBe(1);
    // Two credits: one was reserved by the 50 requests, so exactly one more job fits.
    const second = await stack.api('POST', '/v1/text', {
      token: buyer.apiKey,
      body: { ...body, text: 'another' },
    });
    expect(second.status).toBe(202);
    const third = await stack.api('POST', '/v1/text', {
      token: buyer.apiKey,
      body: { ...body, text: 'a third' },
    });
    expect(third.status).toBe(402);
    expect(third.body.error?.code).toBe('INSUFFICIENT_CREDITS');
  });

  it('rejects the same key with another body: 422 IDEMPOTENCY_KEY_REUSED', async () => {
    const body = { text: 'first', preset: 'chill', webhookUrl: 'http://127.0.0.1:9/hook' };
    const headers = { 'idempotency-key': 'reuse-me' };
    expect(
      (await stack.api('POST', '/v1/text', { token: account.apiKey, headers, body })).status,
    ).toBe(202);
    const reused = await stack.api('POST', '/v1/text', {
      token: account.apiKey,
      headers,
      body: { ...body, text: 'second' },
    });
    expect(reused.status).toBe(422);
    expect(reused.body.error?.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });
});

describe('Credits', () => {
  it('accepts exactly 100 of 200 concurrent 1-credit jobs on an account with 100 credits', async () => {
    const buyer = await stack.createAccount({ plan: 'pro', credits: 100 });
    // As a careful client does: each job has its own Idempotency-Key, and a 503 (the system
    // saturated, nothing created) is sent again with it after Retry-After.
    const create = async (index: number) => {
      const key = `job-${index}`;
      for (let attempt = 0; attempt < 20; attempt++) {
        const response = await stack.api('POST', '/v1/text', {
          token: buyer.apiKey,
          headers: { 'idempotency-key': key },
          body: { text: `job ${index}`, preset: 'chill', webhookUrl: 'http://127.0.0.1:9/hook' },
        });
        if (response.status !== 503 && response.status !== 409) return response.status;
        const retryAfter = Number(response.headers.get('retry-after'));
        expect(retryAfter).toBeGreaterThan(0);
        await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000));
      }
      return 503;
    };
    const statuses = await Promise.all(Array.from({ length: 200 }, (_, index) => create(index)));
    expect(statuses.filter((status) => status === 202)).toHaveLength(100);
    expect(statuses.filter((status) => status === 402)).toHaveLength(100);
    const account = await stack.admin<{ credits: { available: number } }>(
      'GET',
      `/admin/accounts/${buyer.accountId}`,
    );
    expect(account.body.data!.credits.available).toBe(0);
  }, 120_000);
});

describe('GET /v1/usage/current', () => {
  it('reports the period and per-pipeline usage of completed jobs, video always zero', async () => {
    const user = await stack.createAccount({ plan: 'pro' });
    await stack.api('POST', '/v1/text', {
      token: user.apiKey,
      body: { text: 'héllo wörld', preset: 'chill' },
    });
    type Usage = Record<string, Record<string, number>>;
    const usage = await vi.waitFor(
      async () => {
        const current = (await stack.api<Usage>('GET', '/v1/usage/current', { token: user.apiKey }))
          .body.data!;
        expect(current.text?.requests).toBe(1);
        return current;
      },
      { timeout: 10_000, interval: 100 },
    );
    expect(usage.text).toEqual({ requests: 1, characters: 11, inputBytes: 13 });
    expect(usage.video).toEqual({ requests: 0, minutes: 0, inputBytes: 0 });
    expect(usage.audio).toEqual({ requests: 0, minutes: 0, inputBytes: 0 });
    expect(usage.image).toEqual({ requests: 0, megapixels: 0, inputBytes: 0 });
    const period = usage.period as unknown as { start: string; end: string };
    expect(Date.parse(period.start)).toBeLessThanOrEqual(Date.now());
    expect(Date.parse(period.end)).toBeGreaterThan(Date.now());
  });
});

describe('Billing cycle anchor (admin) and GET /v1/usage/current', () => {
  const DAY_MS = 24 * 60 * 60 * 1000;
  const usagePeriod = async (apiKey: string) =>
    (
      await stack.api<{ period: { start: string; end: string } }>('GET', '/v1/usage/current', {
        token: apiKey,
      })
    ).body.data!.period;

  it('reports the 30-day cycle containing now once an anchor is set, the month once cleared', async () => {
    const user = await stack.createAccount({ plan: 'pro' });
    const now = new Date();
    const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    expect((await usagePeriod(user.apiKey)).start).toBe(monthStart.toISOString());

    // 45 days ago: now lies in the second cycle, 30 to 60 days after the anchor.
    const anchor = new Date(Math.floor(Date.now() / 1000) * 1000 - 45 * DAY_MS);
    const updated = await stack.admin<{ billingCycleAnchor: string }>(
      'PATCH',
      `/admin/accounts/${user.accountId}`,
      { billingCycleAnchor: anchor.toISOString() },
    );
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(updated.body.data!.billingCycleAnchor).toBe(anchor.toISOString());
    expect(await usagePeriod(user.apiKey)).toEqual({
      start: new Date(anchor.getTime() + 30 * DAY_MS).toISOString(),
      end: new Date(anchor.getTime() + 60 * DAY_MS).toISOString(),
    });

    const cleared = await stack.admin('PATCH', `/admin/accounts/${user.accountId}`, {
      billingCycleAnchor: null,
    });
    expect(cleared.status).toBe(200);
    expect((await usagePeriod(user.apiKey)).start).toBe(monthStart.toISOString());
  });

  it('refuses future and malformed anchors with 400 VALIDATION_ERROR, changing nothing', async () => {
    const user = await stack.createAccount({ plan: 'pro' });
    const before = await usagePeriod(user.apiKey);
    const future = new Date(Date.now() + DAY_MS).toISOString();
    for (const billingCycleAnchor of [future, '2025-01-15', '2025-13-01T00:00:00Z', 'yesterday']) {
      const response = await stack.admin('PATCH', `/admin/accounts/${user.accountId}`, {
        billingCycleAnchor,
      });
      expect(response.status, billingCycleAnchor).toBe(400);
      expect(response.body.error?.code).toBe('VALIDATION_ERROR');
    }
    const created = await stack.admin('POST', '/admin/accounts', { billingCycleAnchor: future });
    expect(created.status).toBe(400);
    expect(created.body.error?.code).toBe('VALIDATION_ERROR');
    expect(await usagePeriod(user.apiKey)).toEqual(before);
  });
});

describe('Presets and operations endpoints', () => {
  it.each(['audio', 'image', 'text'])('%s', async (pipeline) => {
    const presets = await stack.api<{ presets: Array<{ name: string; queued: boolean }> }>(
      'GET',
      `/v1/${pipeline}/presets`,
      {
        token: account.apiKey,
      },
    );
    expect(presets.status).toBe(200);
    expect(presets.body.data!.presets.length).toBeGreaterThan(2);
    const operations = await stack.api<{ operations: Array<{ type: string; params: object }> }>(
      'GET',
      `/v1/${pipeline}/operations`,
      { token: account.apiKey },
    );
    expect(operations.body.data!.operations.length).toBeGreaterThan(0);
  });
});

describe('Rate limits', () => {
  it('sets RateLimit headers and answers 429 RATE_LIMITED with Retry-After past the plan rate', async () => {
    const free = await stack.createAccount({ plan: 'free' });
    // The limiter counts in fixed one-minute windows: all 61 requests must land in one, so they
    // start with 20 s of it left (they take about a second).
    await rateLimitWindowWithRoom(20_000);
    const responses = [];
    for (let index = 0; index < 61; index++) {
      responses.push(await stack.api('GET', '/v1/text/presets', { token: free.apiKey }));
    }
    expect(responses[0]!.headers.get('ratelimit-limit')).toBe('60');
    // One window: the count only went down (a new window would have started it again at 59).
    expect(
      responses.slice(0, 60).map((response) => response.headers.get('ratelimit-remaining')),
    ).toEqual(Array.from({ length: 60 }, (_, index) => String(59 - index)));
    expect(responses[59]!.status).toBe(200);
    const limited = responses[60]!;
    expect(limited.status).toBe(429);
    expect(limited.body.error?.code).toBe('RATE_LIMITED');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});

describe('OpenAPI', () => {
  it('serves an OpenAPI 3.1 document generated from the schemas, and a docs page', async () => {
    const document = (await (await fetch(`${stack.publicUrl}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, unknown>;
    };
    expect(document.openapi).toMatch(/^3\.1/);
    for (const path of [
      '/v1/upload',
      '/v1/audio',
      '/v1/image',
      '/v1/text',
      '/v1/jobs',
      '/v1/jobs/{id}',
      '/v1/usage/current',
    ]) {
      expect(Object.keys(document.paths)).toContain(path);
    }
    expect((await fetch(`${stack.publicUrl}/docs`)).status).toBe(200);
  });
});
