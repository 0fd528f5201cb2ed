import { randomUUID } from 'node:crypto';
import {
  AUDIO_EXTENSIONS,
  audioEncodeOf,
  type ConsumedUpload,
  type CreateJobRequest,
  compressionRatio,
  countCharacters,
  creditCost,
  expandPreset,
  IMAGE_EXTENSIONS,
  imagePipeline,
  type JobMetrics,
  LIMITS,
  newId,
  PIPELINE_DEFINITIONS,
  type Pipeline,
  storageKeys,
  type UsageDimensions,
  withCompressionRatio,
} from '@tamp/proto';
import type { LedgerEntry, UsageDocument } from '../../services/billing/src/adapters/documents';
import { billingPeriodAt } from '../../services/billing/src/domain/billing-period';
import { refundMovement } from '../../services/billing/src/domain/credit-movement';
import {
  claimIdOf,
  type IdempotencyClaim,
} from '../../services/job/src/adapters/idempotency-repository';
import { jobEventOf } from '../../services/job/src/domain/events';
import { expiryHourOf } from '../../services/job/src/domain/expiry-hours';
import {
  inputBytesOf,
  type JobDocument,
  resultExpiryHourOf,
} from '../../services/job/src/domain/job';
import { newJob } from '../../services/job/src/domain/new-job';
import { UPLOAD_RETENTION_MS } from '../../services/upload/src/application/upload-sweeper';
import { parseFilename } from '../../services/upload/src/domain/filename';
import type { ContentFormat } from '../../services/upload/src/domain/signature';
import type { Upload } from '../../services/upload/src/domain/upload';
import type { AttemptDocument } from '../../services/webhook/src/adapters/attempt-repository';
import type { DeliveryDocument } from '../../services/webhook/src/adapters/delivery-repository';
import {
  buildPayload,
  deliveryKey,
  serializePayload,
  webhookIdFor,
} from '../../services/webhook/src/domain/payload';
import { prose } from '../load/workload';

/**
 * The documents one job leaves behind in every service's collections, as of `now`, made without
 * running it: the job (built by the job service's own `newJob`, then finished the way the job
 * service finishes one) and its Idempotency-Key claim, billing's reservation (and refund, for a
 * failed job) and usage record, the upload it consumed, and for some jobs a webhook delivery
 * with its attempts (its body built by the webhook service's own payload code). The numbers in
 * metrics are plausible, not computed.
 *
 * What a store that has run for weeks holds, not what it held at some instant: results older
 * than the retention are expired (the job sweeper's doing); uploads and claims older than theirs
 * are gone (the upload and job sweepers'), so they are not made.
 */

const DAY_MS = 24 * 60 * 60 * 1000;
/** Jobs were created over this many days before now. */
const SPAN_MS = 10 * DAY_MS;
/**
 * Ages at which a sweeper deals with what a job left: its result expires, its upload and its
 * idempotency claim are deleted. No job is seeded within an hour short of one of them (nor in
 * the two minutes after, which covers its upload being a little older than the job), so while
 * the seeded store is measured no sweeper has seeded work to do, work no kind of job caused.
 */
const SWEPT_AT_AGES_MS = [
  LIMITS.resultRetentionMs,
  UPLOAD_RETENTION_MS,
  LIMITS.idempotencyKeyTtlMs,
] as const;
const SWEEP_MARGIN_BEFORE_MS = 60 * 60 * 1000;
const SWEEP_MARGIN_AFTER_MS = 2 * 60 * 1000;

/** Shares of the pipelines, of failed jobs, and of jobs whose creator asked for a webhook. */
const PIPELINE_SHARES: [Pipeline, number][] = [
  ['text', 0.5],
  ['image', 0.35],
  ['audio', 0.15],
];
const FAILED_SHARE = 0.04;
const WEBHOOK_SHARE = 0.1;

