import { execFile as execFileCallback } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import {
  createServer,
  type IncomingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { tinyPng } from '@tamp/scripts/fixtures/media';
import { type Db, MongoClient } from 'mongodb';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  type TampEvent,
  verifyTampDelivery,
} from '../../services/webhook/examples/verify-delivery';
import { startTestStack, type TestAccount, type TestStack, uploadFile } from '../support/stack';
import { assertStaysTrue } from '../support/stays-true';

/**
 * Webhook deliveries through the whole stack (local policy: http and loopback allowed), received
 * by real node:http servers that keep every request's raw bytes. The retry schedule is shortened
 * so a sequence runs in seconds; its first delay is longer than the others so the webhook service
 * can be killed during a backoff.
 */
const RETRY_SCHEDULE_MS = [2_500, 300, 300, 300, 300];
const TIMEOUT_MS = 1_000;
/** Billing's default grace period for a rotated-out secret, shortened so it ends within a test. */
const SECRET_GRACE_MS = 15_000;
const execFile = promisify(execFileCallback);

let stack: TestStack;
let account: TestAccount;
let mongo: MongoClient | undefined;
/** The stack's database: where the webhook service keeps each delivery sequence. */
let db: Db;
const receivers: Receiver[] = [];

beforeAll(async () => {
  stack = await startTestStack({
    env: {
      WEBHOOK_RETRY_SCHEDULE_MS: RETRY_SCHEDULE_MS.join(','),
      WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      WEBHOOK_SECRET_GRACE_MS: String(SECRET_GRACE_MS),
    },
  });
  account = await stack.createAccount({ plan: 'pro', credits: 1_000 });
  mongo = new MongoClient(stack.infrastructure.mongoUrl);
  await mongo.connect();
  db = mongo.db(stack.infrastructure.database);
}, 180_000);

afterAll(async () => {
  await Promise.all(receivers.map((receiver) => receiver.close()));
  await mongo?.close();
  await stack?.stop();
});

// ---- Receivers ----------------------------------------------------------------------------------

interface Received {
  body: Buffer;
  headers: IncomingHttpHeaders;
  method: string;
  path: string;
}

/** What the receiver answers to its n-th request (0-based); `hang` never answers. */
type Answer = { status: number; headers?: Record<string, string> } | 'hang';

