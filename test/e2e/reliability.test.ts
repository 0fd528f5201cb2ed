import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { createTopology, storageKeys } from '@tamp/proto';
import { speechWav } from '@tamp/scripts/fixtures/media';
import { generateLongWav } from '@tamp/scripts/fixtures/speech';
import { type Db, MongoClient } from 'mongodb';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectNats, type NatsConnection, ObjectStore } from '../../services/kit/src';
import { startTestStack, type TestAccount, type TestStack, uploadFile } from '../support/stack';
import { assertStaysTrue } from '../support/stays-true';

/**
 * Faults injected into the real stack: a worker killed mid-job, an input that disappears from
 * storage for every attempt, and one that disappears for the first attempt only. Outcomes are
 * read where they live: the job document (attempts), the ledger (reserve/refund), the account
 * (credits) and the EVENTS stream (job.completed / job.failed), besides the public API.
 */

/**
 * Backoff base: at most 3 s, 6 s, 12 s between attempts, and at least half of each (equal
 * jitter). Large enough for the restore in test 3.
 */
const RETRY_BASE_MS = 3_000;

let stack: TestStack;
let account: TestAccount;
let mongo: MongoClient;
let db: Db;
let nats: NatsConnection;
let store: ObjectStore;
let scratch: string;

interface Job {
  id: string;
  status: string;
  error?: string;
  result?: { outputUrl?: string; metrics: Record<string, unknown> };
}

interface JobDocument {
  _id: string;
  status: string;
  attempts: number;
  lastError: string | null;
  error: string | null;
  /** False while a queued job's event is unconfirmed; absent on inline jobs. */
  eventPublished?: boolean;
  refundPending: boolean;
}

beforeAll(async () => {
  stack = await startTestStack({
    env: {
      JOB_RETRY_BASE_MS: String(RETRY_BASE_MS),
      // Polling below must never be throttled.
      PLANS_JSON: JSON.stringify({ pro: { rateLimitPerMinute: 100_000 } }),
    },
  });
  account = await stack.createAccount({ plan: 'pro' });
  mongo = new MongoClient(stack.infrastructure.mongoUrl);
  await mongo.connect();
  db = mongo.db(stack.infrastructure.database);
  nats = await connectNats({
    url: stack.infrastructure.natsUrl,
    name: 'reliability-test',
    logger: pino({ level: 'silent' }),
  });
  store = new ObjectStore({ ...stack.infrastructure.s3, bucket: stack.infrastructure.bucket });
  scratch = await mkdtemp(join(tmpdir(), 'tamp-reliability-'));
}, 240_000);

afterAll(async () => {
  await nats?.close();
  await mongo?.close();
  await stack?.stop();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` until it returns a value other than undefined/false, for at most `timeoutMs`. */
async function until<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined | false>,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${stack.logs()}`);
    await sleep(intervalMs);
  }
}

const jobDocument = (id: string) => db.collection<JobDocument>('jobs').findOne({ _id: id });

async function getJob(id: string): Promise<Job> {
  const response = await stack.api<Job>('GET', `/v1/jobs/${id}`, { token: account.apiKey });
  expect(response.status).toBe(200);
  return response.body.data!;
}

/** Long-polls GET /v1/jobs/:id until a terminal state, for at most `timeoutMs`. */
async function waitForTerminal(id: string, timeoutMs: number): Promise<Job> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const wait = Math.max(1, Math.min(30, Math.floor((deadline - Date.now()) / 1000)));
    const response = await stack.api<Job>('GET', `/v1/jobs/${id}?wait=${wait}`, {
      token: account.apiKey,
    });
    expect(response.status).toBe(200);
    const job = response.body.data!;
    if (job.status === 'completed' || job.status === 'failed') return job;
  }
  throw new Error(`job ${id} did not finish within ${timeoutMs} ms\n${stack.logs()}`);
}

/**
 * Side effects of a terminal state are confirmed: flagged on a queued job's document, and the
 * creation's admission closed (it answers for an inline job's event until then).
 */