/** Everything one job leaves behind, by the collection it lives in. */
export interface JobTrail {
  job: JobDocument;
  ledger: LedgerEntry[];
  usage: UsageDocument | null;
  /** Only for uploads younger than the upload sweeper's retention. */
  upload: Upload | null;
  /** The Idempotency-Key claim of a queued job younger than the key's lifetime. */
  claim: IdempotencyClaim | null;
  delivery: DeliveryDocument | null;
  attempts: AttemptDocument[];
}

export function jobTrail(accountId: string, now: Date): JobTrail {
  const createdAt = new Date(now.getTime() - jobAge());
  const { request, upload, inline } = creation(accountId, createdAt);
  const consumed = upload === null ? undefined : consumedUpload(accountId, upload);
  const job = finished(newJob(request, consumed, createdAt), inline, now);
  const younger = (date: Date, lifetimeMs: number) => now.getTime() - date.getTime() < lifetimeMs;
  return {
    job,
    ledger: ledgerEntries(job),
    usage: usageOf(job),
    upload:
      upload !== null && younger(upload.createdAt, UPLOAD_RETENTION_MS)
        ? uploadDocument(accountId, upload, createdAt)
        : null,
    claim: younger(createdAt, LIMITS.idempotencyKeyTtlMs)
      ? idempotencyClaim(request, createdAt)
      : null,
    ...webhookTrail(job),
  };
}

/** How long ago a job was created: evenly over the span, outside the sweepers' margins. */
function jobAge(): number {
  // Each draw lands in a margin with a chance of about 1 in 80.
  for (let draw = 0; draw < 1_000; draw++) {
    const age = Math.random() * SPAN_MS;
    const nearSweep = SWEPT_AT_AGES_MS.some(
      (sweptAt) => age > sweptAt - SWEEP_MARGIN_BEFORE_MS && age < sweptAt + SWEEP_MARGIN_AFTER_MS,
    );
    if (!nearSweep) return age;
  }
  throw new Error("no job age outside the sweepers' margins");
}

/** The creation request of a job of some pipeline and preset, and the upload it names. */
function creation(
  accountId: string,
  createdAt: Date,
): { request: CreateJobRequest; upload: SeedUpload | null; inline: boolean } {
  const pipeline = weighted(PIPELINE_SHARES);
  const jobId = newId('job', createdAt.getTime());
  const definition = PIPELINE_DEFINITIONS[pipeline];
  const preset = pick(definition.presets);
  const upload = pipeline === 'text' ? null : seedUpload(pipeline, createdAt);
  const source =
    upload === null
      ? textSource(accountId, jobId)
      : ({ kind: 'upload', uploadId: upload.id } as const);
  const inline =
    !preset.alwaysQueued &&
    ((source.kind === 'text' && Math.random() < 0.7) ||
      (pipeline === 'image' && Math.random() < 0.6));
  // newJob takes the request as the endpoint's schema parsed it; the chain is a preset expanded
  // by proto itself, so it is of the request's own pipeline.
  const request = {
    jobId,
    accountId,
    pipeline,
    operations: expandPreset(definition, preset.name),
    preset: preset.name,
    source,
    webhookUrl:
      Math.random() < WEBHOOK_SHARE ? `https://hooks.example.com/tamp/${accountId}` : null,
    // Clients key their queued creations; an inline answer needs no key.
    idempotencyKey: inline ? null : randomUUID(),
    requestHash: randomUUID().replaceAll('-', ''),
    maxUploadBytes: 100 * 1024 * 1024,
  } as CreateJobRequest;
  return { request, upload, inline };
}

/** The claim of the request's Idempotency-Key, as IdempotencyRepository.claim stores it. */
function idempotencyClaim(request: CreateJobRequest, createdAt: Date): IdempotencyClaim | null {
  if (request.idempotencyKey === null) return null;
  return {
    _id: claimIdOf(request.accountId, request.idempotencyKey),
    jobId: request.jobId,
    requestHash: request.requestHash,
    createdAt,
    expiryHour: expiryHourOf(createdAt, LIMITS.idempotencyKeyTtlMs),
  };
}