class Receiver {
  readonly requests: Received[] = [];
  connections = 0;
  readonly #hanging: ServerResponse[] = [];

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(answer: (index: number) => Answer = () => ({ status: 204 })) {
    let receiver: Receiver | undefined;
    const server = createServer(async (request, response) => {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      const index = receiver!.requests.length;
      receiver!.requests.push({
        body: Buffer.concat(chunks),
        headers: request.headers,
        method: request.method ?? '',
        path: request.url ?? '',
      });
      const reply = answer(index);
      if (reply === 'hang') {
        receiver!.#hanging.push(response);
        return;
      }
      response.writeHead(reply.status, reply.headers).end();
    });
    server.on('connection', () => {
      receiver!.connections += 1;
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    receiver = new Receiver(server, (server.address() as AddressInfo).port);
    receivers.push(receiver);
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async waitForRequests(count: number, timeoutMs = 30_000): Promise<Received[]> {
    await eventually(
      () => this.requests.length >= count,
      timeoutMs,
      () => `receiver got ${this.requests.length} of ${count} requests`,
    );
    return this.requests.slice(0, count);
  }

  async close(): Promise<void> {
    for (const response of this.#hanging) response.destroy();
    this.server.closeAllConnections();
    this.server.close();
  }
}

// ---- Helpers ------------------------------------------------------------------------------------

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function eventually(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  describe: () => string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${describe()}\n${stack.logs()}`);
    await sleep(100);
  }
}

interface Job {
  id: string;
  type: string;
  status: string;
  error?: string | null;
  createdAt: string;
  completedAt?: string;
  result?: {
    outputText?: string;
    metrics: { inputSize: number; outputSize: number; compressionRatio: number };
  };
}

interface DeliveryRecord {
  deliveryId: string;
  jobId: string;
  event: string;
  attempt: number;
  attemptedAt: string;
  target: string;
  statusCode: number | null;
  latencyMs: number | null;
  outcome: 'delivered' | 'failed' | 'refused';
  error: string | null;
}

const LARGE_TEXT = 'Lorem ipsum   dolor sit amet.  '.repeat(2_000); // > 50 KB: always queued

/** A text job that is queued (a webhookUrl always queues; so does text over 50 KB). */
async function queuedTextJob(
  apiKey: string,
  options: { webhookUrl?: string; text?: string } = {},
): Promise<string> {
  const response = await stack.api<Job>('POST', '/v1/text', {
    token: apiKey,
    body: {
      text: options.text ?? `Hello   webhook world ${Math.random()}`,
      preset: 'chill',
      ...(options.webhookUrl !== undefined && { webhookUrl: options.webhookUrl }),
    },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(202);
  return response.body.data!.id;
}

async function getJob(apiKey: string, id: string): Promise<Job> {
  const response = await stack.api<Job>('GET', `/v1/jobs/${id}`, { token: apiKey });
  expect(response.status).toBe(200);
  return response.body.data!;
}

async function deliveries(jobId: string): Promise<DeliveryRecord[]> {
  const response = await stack.admin<{ deliveries: DeliveryRecord[] }>(
    'GET',
    `/admin/jobs/${jobId}/deliveries`,
  );
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data!.deliveries;
}

async function waitForDeliveries(
  jobId: string,
  done: (records: DeliveryRecord[]) => boolean,
  timeoutMs = 30_000,
): Promise<DeliveryRecord[]> {
  let records: DeliveryRecord[] = [];
  await eventually(
    async () => {
      records = await deliveries(jobId);
      return done(records);
    },
    timeoutMs,
    () => `deliveries of ${jobId}: ${JSON.stringify(records)}`,
  );
  return records;
}

function header(received: Received, name: string): string {
  const value = received.headers[name];
  expect(typeof value, `header ${name}`).toBe('string');
  return value as string;
}

function standardHeaders(received: Received): Record<string, string> {
  return {
    'webhook-id': header(received, 'webhook-id'),
    'webhook-timestamp': header(received, 'webhook-timestamp'),
    'webhook-signature': header(received, 'webhook-signature'),
  };
}

/** Both signatures verify over the raw bytes, independently computed and with the two verifiers. */
function expectAuthentic(received: Received, secret: string): TampEvent {
  const timestamp = header(received, 'x-service-timestamp');
  const expected = createHmac('sha256', secret)
    .update(`${timestamp}.`)
    .update(received.body)
    .digest('hex');
  expect(header(received, 'x-service-signature')).toBe(`sha256=${expected}`);
  const verification = verifyTampDelivery(received.body, received.headers, secret);
  expect(verification).toMatchObject({ ok: true });
  expect(() => new Webhook(secret).verify(received.body, standardHeaders(received))).not.toThrow();
  return JSON.parse(received.body.toString('utf8')) as TampEvent;
}

function standardVerifies(received: Received, secret: string): boolean {
  try {
    new Webhook(secret).verify(received.body, standardHeaders(received));
    return true;
  } catch {
    return false;
  }
}

/** Whether this secret verifies the delivery; both verifiers must agree. */
function verifiesWith(received: Received, secret: string): boolean {
  const tamp = verifyTampDelivery(received.body, received.headers, secret).ok;
  expect(
    standardVerifies(received, secret),
    'Standard Webhooks and X-Service-Signature agree',
  ).toBe(tamp);
  return tamp;
}

/** The admin CLI as operators run it, against this file's stack. */
const cli = (...args: string[]) =>
  execFile(process.execPath, ['--import', 'tsx', 'scripts/admin/cli.ts', ...args], {
    env: { ...process.env, TAMP_ADMIN_URL: stack.adminUrl, ADMIN_TOKEN: stack.adminToken },
  });

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

// ---- Tests --------------------------------------------------------------------------------------

describe('Delivery of a completed queued job', () => {
  it('signs the raw bytes (X-Service-Signature and Standard Webhooks); any changed byte fails', async () => {
    const receiver = await Receiver.start();
    const jobId = await queuedTextJob(account.apiKey, { webhookUrl: receiver.url });
    const [received] = await receiver.waitForRequests(1);
    expect(received!.method).toBe('POST');
    expect(received!.path).toBe('/hook');
    expect(received!.headers['content-type']).toMatch(/^application\/json/);
    expect(header(received!, 'x-service-event')).toBe('job.completed');
    expect(header(received!, 'x-service-delivery')).not.toBe('');
    const timestamp = Number(header(received!, 'x-service-timestamp'));
    expect(Math.abs(timestamp - Date.now() / 1000)).toBeLessThan(300);
    expect(header(received!, 'webhook-id')).not.toBe('');
    expect(header(received!, 'webhook-timestamp')).toBe(String(timestamp));

    const payload = expectAuthentic(received!, account.webhookSecret);
    expect(payload.job.id).toBe(jobId);

    // Flip each byte of the body in turn: neither verifier accepts the result.
    const verifier = new Webhook(account.webhookSecret);
    for (let index = 0; index < received!.body.length; index++) {
      const tampered = Buffer.from(received!.body);
      tampered[index] = tampered[index]! ^ 0x01;
      expect(verifyTampDelivery(tampered, received!.headers, account.webhookSecret)).toEqual({
        ok: false,
        reason: 'signature mismatch',
      });
      expect(() => verifier.verify(tampered, standardHeaders(received!))).toThrow();
    }
    // The wrong secret and a changed timestamp fail too.
    const otherSecret = (await stack.createAccount({ plan: 'pro' })).webhookSecret;
    expect(verifyTampDelivery(received!.body, received!.headers, otherSecret).ok).toBe(false);
    expect(
      verifyTampDelivery(
        received!.body,
        { ...received!.headers, 'x-service-timestamp': String(timestamp - 1) },
        account.webhookSecret,
      ).ok,
    ).toBe(false);
  });

  it('sends exactly the spec payload: event, job.id/type/status, result.outputKey + metrics, error null, timestamps', async () => {
    const receiver = await Receiver.start();
    const imageId = await uploadFile(stack, account.apiKey, 'photo.png', await tinyPng());
    const created = await stack.api<Job>('POST', '/v1/image', {
      token: account.apiKey,
      body: { imageId, preset: 'thumbnail', webhookUrl: receiver.url },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(202);
    const jobId = created.body.data!.id;
    const [received] = await receiver.waitForRequests(1, 60_000);
    const payload = expectAuthentic(received!, account.webhookSecret);
    expect(payload).toStrictEqual({
      event: 'job.completed',
      job: {
        id: jobId,
        type: 'image',
        status: 'completed',
        result: {
          outputKey: expect.stringMatching(
            new RegExp(`^results/${account.accountId}/${jobId}/result\\.`),
          ),
          metrics: {
            inputSize: expect.any(Number),
            outputSize: expect.any(Number),
            compressionRatio: expect.any(Number),
          },
        },
        error: null,
        createdAt: expect.stringMatching(ISO),
        completedAt: expect.stringMatching(ISO),
      },
    });
    // The same values the API reports: metrics on the job, timestamps on its list summary.
    const job = await getJob(account.apiKey, jobId);
    expect(job.status).toBe('completed');
    const { inputSize, outputSize, compressionRatio } = job.result!.metrics;
    expect(payload.job.result!.metrics).toEqual({ inputSize, outputSize, compressionRatio });
    const listed = await stack.api<{ items: Job[] }>('GET', '/v1/jobs?type=image&limit=100', {
      token: account.apiKey,
    });
    const summary = listed.body.data!.items.find((item) => item.id === jobId);
    expect(summary, JSON.stringify(listed.body)).toBeDefined();
    expect(payload.job.createdAt).toBe(summary!.createdAt);
    expect(payload.job.completedAt).toBe(summary!.completedAt);
  });

  it('gives a queued text job a string outputKey (the spec: a storage key, not null)', async () => {
    const receiver = await Receiver.start();
    const jobId = await queuedTextJob(account.apiKey, { webhookUrl: receiver.url });
    const [received] = await receiver.waitForRequests(1);
    const payload = expectAuthentic(received!, account.webhookSecret);
    expect(payload.job).toMatchObject({
      id: jobId,
      type: 'text',
      status: 'completed',
      error: null,
    });
    expect(payload.job.result?.outputKey).toEqual(
      expect.stringMatching(new RegExp(`^results/${account.accountId}/${jobId}/result\\.`)),
    );
  });
});

describe('Delivery of a failed job', () => {
  it('sends job.failed with result null and the error for an image that cannot be decoded', async () => {
    const receiver = await Receiver.start();
    // A PNG signature (passes the magic-byte check) followed by bytes no decoder accepts.
    const corrupt = Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      Buffer.alloc(2_000, 0x5a),
    ]);
    const imageId = await uploadFile(stack, account.apiKey, 'broken.png', corrupt);
    const created = await stack.api<Job>('POST', '/v1/image', {
      token: account.apiKey,
      body: { imageId, preset: 'thumbnail', webhookUrl: receiver.url },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(202);
    const jobId = created.body.data!.id;
    const [received] = await receiver.waitForRequests(1, 60_000);
    expect(header(received!, 'x-service-event')).toBe('job.failed');
    const payload = expectAuthentic(received!, account.webhookSecret);
    expect(payload).toStrictEqual({
      event: 'job.failed',
      job: {
        id: jobId,
        type: 'image',
        status: 'failed',
        result: null,
        error: expect.any(String),
        createdAt: expect.stringMatching(ISO),
        completedAt: expect.stringMatching(ISO),
      },
    });
    expect(payload.job.error).not.toBe('');
    const job = await getJob(account.apiKey, jobId);
    expect(job.status).toBe('failed');
    expect(payload.job.error).toBe(job.error);
  });
});

describe('Targets', () => {
  it("uses the account's default URL when the job has none; the job's own URL takes precedence", async () => {
    const byDefault = await Receiver.start();
    const own = await Receiver.start();
    const holder = await stack.createAccount({ plan: 'pro', webhookUrl: byDefault.url });

    const defaultJob = await queuedTextJob(holder.apiKey, { text: LARGE_TEXT });
    const [received] = await byDefault.waitForRequests(1);
    expect(expectAuthentic(received!, holder.webhookSecret).job.id).toBe(defaultJob);

    const ownJob = await queuedTextJob(holder.apiKey, { webhookUrl: own.url });
    const [ownReceived] = await own.waitForRequests(1);
    expect(expectAuthentic(ownReceived!, holder.webhookSecret).job.id).toBe(ownJob);
    expect(byDefault.requests).toHaveLength(1);
    expect((await deliveries(defaultJob)).map((record) => record.target)).toEqual([byDefault.url]);
  });

  it('delivers nothing for inline jobs, even with an account default URL', async () => {
    const receiver = await Receiver.start();
    const holder = await stack.createAccount({ plan: 'pro', webhookUrl: receiver.url });
    const inline = await stack.api<Job>('POST', '/v1/text', {
      token: holder.apiKey,
      body: { text: 'Small   inline text.', preset: 'chill' },
    });
    expect(inline.status).toBe(200);
    expect(inline.body.data!.status).toBe('completed');
    const inlineId = inline.body.data!.id;
    // A queued job created afterwards is delivered: the inline one had every chance to be too.
    const queued = await queuedTextJob(holder.apiKey, { text: LARGE_TEXT });
    await receiver.waitForRequests(1);
    // Nothing may come for the inline job; watched for 2 s, in which a late delivery would show.
    await assertStaysTrue(
      async () => {
        const ids = receiver.requests.map((request) => JSON.parse(request.body.toString()).job.id);
        expect(ids).toEqual([queued]);
        expect(await deliveries(inlineId)).toEqual([]);
      },
      { forMs: 2_000, intervalMs: 250, what: 'no delivery of the inline job' },
    );
  });
});

describe('Retries', () => {
  it('retries a failing receiver: 3 failures then success = 4 attempts, one webhook-id, fresh delivery ids', async () => {
    const receiver = await Receiver.start((index) => ({ status: index < 3 ? 500 : 200 }));
    const jobId = await queuedTextJob(account.apiKey, { webhookUrl: receiver.url });
    const received = await receiver.waitForRequests(4);
    const records = await waitForDeliveries(jobId, (list) => list.length >= 4);
    // No 5th request: watched for 1.5 s, longer than any retry delay after the first.
    await assertStaysTrue(() => expect(receiver.requests).toHaveLength(4), {
      forMs: 1_500,
      what: 'no 5th attempt',
    });

    const webhookIds = received.map((request) => header(request, 'webhook-id'));
    expect(new Set(webhookIds).size).toBe(1);
    expect(webhookIds[0]).toContain(jobId);
    const deliveryIds = received.map((request) => header(request, 'x-service-delivery'));
    expect(new Set(deliveryIds).size).toBe(4);
    for (const request of received) {
      // Every attempt is signed afresh over the very same bytes.
      expect(request.body.equals(received[0]!.body)).toBe(true);
      expect(expectAuthentic(request, account.webhookSecret).job.id).toBe(jobId);
    }

    // Every attempt is recorded: status code, latency, error.
    const final = await deliveries(jobId);
    expect(final).toHaveLength(4);
    expect(records.slice(0, 4)).toEqual(final);
    expect(final.map((record) => [record.attempt, record.outcome, record.statusCode])).toEqual([
      [1, 'failed', 500],
      [2, 'failed', 500],
      [3, 'failed', 500],
      [4, 'delivered', 200],
    ]);
    for (const record of final) {
      expect(record).toMatchObject({ jobId, event: 'job.completed', target: receiver.url });
      expect(typeof record.latencyMs).toBe('number');
      expect(record.attemptedAt).toMatch(ISO);
    }
    expect(final.slice(0, 3).map((record) => record.error)).toEqual(
      Array(3).fill(expect.stringContaining('500')),
    );
    expect(final[3]!.error).toBeNull();
    expect(final.map((record) => record.deliveryId)).toEqual(deliveryIds);

    // redeliver sends the event again: same body and webhook-id, a new delivery id.
    const redeliver = await stack.admin<{ scheduled: boolean }>(
      'POST',
      `/admin/jobs/${jobId}/redeliver`,
      {},
    );
    expect(redeliver.status, JSON.stringify(redeliver.body)).toBe(202);
    expect(redeliver.body.data).toEqual({ scheduled: true });
    const [, , , , again] = await receiver.waitForRequests(5);
    expect(again!.body.equals(received[0]!.body)).toBe(true);
    expect(header(again!, 'webhook-id')).toBe(webhookIds[0]);
    expect(deliveryIds).not.toContain(header(again!, 'x-service-delivery'));
    expectAuthentic(again!, account.webhookSecret);
    const afterRedelivery = await waitForDeliveries(jobId, (list) => list.length >= 5);
    expect(afterRedelivery.at(-1)).toMatchObject({ outcome: 'delivered', statusCode: 200 });
  });

  it('gives a receiver that never answers 1 + 5 attempts, then nothing; the job is unchanged', async () => {
    const receiver = await Receiver.start(() => 'hang');
    const jobId = await queuedTextJob(account.apiKey, { webhookUrl: receiver.url });
    const records = await waitForDeliveries(jobId, (list) => list.length >= 6, 60_000);
    // No 7th attempt: watched past the last scheduled retry (and its deadline), with room.
    await assertStaysTrue(() => expect(receiver.requests).toHaveLength(6), {
      forMs: Math.max(...RETRY_SCHEDULE_MS) * 2 + TIMEOUT_MS * 3,
      what: 'no 7th attempt',
    });
    expect(await deliveries(jobId)).toHaveLength(6);
    expect(records.map((record) => [record.attempt, record.outcome, record.statusCode])).toEqual(
      [1, 2, 3, 4, 5, 6].map((attempt) => [attempt, 'failed', null]),
    );
    for (const record of records) {
      expect(record.error).toMatch(/deadline|timeout/i);
      expect(typeof record.latencyMs).toBe('number');
    }
    expect(new Set(receiver.requests.map((request) => header(request, 'webhook-id'))).size).toBe(1);

    // A failing delivery never changes the job.
    const job = await getJob(account.apiKey, jobId);
    expect(job.status).toBe('completed');
    expect(job.error ?? null).toBeNull();
    expect(job.result?.outputText).toContain('Hello webhook world');
    expect(job.result?.metrics.outputSize).toEqual(expect.any(Number));
  });

  it('still delivers after the webhook service is killed during a backoff', async () => {
    const receiver = await Receiver.start((index) => ({ status: index === 0 ? 503 : 204 }));
    const jobId = await queuedTextJob(account.apiKey, { webhookUrl: receiver.url });
    // The first attempt has been recorded as failed: the retry now waits in MongoDB.
    await waitForDeliveries(jobId, (list) => list.some((record) => record.outcome === 'failed'));
    // The sequence update follows the attempt record: wait for the retry to be scheduled.
    await eventually(
      async () => {
        const sequence = await db
          .collection<{ jobId: string; event: string; status: string; attempts: number }>(
            'webhook_deliveries',
          )
          .findOne({ jobId, event: 'job.completed' });
        return sequence?.status === 'scheduled' && sequence.attempts === 1;
      },
      10_000,
      () => 'the retry to be scheduled in MongoDB',
    );
    const webhook = stack.services.services.find((service) => service.name === 'webhook')!;
    const killed = webhook.pid()!;
    expect(receiver.requests).toHaveLength(1); // still inside the first backoff
    process.kill(killed, 'SIGKILL');
    await eventually(
      () => webhook.pid() !== undefined && webhook.pid() !== killed,
      30_000,
      () => 'webhook service was not restarted',
    );

    const received = await receiver.waitForRequests(2, 60_000);
    expect(header(received[1]!, 'webhook-id')).toBe(header(received[0]!, 'webhook-id'));
    expect(received[1]!.body.equals(received[0]!.body)).toBe(true);
    expectAuthentic(received[1]!, account.webhookSecret);
    const records = await waitForDeliveries(jobId, (list) => list.length >= 2);
    expect(records.map((record) => [record.attempt, record.outcome, record.statusCode])).toEqual([
      [1, 'failed', 503],
      [2, 'delivered', 204],
    ]);
    // Delivered once: no third request, watched for 1 s (three retry delays after the first).
    await assertStaysTrue(() => expect(receiver.requests).toHaveLength(2), {
      forMs: 1_000,
      what: 'no attempt after the delivery',
    });
  });

  it('never follows a redirect: 302 to an inward URL is a failed attempt, the inward server sees nothing', async () => {
    const inward = await Receiver.start();
    const redirecting = await Receiver.start(() => ({
      status: 302,
      headers: { location: `http://127.0.0.1:${inward.port}/` },
    }));
    const jobId = await queuedTextJob(account.apiKey, { webhookUrl: redirecting.url });
    const records = await waitForDeliveries(jobId, (list) => list.length >= 6, 60_000);
    for (const record of records) {
      expect(record).toMatchObject({ outcome: 'failed', statusCode: 302 });
      expect(record.error).toMatch(/redirect/i);
    }
    expect(redirecting.requests).toHaveLength(6);
    expect(inward.requests).toHaveLength(0);
    expect(inward.connections).toBe(0);
  });
});

