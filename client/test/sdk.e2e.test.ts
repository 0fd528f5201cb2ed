import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { creditCost, describePresets, PIPELINE_DEFINITIONS } from '@tamp/proto';
import { photo, speechWav } from '@tamp/scripts/fixtures/media';
import { freePort } from '@tamp/scripts/infra/launcher';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestStack, type TestAccount, type TestStack } from '../../test/support/stack';
import {
  type CompressProgress,
  InsufficientCreditsError,
  InvalidFormatError,
  JobNotFoundError,
  type RetryEvent,
  Tamp,
  TampConnectionError,
  UnauthorizedError,
  UnavailableError,
  ValidationError,
  verifyWebhook,
  WebhookVerificationError,
} from '../src/index';

/**
 * The SDK against the real stack: every service as its own process on real NATS, FerretDB and
 * MinIO. The free plan is limited to 3 requests a minute here so that 429 is real; every other
 * test uses a pro account.
 */

const FREE_RATE_PER_MINUTE = 3;

let stack: TestStack;
let pro: TestAccount;
let tamp: Tamp;
let scratch: string;
const retries: RetryEvent[] = [];

beforeAll(async () => {
  stack = await startTestStack({
    env: {
      PLANS_JSON: JSON.stringify({
        free: { rateLimitPerMinute: FREE_RATE_PER_MINUTE },
        pro: { rateLimitPerMinute: 100_000 },
      }),
    },
  });
  pro = await stack.createAccount({ plan: 'pro' });
  tamp = new Tamp({
    apiKey: pro.apiKey,
    baseUrl: stack.publicUrl,
    onRetry: (event) => retries.push(event),
  });
  scratch = await mkdtemp(join(tmpdir(), 'tamp-sdk-'));
}, 240_000);

let talk: Promise<string> | undefined;
/** A short spoken WAV, made once. */
function talkWav(): Promise<string> {
  talk ??= speechWav('The client waits for queued jobs with a long poll.').then(async (bytes) => {
    const path = join(scratch, 'talk.wav');
    await writeFile(path, bytes);
    return path;
  });
  return talk;
}

afterAll(async () => {
  await stack?.stop();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('compress: the whole flow in one call', () => {
  it('image: uploads with progress, runs inline, writes the WebP', async () => {
    const input = join(scratch, 'photo.jpg');
    await writeFile(input, await photo(1600, 1200));
    const events: CompressProgress[] = [];
    const result = await tamp.compress(input, {
      preset: 'medium',
      output: `${scratch}/`,
      onProgress: (event) => events.push(event),
    });
    expect(result.job.status).toBe('completed');
    expect(result.output).toBe(join(scratch, 'photo.webp'));
    const written = await readFile(result.output!);
    expect((await sharp(written).metadata()).format).toBe('webp');
    expect(written.byteLength).toBe(result.job.result.metrics.outputSize);
    const uploads = events.filter((event) => event.phase === 'upload');
    expect(uploads.at(-1)).toMatchObject({ loaded: (await stat(input)).size });
    const downloads = events.filter((event) => event.phase === 'download');
    expect(downloads.at(-1)).toMatchObject({ loaded: written.byteLength });
  });

  it('text: inline text comes back as text; a .txt file is queued and downloaded', async () => {
    const inline = await tamp.compress(
      { text: 'Hello   world!\n\n\n\nBye.' },
      { preset: 'medium' },
    );
    expect(inline.job.result.outputText).toBe('Hello world!\n\nBye.');

    const file = join(scratch, 'notes.txt');
    await writeFile(file, `${'Some   text,   with   spaces.\n\n\n\n'.repeat(50)}`);
    const waits: string[] = [];
    const queued = await tamp.compress(file, {
      preset: 'chill',
      output: join(scratch, 'notes.out.txt'),
      onProgress: (event) => {
        if (event.phase === 'wait') waits.push(event.job.status);
      },
    });
    expect(waits[0]).toBe('created');
    const text = await readFile(queued.output!, 'utf8');
    expect(text.length).toBeGreaterThan(0);
    expect(text.length).toBeLessThan((await stat(file)).size);
  });

  it('audio: queued, long-polled, the Opus result downloaded', async () => {
    const input = await talkWav();
    const result = await tamp.compress(input, { preset: 'podcast', output: `${scratch}/` });
    expect(result.output).toBe(join(scratch, 'talk.ogg'));
    const head = (await readFile(result.output!)).subarray(0, 4).toString('latin1');
    expect(head).toBe('OggS');
    expect(result.job.result.metrics.operationsApplied.at(-1)).toBe('encode');
  });

  it('takes a Blob and a stream as well as a path', async () => {
    const bytes = await photo(400, 300, 'png');
    const fromBlob = await tamp.compress(new Blob([new Uint8Array(bytes)]), {
      filename: 'blob.png',
      preset: 'thumbnail',
    });
    expect(fromBlob.job.result.outputUrl).toMatch(/result\.webp/);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new Uint8Array(bytes));
        controller.close();
      },
    });
    const upload = await tamp.upload(stream, { filename: 'stream.png', size: bytes.byteLength });
    expect(upload).toMatchObject({ contentType: 'image/png', size: bytes.byteLength });
  });
});