type TextSource = { kind: 'text'; text: string } | StoredTextSource;
type StoredTextSource = { kind: 'stored-text'; key: string; size: number; characters: number };

/** Mostly up to 2 KB sent inline, sometimes a document too large for the fast path. */
function textSource(accountId: string, jobId: string): TextSource {
  if (Math.random() < 0.1) {
    const size = LIMITS.textFastPathBytes + Math.round(Math.random() * 400_000);
    return {
      kind: 'stored-text',
      key: storageKeys.input(accountId, jobId),
      size,
      characters: size,
    };
  }
  return { kind: 'text', text: prose(200 + Math.round(Math.random() * 1_800)) };
}

interface SeedUpload {
  id: string;
  filename: string;
  size: number;
  format: ContentFormat;
  createdAt: Date;
}

const UPLOAD_FORMATS: Record<'image' | 'audio', [extension: string, format: ContentFormat][]> = {
  image: [
    ['jpg', 'jpeg'],
    ['png', 'png'],
  ],
  audio: [
    ['mp3', 'mp3'],
    ['wav', 'wav'],
  ],
};

/** A photo or a recording, uploaded shortly before the job that consumed it. */
function seedUpload(pipeline: 'image' | 'audio', jobCreatedAt: Date): SeedUpload {
  const [extension, format] = pick(UPLOAD_FORMATS[pipeline]);
  const createdAt = new Date(jobCreatedAt.getTime() - 5_000 - Math.round(Math.random() * 55_000));
  return {
    id: newId('upload', createdAt.getTime()),
    filename: `${pipeline}-${randomUUID().slice(0, 8)}.${extension}`,
    size:
      pipeline === 'image'
        ? 80_000 + Math.round(Math.random() * 4_000_000)
        : 500_000 + Math.round(Math.random() * 20_000_000),
    format,
    createdAt,
  };
}

/** What the upload service answered consumeUpload with: the checked copy's key. */
function consumedUpload(accountId: string, upload: SeedUpload): ConsumedUpload {
  return {
    uploadId: upload.id,
    key: storageKeys.checkedUpload(accountId, upload.id),
    size: upload.size,
    contentType: parseFilename(upload.filename).contentType,
    filename: upload.filename,
  };
}

function uploadDocument(accountId: string, upload: SeedUpload, jobCreatedAt: Date): Upload {
  return {
    _id: upload.id,
    accountId,
    filename: upload.filename,
    ...parseFilename(upload.filename),
    declaredSize: upload.size,
    key: storageKeys.upload(accountId, upload.id),
    createdAt: upload.createdAt,
    expiresAt: new Date(upload.createdAt.getTime() + LIMITS.uploadLifetimeMs),
    consumption: {
      checkedAt: jobCreatedAt,
      size: upload.size,
      detectedFormat: upload.format,
      formatProblem: null,
    },
  };
}

/** The job as the job service leaves it once it ended and every side effect is confirmed. */
function finished(job: JobDocument, inline: boolean, now: Date): JobDocument {
  const completedAt = new Date(
    job.createdAt.getTime() + (inline ? 80 : 2_000) + Math.round(Math.random() * 5_000),
  );
  const settled = {
    ...job,
    inline,
    attempts: 1,
    updatedAt: completedAt,
    completedAt,
    refundPending: false,
  };
  if (Math.random() < FAILED_SHARE) {
    const error = FAILURES[job.pipeline];
    // A failed queued job's event flag is confirmed. Inline jobs and completed ones have none:
    // the creation's admission, or the worker's delivery, answered for their event.
    return {
      ...settled,
      ...(!inline && { eventPublished: true }),
      status: 'failed',
      error,
      lastError: error,
    };
  }
  const output = workerOutput(job);
  const expiresAt = completedAt.getTime() + LIMITS.resultRetentionMs;
  const expired = now.getTime() > expiresAt;
  return {
    ...settled,
    status: 'completed',
    result: {
      outputKey: output.outputKey,
      // What the retention sweeper's markExpired leaves: no text, updated when it ran.
      outputText: expired ? null : output.outputText,
      metrics: withCompressionRatio(output.metrics),
      expired,
    },
    resultExpiryHour: resultExpiryHourOf(completedAt),
    usage: output.usage,
    updatedAt: expired ? new Date(expiresAt) : completedAt,
  };
}