describe('Operators', () => {
  it('accepts POST /admin/jobs/:id/redeliver without a body (the event is optional)', async () => {
    const receiver = await Receiver.start();
    const jobId = await queuedTextJob(account.apiKey, { webhookUrl: receiver.url });
    await receiver.waitForRequests(1);
    await waitForDeliveries(jobId, (list) => list.length >= 1);
    const redeliver = await stack.admin<{ scheduled: boolean }>(
      'POST',
      `/admin/jobs/${jobId}/redeliver`,
    );
    expect(redeliver.status, JSON.stringify(redeliver.body)).toBe(202);
    expect(redeliver.body.data).toEqual({ scheduled: true });
    await receiver.waitForRequests(2);
  });

  it('lists deliveries and redelivers with the admin CLI', async () => {
    const receiver = await Receiver.start();
    const jobId = await queuedTextJob(account.apiKey, { webhookUrl: receiver.url });
    await receiver.waitForRequests(1);
    await waitForDeliveries(jobId, (list) => list.length >= 1);
    const listed = JSON.parse((await cli('deliveries', jobId, '--json')).stdout) as {
      deliveries: DeliveryRecord[];
    };
    expect(listed.deliveries).toEqual(await deliveries(jobId));
    expect(listed.deliveries[0]).toMatchObject({
      attempt: 1,
      outcome: 'delivered',
      statusCode: 204,
      target: receiver.url,
      error: null,
    });
    expect((await cli('deliveries', jobId)).stdout).toContain('delivered 204');

    const redelivered = JSON.parse((await cli('redeliver', jobId, '--json')).stdout);
    expect(redelivered).toEqual({ scheduled: true });
    const received = await receiver.waitForRequests(2);
    expect(received[1]!.body.equals(received[0]!.body)).toBe(true);
    expect(header(received[1]!, 'webhook-id')).toBe(header(received[0]!, 'webhook-id'));
    expectAuthentic(received[1]!, account.webhookSecret);
    expect(await waitForDeliveries(jobId, (list) => list.length >= 2)).toHaveLength(2);
  });
});

