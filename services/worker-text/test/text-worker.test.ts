import { randomUUID } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { jetstream } from '@nats-io/jetstream';
import { inlineWorkReply, type JobWorkMessage, LIMITS } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { useWorkerHarness } from '../../../test/support/worker-harness';
import { configSchema, workerTextSettingsFrom } from '../src/config';
import { startWorkerTextService } from '../src/service';
import { largeDocument } from './support/large-document';

const worker = useWorkerHarness({
  name: 'text-worker',
  concurrency: 2,
  start: ({ env, ...dependencies }) =>
    startWorkerTextService({
      ...dependencies,
      settings: workerTextSettingsFrom(
        configSchema.parse({ ...env, TEXT_MAX_OUTPUT_TEXT_BYTES: '1024' }),
      ),
    }),
});

function textJob(input: JobWorkMessage['input']): JobWorkMessage {
  return {
    jobId: `job_${randomUUID()}`,
    accountId: 'acc_txt',
    createdAt: new Date().toISOString(),
    pipeline: 'text',
    input,
    operations: [{ type: 'trim', params: { intensity: 30 } }],
  };
}

const MESSY = 'Hello    world.  \r\n\r\n\r\n\r\nSecond   paragraph with 42 words.   \n';
const TRIMMED = 'Hello world.\n\nSecond paragraph with 42 words.';

describe('worker-text', () => {
  it('answers an inline request with outputText, token counts and usage', async () => {
    const { nats, topology } = worker.harness;
    const message = textJob({ kind: 'text', text: MESSY });
    const reply = await nats.request(topology.subjects.inline.text, JSON.stringify(message), {
      timeout: 10_000,
    });
    const body = inlineWorkReply.parse(reply.json());
    expect(body).toMatchObject({ status: 'completed', outputKey: null, outputText: TRIMMED });
    if (body.status !== 'completed') return;
    expect(body.metrics).toMatchObject({
      inputSize: Buffer.byteLength(MESSY),
      outputSize: Buffer.byteLength(TRIMMED),
      operationsApplied: ['trim'],
    });
    expect(body.metrics.tokensIn).toBeGreaterThan(body.metrics.tokensOut as number);
    expect(body.usage).toEqual({ inputBytes: Buffer.byteLength(MESSY), characters: MESSY.length });
  });

  it('answers an invalid inline request with failed', async () => {
    const { nats, topology } = worker.harness;
    const reply = await nats.request(topology.subjects.inline.text, '{"jobId":1}', {
      timeout: 10_000,
    });
    expect(inlineWorkReply.parse(reply.json()).status).toBe('failed');
  });

  it('writes a queued .txt upload to result.txt and returns no outputText', async () => {
    const { store, publish, settled } = worker.harness;
    const uploadKey = `uploads/acc_txt/${randomUUID()}`;
    await store.putBuffer(uploadKey, MESSY, 'text/plain');
    const message = textJob({
      kind: 'upload',
      uploadId: 'upl_t',
      key: uploadKey,
      size: MESSY.length,
      contentType: 'text/plain',
      filename: 'notes.TXT',
    });
    await publish(message);
    const job = await settled(message.jobId);
    expect(job.status).toBe('completed');
    const completion = job.completions[0]!;
    expect(completion.outputKey).toBe(`results/acc_txt/${message.jobId}/result.txt`);
    expect(completion.outputText).toBeNull();
    expect((await store.getBuffer(completion.outputKey!)).toString('utf8')).toBe(TRIMMED);
    expect((await store.stat(completion.outputKey!))?.contentType).toBe(
      'text/plain; charset=utf-8',
    );
  });

  it('fails a file that is not a PDF permanently', async () => {
    const { store, publish, settled } = worker.harness;
    const uploadKey = `uploads/acc_txt/${randomUUID()}`;
    await store.putBuffer(uploadKey, 'plain words', 'application/pdf');
    const message = textJob({
      kind: 'upload',
      uploadId: 'upl_p',
      key: uploadKey,
      size: 11,
      contentType: 'application/pdf',
      filename: 'report.pdf',
    });
    await publish(message);
    const job = await settled(message.jobId);
    expect(job.status).toBe('failed');
    expect(job.failures).toEqual([
      { attempt: 1, permanent: true, error: 'report.pdf is not a PDF file (no %PDF- header)' },
    ]);
  });

  it('stores large stored-text output and returns outputText only under the size cap', async () => {
    const { nats, topology, store } = worker.harness;
    const big = `${'word   '.repeat(400)}\n`;
    const inputKey = `inputs/acc_txt/${randomUUID()}`;
    await store.putBuffer(inputKey, big, 'text/plain');
    const message = textJob({ kind: 'stored-text', key: inputKey, size: big.length });
    const reply = await nats.request(topology.subjects.inline.text, JSON.stringify(message), {
      timeout: 10_000,
    });
    const body = inlineWorkReply.parse(reply.json());
    if (body.status !== 'completed') throw new Error(JSON.stringify(body));
    expect(body.outputText).toBeNull(); // 1599 bytes > the 1024-byte cap of this test
    expect(body.outputKey).toBe(`results/acc_txt/${message.jobId}/result.txt`);
    expect((await store.getBuffer(body.outputKey!)).toString('utf8')).toBe(
      `${'word '.repeat(399)}word`,
    );
  });

  it('keeps the event loop responsive while a 5 M-character job runs', async () => {
    const { nats, topology, store, jobService } = worker.harness;
    const text = largeDocument(LIMITS.inlineTextCharacters);
    const inputKey = `inputs/acc_txt/${randomUUID()}`;
    await store.putBuffer(inputKey, text, 'text/plain');
    const message = textJob({ kind: 'stored-text', key: inputKey, size: Buffer.byteLength(text) });
    jobService.create(message);

    // On the main thread this pipeline blocks the event loop for seconds; with the pool only
    // reading the input and posting it to a thread (milliseconds) happen here. The bound is
    // generous because the test machine has 2 CPUs, both busy with pipeline threads.
    const MAX_EVENT_LOOP_DELAY_MS = 1_000;
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    try {
      await jetstream(nats).publish(topology.subjects.jobs.text, JSON.stringify(message), {
        msgID: message.jobId,
      });
      await jobService.until(() => jobService.jobs.get(message.jobId)?.status === 'processing');
      // An inline request while the big job runs is answered (it gets a thread of its own).
      const reply = await nats.request(
        topology.subjects.inline.text,
        JSON.stringify(textJob({ kind: 'text', text: MESSY })),
        { timeout: 10_000 },
      );
      expect(inlineWorkReply.parse(reply.json())).toMatchObject({
        status: 'completed',
        outputText: TRIMMED,
      });
      const job = await jobService.until(() => {
        const found = jobService.jobs.get(message.jobId);
        return found?.status === 'completed' && found;
      }, 150_000);
      expect(job.completions[0]!.metrics.inputSize).toBe(Buffer.byteLength(text));
    } finally {
      delay.disable();
    }
    expect(delay.max / 1e6).toBeLessThan(MAX_EVENT_LOOP_DELAY_MS);
  }, 180_000);
});
