import { randomUUID } from 'node:crypto';
import { readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import { createTopology, type JobWorkMessage } from '@tamp/proto';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { isolatedInfrastructure } from '../../../../test/support/infrastructure';
import { JobServiceDouble } from '../../../../test/support/job-service-double';
import { type JobWorker, startJobWorker } from '../../src/job-worker/job-worker';
import { PermanentJobError, type ProcessJob } from '../../src/job-worker/types';
import { connectNats, type NatsConnection, provisionTopology } from '../../src/nats';
import { Rpc } from '../../src/rpc';

const infrastructure = isolatedInfrastructure();
const topology = createTopology(infrastructure.namespace);
const logger = pino({ level: 'silent' });
const tempDir = join(tmpdir(), `tamp-job-worker-test-${infrastructure.id}`);
let nats: NatsConnection;
let rpc: Rpc;
let jobService: JobServiceDouble;

beforeAll(async () => {
  nats = await connectNats({ url: infrastructure.natsUrl, name: 'job-worker-test', logger });
  await provisionTopology(nats, topology, 1);
  rpc = new Rpc(nats, topology, logger);
  jobService = new JobServiceDouble(nats, topology, 100);
});
afterAll(async () => {
  await jobService.close();
  const manager = await jetstreamManager(nats);
  for (const stream of Object.values(topology.streams)) await manager.streams.delete(stream.name);
  await nats.close();
  await rm(tempDir, { recursive: true, force: true });
});

function uploadInput(contentType: string, filename: string): JobWorkMessage['input'] {
  return {
    kind: 'upload',
    uploadId: 'upl_1',
    key: 'uploads/acc_1/upl_1',
    size: 10,
    contentType,
    filename,
  };
}

function work(pipeline: 'text' | 'audio' | 'image' = 'text'): JobWorkMessage {
  const common = {
    jobId: `job_${randomUUID()}`,
    accountId: 'acc_1',
    createdAt: new Date().toISOString(),
  };
  if (pipeline === 'image') {
    return {
      ...common,
      pipeline,
      input: uploadInput('image/png', 'a.png'),
      operations: [{ type: 'encode', params: { format: 'jpeg', quality: 80, effort: 4 } }],
    };
  }
  if (pipeline === 'audio') {
    return {
      ...common,
      pipeline,
      input: uploadInput('audio/wav', 'a.wav'),
      operations: [{ type: 'encode', params: { format: 'opus', bitrate: 24, channels: 1 } }],
    };
  }
  return {
    ...common,
    pipeline,
    input: { kind: 'text', text: 'hello' },
    operations: [{ type: 'trim', params: { intensity: 50 } }],
  };
}

async function publish(message: JobWorkMessage, msgID = message.jobId): Promise<void> {
  jobService.jobs.get(message.jobId) ?? jobService.create(message);
  await jetstream(nats).publish(topology.subjects.jobs[message.pipeline], JSON.stringify(message), {
    msgID,
  });
}

const succeed: ProcessJob = async (job, { workspace }) => {
  await writeFile(join(await workspace(), 'scratch.txt'), 'x');
  return {
    outputKey: null,
    outputText: `done ${job.jobId}`,
    metrics: {
      inputSize: 5,
      outputSize: 4,
      compressionRatio: 1.25,
      operationsApplied: ['trim'],
      processingMs: 1,
    },
    usage: { inputBytes: 5, characters: 5 },
  };
};

async function start(
  processJob: ProcessJob,
  extra: { consumer?: 'worker-text' | 'worker-audio' | 'worker-image' } = {},
) {
  return startJobWorker({
    rpc,
    nats,
    topology,
    consumer: extra.consumer ?? 'worker-text',
    workerName: 'worker-text/test',
    concurrency: 2,
    processJob,
    logger,
    metrics: new Registry(),
    tempDir,
    fetchExpiresMs: 1_000,
  });
}

async function consumerState(name: 'worker-text' | 'worker-audio' | 'worker-image') {
  const manager = await jetstreamManager(nats);
  return manager.consumers.info(topology.streams.jobs.name, name);
}

/**
 * The consumer once nothing is waiting for an acknowledgement. Acks and naks are published
 * without confirmation, so the server may apply them a moment after the worker sent them; a
 * few seconds is still far inside the 30 s lease that would otherwise release a message.
 */
async function settledConsumer(name: 'worker-text' | 'worker-audio') {
  return vi.waitFor(
    async () => {
      const state = await consumerState(name);
      expect(state.num_ack_pending).toBe(0);
      return state;
    },
    { timeout: 10_000, interval: 100 },
  );
}

/** The double's job once it reached `status`. */
function jobReaching(jobId: string, status: 'completed' | 'failed', timeoutMs?: number) {
  return jobService.until(() => {
    const found = jobService.jobs.get(jobId);
    return found?.status === status && found;
  }, timeoutMs);
}

describe('startJobWorker', () => {
  let worker: JobWorker | undefined;
  const stopWorker = async () => {
    await worker?.stop({ graceMs: 5_000 });
    worker = undefined;
  };

  it('runs a job, completes it with what processJob returned, acks it and removes its temp dir', async () => {
    worker = await start(succeed);
    const message = work();
    await publish(message);
    const job = await jobReaching(message.jobId, 'completed');
    expect(job.attempts).toEqual([1]);
    expect(job.completions).toHaveLength(1);
    expect(job.completions[0]?.outputText).toBe(`done ${message.jobId}`);
    expect(job.completions[0]?.usage).toEqual({ inputBytes: 5, characters: 5 });
    await stopWorker();
    const state = await settledConsumer('worker-text');
    expect(state.num_ack_pending).toBe(0);
    expect(state.num_pending).toBe(0);
    expect(await readdir(join(tempDir, `tamp-jobs-${process.pid}`))).toEqual([]);
  });

  it('fails a permanent error at once: failAttempt permanent → failed, no retry', async () => {
    worker = await start(async () => {
      throw new PermanentJobError('The input is not valid UTF-8 text');
    });
    const message = work();
    await publish(message);
    const job = await jobReaching(message.jobId, 'failed');
    await stopWorker();
    expect(job.failures).toEqual([
      { attempt: 1, error: 'The input is not valid UTF-8 text', permanent: true },
    ]);
    expect(job.attempts).toEqual([1]);
    expect((await settledConsumer('worker-text')).num_pending).toBe(0);
  });

  it('waits out a job service that does not answer, without using an attempt', async () => {
    worker = await start(succeed);
    // Every worker-facing call fails a few times: a job service restarting or overloaded.
    jobService.failNext.set('begin-attempt', 2);
    jobService.failNext.set('complete-job', 3);
    const message = work();
    await publish(message);
    const job = await jobReaching(message.jobId, 'completed');
    await stopWorker();
    // One delivery, kept and asked about again: no failure, no second attempt.
    expect(new Set(job.attempts)).toEqual(new Set([1]));
    expect(job.failures).toEqual([]);
    expect(job.completions.map((completion) => completion.attempt)).toEqual([1]);
    expect((await settledConsumer('worker-text')).num_redelivered).toBe(0);
  });

  it('retries a failure of the pipeline itself with the backoff, then completes on attempt 2', async () => {
    let runs = 0;
    worker = await start(async (job, context) => {
      runs++;
      if (runs === 1) throw new Error('storage briefly unreachable');
      return succeed(job, context);
    });
    const message = work();
    await publish(message);
    const job = await jobReaching(message.jobId, 'completed');
    await stopWorker();
    expect(job.failures).toHaveLength(1);
    expect(job.failures[0]).toMatchObject({ attempt: 1, permanent: false });
    expect(job.completions.map((completion) => completion.attempt)).toEqual([2]);
  });

  it('gives up after the last attempt of a job that keeps failing', async () => {
    worker = await start(async () => {
      throw new Error('disk full');
    });
    const message = work();
    await publish(message);
    const job = await jobReaching(message.jobId, 'failed');
    await stopWorker();
    expect(job.failures.map((failure) => failure.attempt)).toEqual([1, 2, 3, 4]);
    expect(job.error).toBe('disk full');
    expect((await settledConsumer('worker-text')).num_pending).toBe(0);
  });

  it('skips a redelivered job that is already completed: no second completeJob', async () => {
    worker = await start(succeed);
    const message = work();
    await publish(message);
    await jobService.until(() => jobService.jobs.get(message.jobId)?.status === 'completed');
    // The same job delivered again (e.g. a publish retried after the dedup window).
    await publish(message, `${message.jobId}-again`);
    const job = await jobService.until(() => {
      const found = jobService.jobs.get(message.jobId);
      return found && found.attempts.length === 2 && found;
    });
    await stopWorker();
    expect(job.completions).toHaveLength(1);
    const state = await settledConsumer('worker-text');
    expect(state.num_ack_pending).toBe(0);
    expect(state.num_pending).toBe(0);
  });

  it('leaves a delivery older than the running one alone: no ack, no nak, the message stays with that delivery', async () => {
    // JetStream applies an ack or nak of any delivery to the message itself: an ack from a
    // stale delivery deleted the message under the one running the job.
    const message = work('image');
    const job = jobService.create(message);
    job.status = 'processing';
    job.attempts.push(2);
    let ran = false;
    worker = await start(
      async (...args) => {
        ran = true;
        return succeed(...args);
      },
      { consumer: 'worker-image' },
    );
    const { seq } = await jetstream(nats).publish(
      topology.subjects.jobs.image,
      JSON.stringify(message),
      { msgID: message.jobId },
    );
    await jobService.until(() => job.attempts.length === 2);
    // Acks and naks are sent without confirmation: give one time to land.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const state = await consumerState('worker-image');
    await stopWorker();
    await (await jetstreamManager(nats)).streams.deleteMessage(topology.streams.jobs.name, seq);
    expect(job.attempts).toEqual([2, 1]);
    expect(ran).toBe(false);
    expect(state.num_ack_pending).toBe(1);
  });

  it('rejects a message that is not a job (terminated, never retried)', async () => {
    worker = await start(succeed);
    await jetstream(nats).publish(topology.subjects.jobs.text, '{"hello":"world"}');
    await vi.waitFor(async () => expect((await consumerState('worker-text')).num_pending).toBe(0), {
      timeout: 10_000,
      interval: 100,
    });
    await stopWorker();
    const state = await settledConsumer('worker-text');
    expect(state.num_pending).toBe(0);
    expect(state.num_ack_pending).toBe(0);
  });

  it('on stop, hands a job that does not finish in the grace period back at once; another worker completes it', async () => {
    // A lease far longer than the wait below: only a hand-back (nak) can free the job in time.
    const manager = await jetstreamManager(nats);
    const text = topology.consumers['worker-text'];
    await manager.consumers.update(text.stream, text.durableName, { ack_wait: nanos(300_000) });
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    let sawAbort = false;
    worker = await start(async (_job, { signal }) => {
      started();
      await new Promise<void>((_resolve, reject) => {
        signal.addEventListener('abort', () => {
          sawAbort = true;
          reject(signal.reason);
        });
      });
      throw new Error('unreachable');
    });
    const message = work();
    await publish(message);
    await running;
    await worker.stop({ graceMs: 200 });
    worker = undefined;
    expect(sawAbort).toBe(true);
    // Handed back without reporting a failure; the job service is told which delivery it was
    // before the nak, so the redelivery does not count as an attempt.
    expect(jobService.jobs.get(message.jobId)?.failures).toEqual([]);
    expect(jobService.jobs.get(message.jobId)?.handBacks).toEqual([1]);
    expect(jobService.calls.indexOf(`hand-back-attempt ${message.jobId} 1`)).toBeGreaterThan(-1);

    worker = await start(succeed);
    const job = await jobReaching(message.jobId, 'completed', 20_000);
    await stopWorker();
    await manager.consumers.update(text.stream, text.durableName, {
      ack_wait: nanos(text.ackWaitMs),
    });
    expect(job.attempts).toEqual([1, 2]);
    expect(job.completions.map((completion) => completion.attempt)).toEqual([2]);
  });

  it('lets a job running in the grace period finish and complete during stop', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    worker = await start(async (job, context) => {
      started();
      await gate;
      return succeed(job, context);
    });
    const message = work();
    await publish(message);
    await running;
    const stopping = worker.stop({ graceMs: 20_000 });
    release();
    await stopping;
    worker = undefined;
    expect(jobService.jobs.get(message.jobId)?.status).toBe('completed');
    expect(jobService.jobs.get(message.jobId)?.attempts).toEqual([1]);
  });

  it('keeps a job that runs several times longer than ack_wait leased with heartbeats', async () => {
    const manager = await jetstreamManager(nats);
    const audio = topology.consumers['worker-audio'];
    await manager.consumers.update(audio.stream, audio.durableName, { ack_wait: nanos(1_000) });
    worker = await start(
      async (job, context) => {
        // About four lease lengths, without reporting progress: the timer alone keeps it.
        await new Promise((resolve) => setTimeout(resolve, 4_000));
        return succeed(job, context);
      },
      { consumer: 'worker-audio' },
    );
    const message = work('audio');
    await publish(message);
    const job = await jobReaching(message.jobId, 'completed');
    await stopWorker();
    expect(job.attempts).toEqual([1]);
    expect(
      jobService.calls.filter((call) => call.startsWith(`begin-attempt ${message.jobId}`)),
    ).toHaveLength(1);
    expect((await consumerState('worker-audio')).num_redelivered).toBe(0);
  });
});
