import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tinyPng } from '@tamp/scripts/fixtures/media';
import { generateLongWav } from '@tamp/scripts/fixtures/speech';
import { pollUntil } from '@tamp/scripts/infra/kubernetes/processes';
import { SINGLE_PROCESS } from '@tamp/scripts/stack/services';
import { type Db, MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ledgerOf } from '../support/exactly-once';
import {
  finishedJob,
  startTestStack,
  type TestAccount,
  type TestStack,
  uploadFile,
} from '../support/stack';
import { assertStaysTrue } from '../support/stays-true';

/**
 * Every service in one process (`TAMP_PROCESSES=single`): the same contract as a process per
 * service, jobs charged once and refunded once, one ops endpoint for all, and a queued job that
 * survives the process being killed under it.
 */

interface Job {
  id: string;
  status: string;
  error?: string;
}

let stack: TestStack;
let account: TestAccount;
let mongo: MongoClient;
let db: Db;
let scratch: string;

beforeAll(async () => {
  stack = await startTestStack({
    processes: 'single',
    env: {
      PLANS_JSON: JSON.stringify({ pro: { rateLimitPerMinute: 100_000 } }),
      // npm start's: every service must stop within them, together.
      SHUTDOWN_TIMEOUT_MS: '10000',
      WORKER_STOP_GRACE_MS: '5000',
    },
  });
  account = await stack.createAccount({ plan: 'pro' });
  mongo = new MongoClient(stack.infrastructure.mongoUrl);
  await mongo.connect();
  db = mongo.db(stack.infrastructure.database);
  scratch = await mkdtemp(join(tmpdir(), 'tamp-single-process-'));
}, 240_000);

afterAll(async () => {
  await mongo?.close();
  await stack?.stop();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

const theProcess = () => {
  const [only, ...others] = stack.services.services;
  expect(others).toEqual([]);
  expect(only?.name).toBe(SINGLE_PROCESS);
  return only!;
};

async function create(path: string, body: unknown): Promise<{ status: number; job: Job }> {
  const response = await stack.api<Job>('POST', path, { token: account.apiKey, body });
  return { status: response.status, job: response.body.data! };
}

async function credits(): Promise<number> {
  const found = await db
    .collection<{ _id: string; allowanceRemaining: number; grantedRemaining: number }>('accounts')
    .findOne({ _id: account.accountId });
  return (found?.allowanceRemaining ?? 0) + (found?.grantedRemaining ?? 0);
}

describe('every service in one process', () => {
  it('runs inline and queued jobs, each charged once', async () => {
    const before = await credits();
    const inline = await create('/v1/text', {
      text: 'Hello   world.\n\n\n\nBye.',
      preset: 'medium',
    });
    expect([inline.status, inline.job.status]).toEqual([200, 'completed']);
    const imageId = await uploadFile(stack, account.apiKey, 'tiny.png', await tinyPng());
    const queued = await create('/v1/image', {
      imageId,
      operations: [{ type: 'encode', params: { format: 'avif', quality: 50 } }],
    });
    expect(queued.status, JSON.stringify(queued.job)).toBe(202);
    expect((await finishedJob<Job>(stack, account.apiKey, queued.job.id)).status).toBe('completed');
    for (const job of [inline.job, queued.job]) {
      expect(await ledgerOf(db, job.id)).toEqual({ reserve: 1, refund: 0 });
    }
    expect(await credits()).toBeLessThan(before);
  });

  it('refunds a job that fails, once', async () => {
    const before = await credits();
    // A PNG signature (passes the magic-byte check) followed by bytes no decoder accepts.
    const corrupt = Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      Buffer.alloc(2_000, 0x5a),
    ]);
    const imageId = await uploadFile(stack, account.apiKey, 'broken.png', corrupt);
    // Queued, so the failure crosses the worker, the job service and billing.
    const created = await create('/v1/image', {
      imageId,
      operations: [{ type: 'encode', params: { format: 'avif', quality: 50 } }],
    });
    expect(created.status, JSON.stringify(created.job)).toBe(202);
    const job = await finishedJob<Job>(stack, account.apiKey, created.job.id);
    expect(job.status, JSON.stringify(job)).toBe('failed');
    await pollUntil(
      'the refund',
      async () => ((await ledgerOf(db, job.id)).refund > 0 ? true : undefined),
      30_000,
      250,
    );
    await assertStaysTrue(
      async () => {
        expect(await ledgerOf(db, job.id)).toEqual({ reserve: 1, refund: 1 });
        expect(await credits()).toBe(before);
      },
      { forMs: 2_000, intervalMs: 250, what: 'one reservation, one refund' },
    );
  });

  it('answers readiness and metrics for every service on one port', async () => {
    const ops = `http://127.0.0.1:${theProcess().opsPort}`;
    expect((await fetch(`${ops}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${ops}/metrics`)).text();
    // A family two services define is one family, told apart by the service label.
    expect(metrics.match(/^# TYPE tamp_jobs_processed_total /gm)).toHaveLength(1);
    expect(metrics).toMatch(/^tamp_jobs_processed_total\{[^}]*service="worker-text"/m);
    expect(metrics).toMatch(/^tamp_jobs_processed_total\{[^}]*service="worker-image"/m);
    expect(metrics).toMatch(/^tamp_http_requests_total\{[^}]*service="gateway"/m);
    expect(metrics.match(/^# TYPE process_cpu_user_seconds_total /gm)).toHaveLength(1);
  });

  it('completes a queued job once after the process is killed under it', async () => {
    const wavPath = join(scratch, 'long.wav');
    await generateLongWav(wavPath, 480);
    const audioId = await uploadFile(stack, account.apiKey, 'long.wav', await readFile(wavPath));
    const created = await create('/v1/audio', { audioId, preset: 'lecture' });
    expect(created.status).toBe(202);
    const jobs = db.collection<{ _id: string; status: string; attempts: number }>('jobs');
    await pollUntil(
      'the job to be processing',
      async () =>
        (await jobs.findOne({ _id: created.job.id }))?.status === 'processing' ? true : undefined,
      60_000,
      100,
    );
    const process_ = theProcess();
    const pid = process_.pid();
    process.kill(pid!, 'SIGKILL');
    // Killed while running: otherwise this test would prove nothing.
    expect(await jobs.findOne({ _id: created.job.id })).toMatchObject({
      status: 'processing',
      attempts: 1,
    });
    await pollUntil(
      'the process to be restarted and ready',
      async () => {
        const current = process_.pid();
        if (current === undefined || current === pid) return undefined;
        const ready = await fetch(`http://127.0.0.1:${process_.opsPort}/readyz`).catch(() => null);
        return ready?.status === 200 ? true : undefined;
      },
      60_000,
      250,
    );
    const job = await finishedJob<Job>(stack, account.apiKey, created.job.id);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    await assertStaysTrue(
      async () => {
        expect((await jobs.findOne({ _id: created.job.id }))?.attempts).toBe(2);
        expect(await ledgerOf(db, created.job.id)).toEqual({ reserve: 1, refund: 0 });
      },
      { forMs: 3_000, intervalMs: 500, what: 'two attempts, one charge' },
    );
  }, 300_000);

  it('stops every service within the shutdown time-out', async () => {
    await stack.stop();
    expect(stack.logs()).not.toMatch(/shutdown timed out|shutdown step failed/);
  });
});