const FAILURES: Record<Pipeline, string> = {
  text: 'The text could not be processed within the time limit',
  image: 'The image could not be decoded: the file is truncated',
  audio: 'The audio could not be decoded: invalid data found when processing input',
};

interface WorkerOutput {
  outputKey: string | null;
  outputText: string | null;
  metrics: JobMetrics;
  usage: UsageDimensions;
}

/** What the pipeline's worker would have reported for the job. */
function workerOutput(job: JobDocument): WorkerOutput {
  const inputSize = inputBytesOf(job.input);
  const common = {
    inputSize,
    operationsApplied: job.operations.map((operation) => (operation as { type: string }).type),
    processingMs: Math.round(20 + Math.random() * 3_000),
  };
  const resultKey = (extension: string) => storageKeys.result(job.accountId, job._id, extension);
  switch (job.pipeline) {
    case 'text': {
      const outputSize = Math.round(inputSize * 0.8);
      const text = job.input.kind === 'text' ? job.input.text.slice(0, outputSize) : null;
      return {
        // The inline fast path answers text only; a queued job also stores result.txt.
        outputKey: job.inline ? null : resultKey('txt'),
        outputText: text,
        metrics: {
          ...common,
          outputSize,
          compressionRatio: compressionRatio(inputSize, outputSize),
          tokensIn: Math.round(inputSize / 4),
          tokensOut: Math.round(outputSize / 4),
        },
        usage: {
          inputBytes: inputSize,
          characters: job.input.kind === 'text' ? countCharacters(job.input.text) : inputSize,
        },
      };
    }
    case 'image': {
      const chain = job.operations as Parameters<typeof imagePipeline.encodeOf>[0];
      const format = imagePipeline.encodeOf(chain).params.format;
      const resize = chain.find((operation) => operation.type === 'resize');
      const outputSize = Math.round(inputSize * 0.3);
      return {
        // The seeded jobs name fixed formats; an auto job's result is stored as WebP here.
        outputKey: resultKey(IMAGE_EXTENSIONS[format === 'auto' ? 'webp' : format]),
        outputText: null,
        metrics: {
          ...common,
          outputSize,
          compressionRatio: compressionRatio(inputSize, outputSize),
          width: resize?.params.width ?? 1600,
          height: resize?.params.height ?? 1200,
          format,
        },
        usage: { inputBytes: inputSize, megapixels: 1.92 },
      };
    }
    case 'audio': {
      const chain = job.operations as Parameters<typeof audioEncodeOf>[0];
      const format = audioEncodeOf(chain).params.format;
      // About 128 kbit/s in, 24 kbit/s out.
      const durationInSec = Math.round((inputSize / 16_000) * 1000) / 1000;
      const outputSize = Math.round(durationInSec * 3_000);
      return {
        // The seeded jobs name fixed formats; an auto job's result is stored as Opus here.
        outputKey: resultKey(AUDIO_EXTENSIONS[format === 'auto' ? 'opus' : format]),
        outputText: null,
        metrics: {
          ...common,
          outputSize,
          compressionRatio: compressionRatio(inputSize, outputSize),
          durationInSec,
          durationOutSec: durationInSec,
          loudnessLufsOut: -16,
          truePeakDbOut: -1.5,
        },
        usage: { inputBytes: inputSize, audioSeconds: durationInSec },
      };
    }
  }
}

/**
 * Billing's ledger for the job: the reservation its creation made (from the allowance of the
 * period it was created in), and for a failed job the refund of exactly that.
 */
