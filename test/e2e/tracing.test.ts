import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { speechWav, tinyPng } from '@tamp/scripts/fixtures/media';
import { buildPdf } from '@tamp/scripts/fixtures/pdf';
import { type RunningTraceCollector, startTraceCollector } from '@tamp/scripts/infra/launcher';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestAccount, type TestStack, uploadFile } from '../support/stack';
import {
  type CollectedSpan,
  orphansOf,
  readCollectedSpans,
  renderTraceTree,
  SPAN_KIND,
  STATUS_ERROR,
} from '../support/traces';

/**
 * The whole stack traced into a real OpenTelemetry Collector (built from pinned modules, see
 * scripts/infra/tools.json) that writes what it receives to a file: one queued job of each
 * pipeline, with a webhook, must read as one trace from the POST to the webhook delivery, with
 * every service in it and every parent present, also across NATS.
 */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let dataDir: string;
let collector: RunningTraceCollector;
let stack: TestStack;
let account: TestAccount;
let receiver: Server;
const received: string[] = [];
/** The trace-context headers of every webhook request: none may reach a customer's receiver. */
const traceHeadersReceived: string[] = [];
const TRACE_HEADERS = ['traceparent', 'tracestate', 'baggage'];

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'tamp-traces-'));
  collector = await startTraceCollector({ dataDir });
  // The first delivery of each job fails (503): its attempt must show as an error in the trace.
  const seenJobs = new Set<string>();
  receiver = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    for (const header of TRACE_HEADERS) {
      if (request.headers[header] !== undefined) traceHeadersReceived.push(header);
    }
    const jobId = (JSON.parse(Buffer.concat(chunks).toString()) as { job: { id: string } }).job.id;
    const first = !seenJobs.has(jobId);
    seenJobs.add(jobId);
    if (!first) received.push(jobId);
    response.writeHead(first ? 503 : 204).end();
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  stack = await startTestStack({
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
      // Export every 200 ms instead of every 5 s, so the test waits less.
      OTEL_BSP_SCHEDULE_DELAY: '200',
      LOG_LEVEL: 'info',
      WEBHOOK_RETRY_SCHEDULE_MS: '300,300,300',
    },
  });
  account = await stack.createAccount({ plan: 'pro', credits: 1_000 });
}, 240_000);

afterAll(async () => {
  receiver?.close();
  await stack?.stop();
  await collector?.stop();
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
});

/** A receiver's own token in the URL: the traces must not record it. */
const RECEIVER_TOKEN = `tok${Math.random().toString(36).slice(2)}`;
const webhookUrl = () =>
  `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook?token=${RECEIVER_TOKEN}`;

/** The queued text job's input: trimmed by the `chill` preset (one `trim` at intensity 30). */
const TRACED_TEXT = `Hello   traced world ${Math.random()}`;

async function createJob(pipeline: 'image' | 'text' | 'audio'): Promise<string> {
  let body: Record<string, unknown>;
  if (pipeline === 'text') {
    body = { text: TRACED_TEXT, preset: 'chill' };
  } else if (pipeline === 'image') {
    body = {
      imageId: await uploadFile(stack, account.apiKey, 'photo.png', await tinyPng()),
      preset: 'thumbnail',
    };
  } else {
    body = {
      audioId: await uploadFile(stack, account.apiKey, 'speech.wav', await speechWav()),
      preset: 'chill',
    };
  }
  return createQueuedJob(pipeline, { ...body, webhookUrl: webhookUrl() });
}

/** Creates a job that must be queued (202); returns its id. */
async function createQueuedJob(
  pipeline: 'image' | 'text' | 'audio',
  body: Record<string, unknown>,
): Promise<string> {
  const created = await stack.api<{ id: string }>('POST', `/v1/${pipeline}`, {
    token: account.apiKey,
    body,
  });
  expect(created.status, JSON.stringify(created.body)).toBe(202);
  return created.body.data!.id;
}

/** The trace of a job: the one its worker's processing span (tagged with the job id) is in. */
function traceOfJob(spans: readonly CollectedSpan[], jobId: string): CollectedSpan[] {
  const tagged = spans.find((span) => span.attributes['tamp.job_id'] === jobId);
  return tagged === undefined ? [] : spans.filter((span) => span.traceId === tagged.traceId);
}

/** Whole: a single root, no orphan, and the webhook delivered (after its failed first attempt). */
function isComplete(trace: readonly CollectedSpan[]): boolean {
  const deliveries = trace.filter((span) => span.name.startsWith('webhook deliver'));
  return (
    trace.filter((span) => span.parentSpanId === '').length === 1 &&
    orphansOf(trace).length === 0 &&
    deliveries.length >= 2
  );
}

