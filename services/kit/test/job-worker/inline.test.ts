import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { createTopology, type JobWorkMessage } from '@tamp/proto';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isolatedInfrastructure } from '../../../../test/support/infrastructure';
import { type InlineWorkServer, serveInlineWork } from '../../src/job-worker/inline';
import { PermanentJobError, type ProcessJob } from '../../src/job-worker/types';
import { connectNats, type NatsConnection, provisionTopology } from '../../src/nats';
import { MissingObjectError, ObjectStore } from '../../src/object-store';
import { ReplyInbox } from '../../src/reply-inbox';
import { DEADLINE_HEADER, HEARTBEAT_HEADER, Rpc } from '../../src/rpc';

const infrastructure = isolatedInfrastructure();
const topology = createTopology(infrastructure.namespace);
const logger = pino({ level: 'silent' });
const subject = topology.subjects.inline.text;
const tempDir = join(tmpdir(), `tamp-inline-test-${infrastructure.id}`);
let nats: NatsConnection;
let store: ObjectStore;
let server: InlineWorkServer;
/** What the served `processJob` does; each test sets it. */
let processJob: ProcessJob;

beforeAll(async () => {
  nats = await connectNats({ url: infrastructure.natsUrl, name: 'inline-test', logger });
  await provisionTopology(nats, topology, 1);
  store = new ObjectStore({ ...infrastructure.s3, bucket: infrastructure.bucket });
  await store.provision([]);
  server = serveInlineWork({
    rpc: new Rpc(nats, topology, logger),
    subject,
    queue: 'worker-text',
    processJob: (work, context) => processJob(work, context),
    logger,
    metrics: new Registry(),
    concurrency: 4,
    tempDir,
  });
  await nats.flush();
});
afterAll(async () => {
  await server.stop({ graceMs: 1_000 });
  const manager = await jetstreamManager(nats);
  for (const stream of Object.values(topology.streams)) await manager.streams.delete(stream.name);
  await nats.close();
  await rm(tempDir, { recursive: true, force: true });
});

function work(): JobWorkMessage {
  return {
    jobId: `job_${randomUUID()}`,
    accountId: 'acc_1',
    createdAt: new Date().toISOString(),
    pipeline: 'text',
    input: { kind: 'stored-text', key: `inputs/acc_1/${randomUUID()}`, size: 5 },
    operations: [{ type: 'trim', params: { intensity: 50 } }],
  };
}

/** The reply as sent: not parsed, so a `retryable` left out is not filled in by its default. */
async function requestInline(body: unknown): Promise<unknown> {
  const reply = await nats.request(subject, JSON.stringify(body), { timeout: 10_000 });
  return reply.json();
}

/** Like the image worker's ImageProcessingError: flagged by its processing core, not by kit. */
class CoreError extends Error {
  readonly permanent = true;
}

describe('serveInlineWork failures', () => {
  it('flags a missing input object (real storage) as retryable', async () => {
    processJob = async (job, { workspace }) => {
      if (job.input.kind !== 'stored-text') throw new Error('unexpected input');
      await store.downloadToFile(job.input.key, join(await workspace(), 'input.txt'));
      throw new Error('unreachable: the object does not exist');
    };
    expect(await requestInline(work())).toEqual({
      status: 'failed',
      error: new MissingObjectError('').message,
      retryable: true,
    });
  });

  it('flags an unclassified error (e.g. a timeout of a dependency) as retryable', async () => {
    processJob = async () => {
      throw new Error('connect ETIMEDOUT 10.0.0.7:9000');
    };
    expect(await requestInline(work())).toEqual({
      status: 'failed',
      error: 'connect ETIMEDOUT 10.0.0.7:9000',
      retryable: true,
    });
  });

  it.each([
    ['a PermanentJobError', new PermanentJobError('The input is not valid UTF-8 text')],
    ['a core error flagged permanent', new CoreError('The input is not valid UTF-8 text')],
    [
      'an error caused by a permanent one',
      new Error('The input is not valid UTF-8 text', { cause: new CoreError('bad byte') }),
    ],
  ])('flags %s as not retryable', async (_name, error) => {
    processJob = async () => {
      throw error;
    };
    expect(await requestInline(work())).toEqual({
      status: 'failed',
      error: 'The input is not valid UTF-8 text',
      retryable: false,
    });
  });

  it('answers an invalid request with a failure that is not retryable', async () => {
    expect(await requestInline({ jobId: 1 })).toEqual({
      status: 'failed',
      error: 'The inline work request is invalid',
      retryable: false,
    });
  });
});

describe('serveInlineWork under load', () => {
  const outcome = {
    outputKey: null,
    outputText: 'x',
    metrics: {
      inputSize: 1,
      outputSize: 1,
      compressionRatio: 1,
      operationsApplied: ['trim'],
      processingMs: 1,
    },
    usage: { inputBytes: 1 },
  };

  it('declines at once what would wait behind every slot and as many waiting requests', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    processJob = async () => {
      await gate;
      return outcome;
    };
    // The server above runs 4 at once and lets 4 more wait: the 9th and 10th are declined.
    const requests = Array.from({ length: 10 }, () => requestInline(work()));
    const declined = await Promise.race([
      Promise.all(requests.slice(8)),
      new Promise((resolve) => setTimeout(resolve, 5_000, 'not declined in time')),
    ]);
    expect(declined).toEqual([
      { status: 'declined', reason: 'every inline slot is taken' },
      { status: 'declined', reason: 'every inline slot is taken' },
    ]);
    release();
    const answered = await Promise.all(requests.slice(0, 8));
    expect(answered.every((reply) => (reply as { status: string }).status === 'completed')).toBe(
      true,
    );
  });

  it('drops unanswered a request whose deadline passed while it waited', async () => {
    let runs = 0;
    processJob = async () => {
      runs++;
      return outcome;
    };
    const headers = (await import('@nats-io/nats-core')).headers();
    headers.set(DEADLINE_HEADER, String(Date.now() - 1));
    const late = nats.request(subject, JSON.stringify(work()), { timeout: 1_000, headers });
    await expect(late).rejects.toThrow();
    expect(runs).toBe(0);
  });

  it('says it is at work while the job runs, so a caller tells it from a worker that died', async () => {
    processJob = async () => {
      await new Promise((resolve) => setTimeout(resolve, 600));
      return outcome;
    };
    const headers = (await import('@nats-io/nats-core')).headers();
    headers.set(HEARTBEAT_HEADER, '50');
    // Silent for 200 ms would be taken for dead: the answer after 600 ms needs the heartbeats.
    const reply = await new ReplyInbox(nats).request(subject, JSON.stringify(work()), headers, {
      timeoutMs: 10_000,
      silenceMs: 200,
    });
    expect(reply.json()).toMatchObject({ status: 'completed' });
  });
});