describe('jobs', () => {
  it('one Idempotency-Key, one job and one charge, however often it is sent', async () => {
    const account = await stack.createAccount({ plan: 'pro', credits: 1 });
    const client = new Tamp({ apiKey: account.apiKey, baseUrl: stack.publicUrl });
    const upload = await client.upload(await talkWav());
    const body = { audioId: upload.id, preset: 'chill' as const };
    const first = await client.createJob('audio', body, { idempotencyKey: 'same-key' });
    const again = await client.createJob('audio', body, { idempotencyKey: 'same-key' });
    expect(again.id).toBe(first.id);
    // The one credit was taken once: a new key finds none left.
    await expect(client.createJob('audio', body)).rejects.toBeInstanceOf(InsufficientCreditsError);
    expect((await client.waitForJob(first.id)).status).toBe('completed');
  });

  it('waitForJob gives up with the last state when its time is up', async () => {
    const upload = await tamp.upload(await talkWav());
    const job = await tamp.createJob('audio', { audioId: upload.id, preset: 'lecture' });
    await expect(tamp.waitForJob(job.id, { timeoutMs: 1 })).rejects.toMatchObject({
      name: 'TampTimeoutError',
    });
    const controller = new AbortController();
    const waiting = tamp.waitForJob(job.id, { signal: controller.signal });
    controller.abort(new Error('stop'));
    await expect(waiting).rejects.toThrow('stop');
  });

  it('listJobs walks every page of the cursor', async () => {
    const seen: string[] = [];
    for await (const job of tamp.listJobs({ limit: 2 })) seen.push(job.id);
    expect(seen.length).toBeGreaterThanOrEqual(6);
    expect(new Set(seen).size).toBe(seen.length);
    const completed = [];
    for await (const job of tamp.listJobs({ status: 'completed', type: 'audio' })) {
      completed.push(job);
    }
    expect(completed.every((job) => job.type === 'audio' && job.status === 'completed')).toBe(true);
  });

  it('usage counts completed jobs; the catalogues are proto definitions', async () => {
    // Usage follows the jobs' events, recorded by billing half a second at most behind them.
    await vi.waitFor(
      async () => {
        const usage = await tamp.usage();
        expect(usage.image.requests).toBeGreaterThanOrEqual(2);
        expect(usage.audio.requests).toBeGreaterThanOrEqual(1);
        expect(usage.text.requests).toBeGreaterThanOrEqual(2);
      },
      { timeout: 10_000, interval: 100 },
    );
    expect(await tamp.presets('image')).toEqual(
      JSON.parse(JSON.stringify(describePresets(PIPELINE_DEFINITIONS.image))),
    );
    const operations = await tamp.operations('audio');
    expect(operations.operations.map((operation) => operation.type)).toContain('speedup');
  });
});