/** Reads the collected spans until `traceOf` them is `ready`, or `timeoutMs` has passed. */
async function waitForTrace(
  traceOf: (spans: readonly CollectedSpan[]) => CollectedSpan[],
  ready: (trace: readonly CollectedSpan[]) => boolean,
  timeoutMs = 45_000,
): Promise<CollectedSpan[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const trace = traceOf(await readCollectedSpans(collector.spansFile));
    if (ready(trace) || Date.now() > deadline) return trace;
    await sleep(250);
  }
}

/**
 * The SDK anchors each span's clock on `Date.now()` (whole milliseconds) when the span starts, so
 * two spans of one process (a step and its parent) can disagree by up to a millisecond.
 */
const CLOCK_SLACK_NS = 1_000_000n;

/**
 * The text pipeline's steps ran in a worker thread; each must be a span, child of the worker's
 * `text pipeline` span, in the order they ran and inside its time, with their shape only.
 */
function expectTextStepSpans(trace: readonly CollectedSpan[], tree: string): void {
  const pipelineSpan = trace.find(
    (span) => span.service === 'worker-text' && span.name === 'text pipeline',
  );
  expect(pipelineSpan, tree).toBeDefined();
  const steps = trace
    .filter((span) => span.parentSpanId === pipelineSpan!.spanId)
    .sort((a, b) => (a.startTimeUnixNano < b.startTimeUnixNano ? -1 : 1));
  expect(
    steps.map((step) => step.name),
    tree,
  ).toEqual(['text trim', 'text count tokens', 'text count tokens']);
  for (const [index, step] of steps.entries()) {
    expect(step.service).toBe('worker-text');
    expect(step.kind).toBe(SPAN_KIND.internal);
    expect(step.startTimeUnixNano + CLOCK_SLACK_NS).toBeGreaterThanOrEqual(
      pipelineSpan!.startTimeUnixNano,
    );
    expect(step.endTimeUnixNano).toBeLessThanOrEqual(
      pipelineSpan!.endTimeUnixNano + CLOCK_SLACK_NS,
    );
    expect(step.endTimeUnixNano).toBeGreaterThanOrEqual(step.startTimeUnixNano);
    if (index > 0) {
      expect(step.startTimeUnixNano).toBeGreaterThanOrEqual(steps[index - 1]!.endTimeUnixNano);
    }
  }
  const [trim, tokensIn, tokensOut] = steps;
  expect(trim!.attributes).toMatchObject({
    'text.operation': 'trim',
    'text.operation.index': 0,
    'text.trim.intensity': 30,
    'text.length_in': TRACED_TEXT.length,
    'text.length_out': TRACED_TEXT.replace(/ +/g, ' ').length,
  });
  expect(tokensIn!.attributes).toMatchObject({ 'text.counted': 'input' });
  expect(tokensOut!.attributes).toMatchObject({ 'text.counted': 'output' });
  expect(tokensIn!.attributes['text.tokens']).toBe(pipelineSpan!.attributes['text.tokens_in']);
  expect(tokensOut!.attributes['text.tokens']).toBe(pipelineSpan!.attributes['text.tokens_out']);
}