async function settled(id: string): Promise<JobDocument> {
  return until(`settlement of ${id}`, 60_000, async () => {
    const document = await jobDocument(id);
    if (document === null || document.eventPublished === false || document.refundPending) {
      return false;
    }
    return (
      (await db.collection('admissions').countDocuments({ _id: id as never })) === 0 && document
    );
  });
}

/**
 * A settled job's events and ledger entries are `expected` and stay so for 2 s, the time a
 * duplicate (a second event, charge or refund from a redelivered attempt) would take to show:
 * no state announces that none is coming.
 */
async function noDuplicates(
  jobId: string,
  expected: {
    events: { completed: number; failed: number };
    ledger: { reserve: string[]; refund: string[] };
  },
): Promise<void> {
  await assertStaysTrue(
    async () => {
      expect(await eventsFor(jobId)).toEqual(expected.events);
      expect(await ledgerEntries(jobId)).toEqual(expected.ledger);
    },
    { forMs: 2_000, intervalMs: 250, what: `no duplicate side effect of ${jobId}` },
  );
}

async function createAudioJob(audioId: string, preset = 'chill'): Promise<string> {
  const created = await stack.api<Job>('POST', '/v1/audio', {
    token: account.apiKey,
    body: { audioId, preset },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(202);
  return created.body.data!.id;
}

async function credits(): Promise<number> {
  const found = await db
    .collection<{ _id: string; allowanceRemaining: number; grantedRemaining: number }>('accounts')
    .findOne({ _id: account.accountId });
  if (found === null) throw new Error('account not found');
  return found.allowanceRemaining + found.grantedRemaining;
}

async function ledgerEntries(jobId: string): Promise<{ reserve: string[]; refund: string[] }> {
  const entries = await db
    .collection<{ _id: string; kind: string; jobId: string | null }>('ledger')
    .find({ jobId })
    .toArray();
  return {
    reserve: entries.filter((entry) => entry.kind === 'reserve').map((entry) => entry._id),
    refund: entries.filter((entry) => entry.kind === 'refund').map((entry) => entry._id),
  };
}

/** Every job.completed / job.failed message on this stack's EVENTS stream for `jobId`. */
async function eventsFor(jobId: string): Promise<{ completed: number; failed: number }> {
  const topology = createTopology(stack.infrastructure.namespace);
  const streamName = topology.streams.events.name;
  const info = await (await jetstreamManager(nats)).streams.info(streamName);
  const counts = { completed: 0, failed: 0 };
  if (info.state.messages === 0) return counts;
  const lastSeq = info.state.last_seq;
  const consumer = await jetstream(nats).consumers.get(streamName); // ordered, from the start
  const messages = await consumer.consume();
  try {
    for await (const message of messages) {
      const event = message.json<{ jobId: string }>();
      if (event.jobId === jobId) {
        if (message.subject === topology.subjects.events.completed) counts.completed++;
        else if (message.subject === topology.subjects.events.failed) counts.failed++;
      }
      if (message.seq >= lastSeq) break;
    }
  } finally {
    messages.stop();
  }
  return counts;
}

/**
 * A short speech upload whose first consumption (the checks on the stored bytes) has been done
 * by a job that completed; a later job on the same upload is created from the stored outcome,
 * so the object can be taken away without the creation noticing.
 */
async function consumedSpeechUpload(): Promise<{ audioId: string; key: string; bytes: Buffer }> {
  const bytes = await speechWav('Reliability matters more than speed.');
  const audioId = await uploadFile(stack, account.apiKey, 'speech.wav', bytes);
  const first = await waitForTerminal(await createAudioJob(audioId), 60_000);
  expect(first.status, JSON.stringify(first)).toBe('completed');
  // Jobs read the copy taken at first consumption, so that is the object to take away.
  return { audioId, key: storageKeys.checkedUpload(account.accountId, audioId), bytes };
}

describe('a worker killed mid-job', () => {
  it('still completes the job exactly once: one completed event, one reservation, no refund', async () => {
    const wavPath = join(scratch, 'long.wav');
    // Long enough to be running when the kill comes: the static ffmpeg takes a `lecture` job
    // through 120 s of speech in about 1.6 s.
    await generateLongWav(wavPath, 480);
    const audioId = await uploadFile(stack, account.apiKey, 'long.wav', await readFile(wavPath));
    const creditsBefore = await credits();
    const jobId = await createAudioJob(audioId, 'lecture');

    await until(
      'the job to be processing',
      60_000,
      async () => (await getJob(jobId)).status === 'processing',
    );
    const audioWorker = stack.services.services.find((service) => service.name === 'worker-audio');
    const pid = audioWorker?.pid();
    expect(pid).toBeTypeOf('number');
    process.kill(pid!, 'SIGKILL');
    const afterKill = await jobDocument(jobId);
    // Killed while running: otherwise this test would prove nothing.
    expect(afterKill?.status).toBe('processing');
    expect(afterKill?.attempts).toBe(1);

    // The supervisor restarts the worker; the delivery comes back once the 60 s lease lapses.
    await until('worker-audio to be restarted', 30_000, async () => {
      const current = audioWorker!.pid();
      return current !== undefined && current !== pid;
    });
    const job = await waitForTerminal(jobId, 200_000);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    const document = await settled(jobId);
    // The lost attempt counts; the redelivery (JetStream delivery 2) ran it to completion.
    expect(document.attempts).toBe(2);

    await noDuplicates(jobId, {
      events: { completed: 1, failed: 0 },
      ledger: { reserve: [`reserve:${jobId}`], refund: [] },
    });
    const charged = creditsBefore - (await credits());
    expect(charged).toBeGreaterThan(0);
    console.log(
      `killed worker: job completed on attempt ${document.attempts}, processingMs ${String(job.result?.metrics.processingMs)}, ${charged} credits charged once`,
    );
  }, 300_000);
});

describe('a job failing on every attempt', () => {
  it('ends failed after exactly 4 attempts, refunded once, with one job.failed event', async () => {
    const { audioId, key } = await consumedSpeechUpload();
    await store.remove(key);
    const creditsBefore = await credits();
    const jobId = await createAudioJob(audioId);
    expect(await credits()).toBeLessThan(creditsBefore);

    // Attempts at 0, +3 s, +6 s, +12 s: about 21 s of backoff.
    const job = await waitForTerminal(jobId, 90_000);
    expect(job.status, JSON.stringify(job)).toBe('failed');
    expect(job.error).toBeTruthy();
    const document = await settled(jobId);
    expect(document.attempts).toBe(4);
    expect(document.status).toBe('failed');

    await noDuplicates(jobId, {
      events: { completed: 0, failed: 1 },
      ledger: { reserve: [`reserve:${jobId}`], refund: [`refund:${jobId}`] },
    });
    expect(await credits()).toBe(creditsBefore);
    console.log(`missing input: failed after ${document.attempts} attempts: ${job.error}`);
  }, 150_000);
});

describe('a job failing on its first attempt only', () => {
  it('completes on attempt 2 without a refund', async () => {
    const { audioId, key, bytes } = await consumedSpeechUpload();
    await store.remove(key);
    const creditsBefore = await credits();
    const jobId = await createAudioJob(audioId);

    // Attempt 1 fails on the missing object; the retry is 1.5 to 3 s away.
    const retrying = await until(
      'the first failed attempt',
      30_000,
      async () => {
        const document = await jobDocument(jobId);
        return document?.status === 'pending' && document.attempts === 1 && document;
      },
      50,
    );
    expect(retrying.lastError).toBeTruthy();
    await store.putBuffer(key, bytes, 'audio/wav');

    const job = await waitForTerminal(jobId, 60_000);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    const document = await settled(jobId);
    expect(document.attempts).toBe(2);
    await noDuplicates(jobId, {
      events: { completed: 1, failed: 0 },
      ledger: { reserve: [`reserve:${jobId}`], refund: [] },
    });
    expect(await credits()).toBeLessThan(creditsBefore);
  }, 120_000);
});