describe('typed errors', () => {
  it('one class per code, with the server message and request id', async () => {
    const stranger = new Tamp({ apiKey: 'sk_live_unknown', baseUrl: stack.publicUrl });
    const unauthorized = await stranger.usage().catch((error: unknown) => error);
    expect(unauthorized).toBeInstanceOf(UnauthorizedError);
    expect(unauthorized).toMatchObject({ code: 'UNAUTHORIZED', status: 401 });
    expect((unauthorized as UnauthorizedError).requestId).toBeTruthy();

    await expect(tamp.getJob('job_00000000000000000000000000')).rejects.toBeInstanceOf(
      JobNotFoundError,
    );

    const notAudio = join(scratch, 'fake.mp3');
    await writeFile(notAudio, await photo(64, 64, 'png'));
    const upload = await tamp.upload(notAudio);
    await expect(
      tamp.createJob('audio', { audioId: upload.id, preset: 'chill' }),
    ).rejects.toBeInstanceOf(InvalidFormatError);

    const broke = await stack.createAccount({ plan: 'pro', credits: 0 });
    const poor = new Tamp({ apiKey: broke.apiKey, baseUrl: stack.publicUrl });
    await expect(poor.compress({ text: 'hi' }, { preset: 'chill' })).rejects.toMatchObject({
      code: 'INSUFFICIENT_CREDITS',
      status: 402,
    });
  });

  it('a request that fails proto validation is refused before it is sent', async () => {
    const before = retries.length;
    const error = await tamp
      .createJob('image', {
        imageId: 'upl_x',
        operations: [{ type: 'encode', params: { quality: 101 } }],
      })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error).toMatchObject({ status: 0 });
    expect((error as ValidationError).details).toEqual(
      expect.arrayContaining([expect.objectContaining({ path: 'operations.0.params.quality' })]),
    );
    expect(retries.length).toBe(before);
  });
});