describe('one trace per job, received by a real collector', () => {
  const jobs = new Map<'image' | 'text' | 'audio', string>();

  beforeAll(async () => {
    for (const pipeline of ['image', 'text', 'audio'] as const) {
      jobs.set(pipeline, await createJob(pipeline));
    }
    const deadline = Date.now() + 120_000;
    while (received.length < jobs.size && Date.now() < deadline) await sleep(200);
    expect(received.sort(), stack.logs()).toEqual([...jobs.values()].sort());
  }, 180_000);

  for (const pipeline of ['image', 'text', 'audio'] as const) {
    it(`${pipeline}: POST, job service, worker, billing and webhook in one tree`, async () => {
      const jobId = jobs.get(pipeline)!;
      const trace = await waitForTrace((spans) => traceOfJob(spans, jobId), isComplete);
      const tree = renderTraceTree(trace);
      console.log(`Trace of the ${pipeline} job ${jobId}:\n${tree}`);

      // One root: the public request, named after its route, with the account and the status.
      const roots = trace.filter((span) => span.parentSpanId === '');
      expect(roots, tree).toHaveLength(1);
      const root = roots[0]!;
      expect(root).toMatchObject({ service: 'gateway', kind: SPAN_KIND.server });
      expect(root.name).toBe(`POST /v1/${pipeline}`);
      expect(root.attributes['http.route']).toBe(`/v1/${pipeline}`);
      expect(
        root.attributes['http.response.status_code'] ?? root.attributes['http.status_code'],
      ).toBe(202);
      expect(root.attributes['tamp.account_id']).toBe(account.accountId);
      const everything = await readFile(collector.spansFile, 'utf8');
      expect(everything).not.toContain(account.apiKey);
      expect(everything).not.toContain(RECEIVER_TOKEN);

      // Every parent is in the trace.
      expect(orphansOf(trace), tree).toEqual([]);

      // Every service the job goes through took part.
      const services = new Set(trace.map((span) => span.service));
      for (const service of ['gateway', 'job', 'billing', `worker-${pipeline}`, 'webhook']) {
        expect(services, tree).toContain(service);
      }
      if (pipeline !== 'text') expect(services, tree).toContain('upload');

      // Across NATS: each server span's parent is a client span of another service, each
      // consumer span's parent a producer span.
      const byId = new Map(trace.map((span) => [span.spanId, span]));
      for (const span of trace) {
        const parent = byId.get(span.parentSpanId);
        if (span.kind === SPAN_KIND.server && span.attributes['rpc.system'] === 'nats') {
          expect(parent?.kind, `${span.service}: ${span.name}`).toBe(SPAN_KIND.client);
          expect(parent?.name).toBe(span.name);
        }
        if (span.kind === SPAN_KIND.consumer && span.attributes['messaging.system'] === 'nats') {
          expect(parent?.kind, `${span.service}: ${span.name}`).toBe(SPAN_KIND.producer);
          expect(parent?.service).not.toBe(span.service);
        }
      }
      const work = trace.find(
        (span) => span.service === `worker-${pipeline}` && span.kind === SPAN_KIND.consumer,
      );
      expect(work?.name).toBe(`process worker-${pipeline}`);
      expect(byId.get(work!.parentSpanId)?.service).toBe('job');

      // The pipeline's own work, below the worker's processing span.
      const pipelineSpans = {
        image: ['sharp process', 'sharp probe', 'sharp encode'],
        text: ['text pipeline', 'text trim', 'text count tokens'],
        audio: ['ffprobe', 'ffmpeg'],
      }[pipeline];
      const names = new Set(trace.map((span) => span.name));
      for (const name of pipelineSpans) expect(names, tree).toContain(name);
      if (pipeline === 'text') expectTextStepSpans(trace, tree);
      if (pipeline === 'audio') {
        const ffmpeg = trace.filter((span) => span.name === 'ffmpeg');
        for (const run of ffmpeg) {
          const args = run.attributes['process.command_args'] as string[];
          expect(args).toContain('<file>');
          expect(args.join(' ')).not.toContain(dataDir);
        }
      }

      // Database calls are traced, and so are object-store calls (HTTP client spans to S3).
      expect(
        trace.some((span) => span.attributes['db.system'] === 'mongodb'),
        tree,
      ).toBe(true);
      if (pipeline !== 'text') {
        const s3Calls = trace.filter(
          (span) =>
            span.service === `worker-${pipeline}` &&
            span.kind === SPAN_KIND.client &&
            ['GET', 'PUT'].includes(span.name),
        );
        expect(s3Calls.length, tree).toBeGreaterThanOrEqual(2);
      }

      // The failed first delivery attempt is marked as an error; the retry is not.
      const deliveries = trace
        .filter((span) => span.name.startsWith('webhook deliver'))
        .sort((a, b) => (a.startTimeUnixNano < b.startTimeUnixNano ? -1 : 1));
      expect(deliveries.length, tree).toBeGreaterThanOrEqual(2);
      expect(deliveries[0]!.statusCode).toBe(STATUS_ERROR);
      expect(deliveries.at(-1)!.statusCode).not.toBe(STATUS_ERROR);
      expect(deliveries[0]!.attributes['http.response.status_code']).toBe(503);
      expect(deliveries.at(-1)!.attributes['http.response.status_code']).toBe(204);
    }, 90_000);
  }

  it('inline text: the steps are spans below the text pipeline span, in the request trace', async () => {
    // A length no other job has: it finds the trim step's span among everything collected.
    const text = `inline${' x'.repeat(100 + Math.floor(Math.random() * 500))}  end`;
    const created = await stack.api<{ id: string; status: string }>('POST', '/v1/text', {
      token: account.apiKey,
      body: { text, preset: 'chill' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const isTrim = (span: CollectedSpan) =>
      span.name === 'text trim' && span.attributes['text.length_in'] === text.length;
    const trace = await waitForTrace(
      (spans) => {
        const traceId = spans.find(isTrim)?.traceId;
        return spans.filter((span) => span.traceId === traceId);
      },
      (found) => found.some((span) => span.parentSpanId === ''),
      30_000,
    );
    const tree = renderTraceTree(trace);
    const trim = trace.find(isTrim);
    expect(trim, tree).toBeDefined();
    const byId = new Map(trace.map((span) => [span.spanId, span]));
    const pipelineSpan = byId.get(trim!.parentSpanId);
    expect(pipelineSpan?.name, tree).toBe('text pipeline');
    expect(pipelineSpan?.service).toBe('worker-text');
    expect(
      trace.filter((span) => span.parentSpanId === pipelineSpan!.spanId).map((span) => span.name),
      tree,
    ).toEqual(expect.arrayContaining(['text trim', 'text count tokens', 'text count tokens']));
    const roots = trace.filter((span) => span.parentSpanId === '');
    expect(
      roots.map((span) => span.name),
      tree,
    ).toEqual(['POST /v1/text']);
    expect(orphansOf(trace), tree).toEqual([]);
  }, 60_000);

  it('PDF text: the extraction and the steps are spans of the job, with their shape', async () => {
    const pdf = buildPdf([['Traced   page one'], ['Traced page   two']]);
    const fileId = await uploadFile(stack, account.apiKey, 'traced.pdf', pdf);
    const jobId = await createQueuedJob('text', { fileId, preset: 'chill' });
    const trace = await waitForTrace(
      (spans) => traceOfJob(spans, jobId),
      (found) => found.filter((span) => span.name === 'text count tokens').length === 2,
    );
    const tree = renderTraceTree(trace);
    const byId = new Map(trace.map((span) => [span.spanId, span]));
    const extraction = trace.find((span) => span.name === 'pdf extract text');
    expect(extraction, tree).toBeDefined();
    expect(byId.get(extraction!.parentSpanId)?.name, tree).toBe('process worker-text');
    expect(extraction!.attributes).toMatchObject({
      'pdf.bytes': pdf.length,
      'pdf.pages': 2,
      'pdf.pages_with_text': 2,
    });
    const trim = trace.find((span) => span.name === 'text trim');
    expect(byId.get(trim?.parentSpanId ?? '')?.name, tree).toBe('text pipeline');
    // The trim step got the text the extraction gave.
    expect(trim!.attributes['text.length_in']).toBe(extraction!.attributes['text.length_out']);
    expect(trim!.startTimeUnixNano + CLOCK_SLACK_NS).toBeGreaterThanOrEqual(
      extraction!.endTimeUnixNano,
    );
  }, 60_000);

  it('sends no trace context to the webhook receiver, which is a third party', () => {
    // Every job's deliveries arrived (beforeAll), each with its spans (above): none carried ours.
    expect(received.length).toBeGreaterThanOrEqual(3);
    expect(traceHeadersReceived).toEqual([]);
  });

  it('marks the attempt of a job whose input is corrupt as an error, down to the failing ffprobe', async () => {
    // A RIFF/WAVE header (the upload's signature check passes) over bytes no decoder reads.
    const corrupt = Buffer.concat([
      Buffer.from('RIFF'),
      Buffer.from([0x24, 0x08, 0, 0]),
      Buffer.from('WAVE'),
      Buffer.alloc(2_048, 0x5a),
    ]);
    const audioId = await uploadFile(stack, account.apiKey, 'corrupt.wav', corrupt);
    const jobId = await createQueuedJob('audio', { audioId, preset: 'chill' });
    const failedWork = (trace: readonly CollectedSpan[]) =>
      trace.find(
        (span) =>
          span.service === 'worker-audio' &&
          span.kind === SPAN_KIND.consumer &&
          span.statusCode === STATUS_ERROR,
      );
    const trace = await waitForTrace(
      (spans) => traceOfJob(spans, jobId),
      (found) => failedWork(found) !== undefined,
      60_000,
    );
    const tree = renderTraceTree(trace);
    expect(failedWork(trace), tree).toBeDefined();
    const probe = trace.find((span) => span.name === 'ffprobe');
    expect(probe?.statusCode, tree).toBe(STATUS_ERROR);
  }, 90_000);

  it('writes trace_id and span_id on the log lines of the spans it logged in', async () => {
    const logs = stack.logs();
    const traced = logs
      .split('\n')
      .map((line) => line.slice(line.indexOf('| ') + 2))
      .filter((line) => line.startsWith('{') && line.includes('"trace_id"'));
    expect(traced.length, logs).toBeGreaterThan(0);
    for (const line of traced) {
      expect(JSON.parse(line)).toMatchObject({
        trace_id: expect.stringMatching(/^[0-9a-f]{32}$/),
        span_id: expect.stringMatching(/^[0-9a-f]{16}$/),
      });
    }
  });
});