describe('Signing secret rotation', () => {
  it('signs with both secrets during the grace period, then with the new one only', async () => {
    const receiver = await Receiver.start();
    const holder = await stack.createAccount({ plan: 'pro', webhookUrl: receiver.url });
    const rotatedAt = Date.now();
    const { stdout } = await cli('account', 'rotate-webhook-secret', holder.accountId, '--json');
    const rotation = JSON.parse(stdout) as { webhookSecret: string; previousValidUntil: string };
    expect(Object.keys(rotation).sort()).toEqual(['previousValidUntil', 'webhookSecret']);
    expect(rotation.webhookSecret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(rotation.webhookSecret).not.toBe(holder.webhookSecret);
    const validUntil = Date.parse(rotation.previousValidUntil);
    expect(validUntil).toBeGreaterThanOrEqual(rotatedAt + SECRET_GRACE_MS - 1_000);
    expect(validUntil).toBeLessThanOrEqual(Date.now() + SECRET_GRACE_MS + 1_000);

    // During the grace period: webhook-signature lists one signature per secret, so Standard
    // Webhooks verifiers accept either; X-Service-Signature stays the spec's single value,
    // keyed with the new secret.
    const jobId = await queuedTextJob(holder.apiKey, { text: LARGE_TEXT });
    const [during] = await receiver.waitForRequests(1);
    expect(Number(header(during!, 'x-service-timestamp')) * 1000).toBeLessThan(validUntil);
    expect(header(during!, 'x-service-signature')).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(header(during!, 'webhook-signature').split(' ')).toHaveLength(2);
    expect(verifiesWith(during!, rotation.webhookSecret)).toBe(true);
    expect(standardVerifies(during!, holder.webhookSecret)).toBe(true);
    expect(verifyTampDelivery(during!.body, during!.headers, holder.webhookSecret).ok).toBe(false);
    const stranger = (await stack.createAccount()).webhookSecret;
    expect(verifiesWith(during!, stranger)).toBe(false);

    // After it: the same event sent again is signed with the new secret alone. Billing judges
    // the grace period by this machine's clock: wait for it to pass the end.
    await vi.waitFor(() => expect(Date.now()).toBeGreaterThan(validUntil), {
      timeout: SECRET_GRACE_MS + 5_000,
      interval: 50,
    });
    const redelivered = await stack.admin('POST', `/admin/jobs/${jobId}/redeliver`, {});
    expect(redelivered.status, JSON.stringify(redelivered.body)).toBe(202);
    const [, after] = await receiver.waitForRequests(2);
    expect(after!.body.equals(during!.body)).toBe(true);
    expect(header(after!, 'x-service-signature')).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(verifiesWith(after!, rotation.webhookSecret)).toBe(true);
    expect(verifiesWith(after!, holder.webhookSecret)).toBe(false);
    expectAuthentic(after!, rotation.webhookSecret);
  }, 90_000);

  it('answers 404 NOT_FOUND for an unknown account, on the admin API and in the CLI', async () => {
    const unknown = 'acct_01JD5ZQ7Y8K9ABCDEFGHJKMNPQ';
    const response = await stack.admin('POST', `/admin/accounts/${unknown}/webhook-secret/rotate`);
    expect(response.status).toBe(404);
    expect(response.body.error?.code).toBe('NOT_FOUND');
    const failed = await cli('account', 'rotate-webhook-secret', unknown).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('NOT_FOUND');
  });
});