describe('webhooks', () => {
  let receiver: Server;
  const deliveries: { headers: IncomingHttpHeaders; body: Buffer }[] = [];

  beforeAll(async () => {
    receiver = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        deliveries.push({ headers: request.headers, body: Buffer.concat(chunks) });
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  });

  afterAll(() => new Promise<void>((resolve) => receiver.close(() => resolve())));

  it('verifies a real delivery in both formats, and refuses a tampered one', async () => {
    const port = (receiver.address() as AddressInfo).port;
    const job = await tamp.createJob('text', {
      text: 'Deliver   me.',
      preset: 'chill',
      webhookUrl: `http://127.0.0.1:${port}/hook`,
    });
    await tamp.waitForJob(job.id);
    const deadline = Date.now() + 30_000;
    while (deliveries.length === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const [delivery] = deliveries;
    expect(delivery).toBeDefined();
    const { body, headers } = delivery!;

    const standard = await verifyWebhook(body, headers, pro.webhookSecret);
    expect(standard).toMatchObject({
      format: 'standard-webhooks',
      event: { event: 'job.completed', job: { id: job.id, status: 'completed' } },
    });
    const serviceOnly = Object.fromEntries(
      Object.entries(headers).filter(([name]) => !name.startsWith('webhook-')),
    );
    const service = await verifyWebhook(body.toString('utf8'), serviceOnly, pro.webhookSecret);
    expect(service).toMatchObject({ format: 'x-service', id: `${job.id}:job.completed` });

    const tampered = Buffer.from(body.toString('utf8').replace('completed', 'failed!!!'));
    await expect(verifyWebhook(tampered, headers, pro.webhookSecret)).rejects.toBeInstanceOf(
      WebhookVerificationError,
    );
    await expect(
      verifyWebhook(body, serviceOnly, pro.webhookSecret, {
        nowSeconds: Number(headers['x-service-timestamp']) + 300,
      }),
    ).rejects.toThrow(/tolerance/);
  });
});

describe('retries on real failures', () => {
  it('429: waits for Retry-After and carries on', { timeout: 150_000 }, async () => {
    const free = await stack.createAccount({ plan: 'free' });
    const events: RetryEvent[] = [];
    const limited = new Tamp({
      apiKey: free.apiKey,
      baseUrl: stack.publicUrl,
      onRetry: (event) => events.push(event),
    });
    // The limit is per fixed minute: a few more calls than it allows meet it even across a boundary.
    for (let call = 0; call < 2 * FREE_RATE_PER_MINUTE + 2; call++) {
      await limited.usage();
      if (events.length > 0) break;
    }
    const rateLimited = events.filter((event) => event.reason === 'RATE_LIMITED');
    expect(rateLimited.length).toBeGreaterThanOrEqual(1);
    const retryAfter = (rateLimited[0]!.error as { retryAfterSeconds?: number }).retryAfterSeconds;
    expect(retryAfter).toBeGreaterThan(0);
    expect(rateLimited[0]!.delayMs).toBeGreaterThanOrEqual(retryAfter! * 1000);
  });

  it('network failure: retried with backoff, then a connection error', async () => {
    const closed = await freePort();
    const events: RetryEvent[] = [];
    const nowhere = new Tamp({
      apiKey: 'sk_live_x',
      baseUrl: `http://127.0.0.1:${closed}`,
      retry: { maxRetries: 2, baseDelayMs: 10 },
      onRetry: (event) => events.push(event),
    });
    await expect(nowhere.usage()).rejects.toBeInstanceOf(TampConnectionError);
    expect(events.map((event) => event.reason)).toEqual(['network', 'network']);
  });

  it('503 with the job service stopped: a keyed creation is retried into one job; an inline one is not retried', {
    timeout: 120_000,
  }, async () => {
    // One audio job, and the inline text whose creation may still land once the service resumes.
    const account = await stack.createAccount({
      plan: 'pro',
      credits: creditCost('audio', 1) + creditCost('text', 1),
    });
    const events: RetryEvent[] = [];
    const client = new Tamp({
      apiKey: account.apiKey,
      baseUrl: stack.publicUrl,
      onRetry: (event) => events.push(event),
    });
    const upload = await client.upload(await talkWav());
    const pid = stack.services.services.find((service) => service.name === 'job')!.pid()!;
    // Stopped, not killed: a killed service is restarted within the 5 s the gateway sends a
    // request that reached nobody again for, and the creation would simply succeed. A stopped
    // one still holds its subscription, so the gateway's call goes silent and answers 503.
    process.kill(pid, 'SIGSTOP');
    let creating: Promise<{ id: string }> | undefined;
    try {
      // Inline text is not deduplicated by the server: a 503 is handed to the caller at once.
      await expect(client.compress({ text: 'inline' }, { preset: 'chill' })).rejects.toBeInstanceOf(
        UnavailableError,
      );
      expect(events).toEqual([]);

      // A queued creation carries its Idempotency-Key: retried until the service is back.
      creating = client.createJob('audio', { audioId: upload.id, preset: 'chill' });
      creating.catch(() => undefined);
      for (let poll = 0; poll < 600 && events.length === 0; poll++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const job = await creating!;
    expect(events.some((event) => event.reason === 'UNAVAILABLE')).toBe(true);
    expect(events.every((event) => event.path === '/v1/audio')).toBe(true);
    expect((await client.waitForJob(job.id)).status).toBe('completed');
    const jobs = [];
    for await (const listed of client.listJobs()) jobs.push(listed);
    // The retries made one audio job; the inline text's outcome was "unknown" (it may exist).
    expect(jobs.filter((listed) => listed.type === 'audio').map((listed) => listed.id)).toEqual([
      job.id,
    ]);
  });
});