function ledgerEntries(job: JobDocument): LedgerEntry[] {
  const credits = creditCost(job.pipeline, inputBytesOf(job.input));
  const periodStart = billingPeriodAt(job.createdAt, null).start;
  const reserve: LedgerEntry = {
    _id: `reserve:${job._id}`,
    kind: 'reserve',
    accountId: job.accountId,
    jobId: job._id,
    credits,
    state: 'applied',
    allowance: -credits,
    granted: 0,
    periodStart,
    createdAt: job.createdAt,
    appliedAt: job.createdAt,
  };
  if (job.status !== 'failed') return [reserve];
  const refundedAt = job.completedAt ?? job.updatedAt;
  const { movement } = refundMovement(
    { allowance: -credits, granted: 0, periodStart },
    billingPeriodAt(refundedAt, null).start,
  );
  return [
    reserve,
    {
      ...reserve,
      _id: `refund:${job._id}`,
      kind: 'refund',
      allowance: movement.allowance,
      granted: movement.granted,
      periodStart: billingPeriodAt(refundedAt, null).start,
      createdAt: refundedAt,
      appliedAt: refundedAt,
    },
  ];
}

/** The usage record billing keeps of a completed job (UsageRecording.record). */
function usageOf(job: JobDocument): UsageDocument | null {
  if (job.status !== 'completed' || job.usage === null || job.completedAt === null) return null;
  return {
    _id: job._id,
    accountId: job.accountId,
    pipeline: job.pipeline,
    inputBytes: job.usage.inputBytes,
    audioSeconds: job.usage.audioSeconds ?? 0,
    megapixels: job.usage.megapixels ?? 0,
    characters: job.usage.characters ?? 0,
    completedAt: job.completedAt,
  };
}

/**
 * The webhook service's delivery of the job's terminal event to the job's webhook URL, and its
 * attempts: mostly delivered at once, sometimes after a failed first attempt, rarely given up
 * after every retry.
 */
function webhookTrail(job: JobDocument): Pick<JobTrail, 'delivery' | 'attempts'> {
  if (job.webhookUrl === null) return { delivery: null, attempts: [] };
  const event = jobEventOf(job);
  const attemptCount = weighted<number>([
    [1, 0.9],
    [2, 0.08],
    [LIMITS.webhookRetries + 1, 0.02],
  ]);
  const delivered = attemptCount <= 2;
  const scheduledAt = new Date(event.completedAt);
  const attempts = Array.from({ length: attemptCount }, (_, index): AttemptDocument => {
    const succeeded = delivered && index === attemptCount - 1;
    return {
      _id: `dlv_${randomUUID()}`,
      jobId: job._id,
      event: event.event,
      sequence: 1,
      attempt: index + 1,
      attemptedAt: new Date(scheduledAt.getTime() + index * 60_000),
      target: job.webhookUrl!,
      statusCode: succeeded ? 200 : 503,
      latencyMs: 40 + Math.round(Math.random() * 400),
      outcome: succeeded ? 'delivered' : 'failed',
      error: succeeded ? null : 'HTTP 503',
      instance: 'webhook-0:1:seeded',
    };
  });
  const last = attempts.at(-1)!;
  return {
    delivery: {
      _id: deliveryKey(job._id, event.event),
      jobId: job._id,
      accountId: job.accountId,
      event: event.event,
      target: job.webhookUrl,
      targetSource: 'job',
      body: serializePayload(buildPayload(event)),
      webhookId: webhookIdFor(job._id, event.event),
      sequence: 1,
      attempts: attemptCount,
      status: delivered ? 'delivered' : 'exhausted',
      nextAttemptAt: null,
      leaseUntil: null,
      claimId: null,
      lastOutcome: last.outcome,
      lastError: last.error,
      createdAt: scheduledAt,
      updatedAt: last.attemptedAt,
    },
    attempts,
  };
}

function pick<Item>(items: readonly Item[]): Item {
  return items[Math.floor(Math.random() * items.length)]!;
}

/** One of the values, each with its share of the chance (the shares sum to 1). */
function weighted<Value>(shares: readonly [Value, number][]): Value {
  let left = Math.random();
  for (const [value, share] of shares) {
    left -= share;
    if (left < 0) return value;
  }
  return shares.at(-1)![0];
}
