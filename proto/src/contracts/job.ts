import { z } from 'zod';
import { publicJob, publicJobList, publicResult } from '../api';
import { JOB_STATUSES, JOB_TYPES, type Pipeline } from '../limits';
import { jobEvent, jobMetrics, jobWorkMessage, usageDimensions } from '../messages';
import { AUDIO_PRESET_NAMES, audioOperationSchema } from '../pipelines/audio';
import { IMAGE_PRESET_NAMES, imageOperationSchema } from '../pipelines/image';
import { TEXT_PRESET_NAMES, textOperationSchema } from '../pipelines/text';
import { endpoint } from './endpoint';

const jobSource = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('upload'), uploadId: z.string() }),
  /** Fast-path-sized inline text travels in the message. */
  z.object({ kind: z.literal('text'), text: z.string() }),
  /**
   * Larger inline text (up to 5,000,000 characters) never crosses NATS: the gateway stores it
   * as `inputs/<accountId>/<jobId>` first and passes the reference.
   */
  z.object({
    kind: z.literal('stored-text'),
    key: z.string(),
    size: z.number().int().nonnegative(),
    characters: z.number().int().nonnegative(),
  }),
]);

/**
 * A job as the job service answers a read: the public job, except that a text output kept only
 * in storage (over the text worker's `outputText` cap, up to what 5,000,000 characters trim
 * to) comes as its storage key, which the gateway reads. Large text never crosses NATS in
 * either direction: a reply is capped at the server's max_payload (1 MB by default).
 */
export const jobRead = publicJob.extend({
  result: publicResult.extend({ outputTextKey: z.string().optional() }).optional(),
});
export type JobRead = z.infer<typeof jobRead>;

/**
 * A job's resolved chain, and the preset it was expanded from (absent: the client sent explicit
 * operations). The preset changes nothing the job does; the job service keeps it to label the
 * job's metrics (docs/decisions.md#what-a-job-holds).
 */
const chainOf = {
  audio: {
    operations: z.array(audioOperationSchema),
    preset: z.enum(AUDIO_PRESET_NAMES).optional(),
  },
  image: {
    operations: z.array(imageOperationSchema),
    preset: z.enum(IMAGE_PRESET_NAMES).optional(),
  },
  text: { operations: z.array(textOperationSchema), preset: z.enum(TEXT_PRESET_NAMES).optional() },
};

/** A preset of any pipeline, as createJob carries it. */
export type PresetName = NonNullable<z.output<(typeof chainOf)[Pipeline]['preset']>>;

/**
 * The `preset` label of every job metric: the preset the job's chain was expanded from, `custom`
 * for an explicit operations chain (null), and `unrecorded` (undefined) for a job stored before
 * jobs kept their preset, which may have run either, so calling it `custom` would be wrong
 * (docs/decisions.md#what-a-job-holds). Its values are the preset names and those two, so it
 * never grows with the traffic.
 */
export function presetLabel(preset: PresetName | null | undefined): string {
  if (preset === undefined) return 'unrecorded';
  return preset ?? 'custom';
}

const createJobCommon = {
  /** Minted by the gateway (so large text can be stored under it first); a replay keeps the original. */
  jobId: z.string(),
  accountId: z.string(),
  source: jobSource,
  webhookUrl: z.string().nullable(),
  idempotencyKey: z.string().nullable(),
  /** SHA-256 of the endpoint and the canonical request body, to detect a reused key. */
  requestHash: z.string(),
  maxUploadBytes: z.number().int().positive(),
};

export const jobEndpoints = {
  /**
   * Creates a job from an already validated request whose chain is resolved (preset expanded,
   * encode placed). Inline-eligible jobs run through `work.<pipeline>.inline` and answer 200;
   * the rest are published to JOBS and answer 202 `{ id, status: "created" }`.
   */
  createJob: endpoint(
    'job',
    'create-job',
    z.discriminatedUnion('pipeline', [
      z.object({ ...createJobCommon, pipeline: z.literal('audio'), ...chainOf.audio }),
      z.object({ ...createJobCommon, pipeline: z.literal('image'), ...chainOf.image }),
      z.object({ ...createJobCommon, pipeline: z.literal('text'), ...chainOf.text }),
    ]),
    z.object({ httpStatus: z.union([z.literal(200), z.literal(202)]), job: publicJob }),
  ),
  /** JOB_NOT_FOUND for unknown, malformed or another account's ids; fresh 1-hour outputUrl. */
  getJob: endpoint(
    'job',
    'get-job',
    z.object({ accountId: z.string(), jobId: z.string() }),
    jobRead,
  ),
  /**
   * The event a terminal job published (or would have: inline jobs publish none), for the
   * dashboard's test delivery. JOB_NOT_FOUND for unknown, another account's or unfinished jobs.
   */
  getJobEvent: endpoint(
    'job',
    'get-job-event',
    z.object({ accountId: z.string(), jobId: z.string() }),
    jobEvent,
  ),
  listJobs: endpoint(
    'job',
    'list-jobs',
    z.object({
      accountId: z.string(),
      type: z.enum(JOB_TYPES).optional(),
      status: z.enum(JOB_STATUSES).optional(),
      limit: z.number().int().min(1).max(100),
      cursor: z.string().optional(),
    }),
    publicJobList,
  ),

  // Worker-facing: the job service owns every transition of a job.
  /**
   * Called when a worker receives a delivery. `attempt` is JetStream's delivery count.
   * `run`: the job is now `processing` (created→pending→processing or pending→processing).
   * `skip`: the job is already terminal (a redelivery); ack and do nothing.
   * `superseded`: a later delivery of the same message runs the job: neither ack nor nak, for
   * JetStream applies either to the message, so it would take the running delivery's lease
   * away (an ack would delete the message under it); stop and let that delivery settle it.
   * `failed`: attempts are used up (e.g. the previous attempt's worker died); the job was
   * failed and refunded; ack.
   */
  beginAttempt: endpoint(
    'job',
    'begin-attempt',
    z.object({ jobId: z.string(), attempt: z.number().int().positive(), worker: z.string() }),
    z.object({
      action: z.enum(['run', 'skip', 'superseded', 'failed']),
      work: jobWorkMessage.optional(),
    }),
  ),
  /** processing → completed, once; publishes `events.job.completed` and the notification. */
  completeJob: endpoint(
    'job',
    'complete-job',
    z.object({
      jobId: z.string(),
      attempt: z.number().int().positive(),
      outputKey: z.string().nullable(),
      outputText: z.string().nullable(),
      metrics: jobMetrics,
      usage: usageDimensions,
    }),
    z.object({ accepted: z.boolean() }),
  ),
  /**
   * A failed attempt: back to `pending` with the backoff to wait before the retry (the worker
   * naks with that delay), or `failed` (refunded, `events.job.failed`) when permanent or when
   * it was the last attempt.
   */
  /**
   * processing → pending without counting the attempt: a worker shutting down hands back a job
   * it could not finish in its grace period. JetStream still counts the redelivery, so the job
   * service remembers the hand-back and discounts it from every later delivery number; a
   * rolling deploy then never uses up a long job's attempts. `attempt` is the delivery count.
   */
  handBackAttempt: endpoint(
    'job',
    'hand-back-attempt',
    z.object({ jobId: z.string(), attempt: z.number().int().positive() }),
    z.object({ accepted: z.boolean() }),
  ),
  failAttempt: endpoint(
    'job',
    'fail-attempt',
    z.object({
      jobId: z.string(),
      attempt: z.number().int().positive(),
      error: z.string(),
      permanent: z.boolean(),
    }),
    z.object({ status: z.enum(['pending', 'failed']), retryInMs: z.number().int().nonnegative() }),
  ),
};

/** A createJob request as the job service receives it (parsed: operations carry their defaults). */
export type CreateJobRequest = z.output<typeof jobEndpoints.createJob.request>;
/** The same as a caller builds it, before parsing. */
export type CreateJobInput = z.input<typeof jobEndpoints.createJob.request>;

/** Reply of a worker to `work.<pipeline>.inline` (request body: a JobWorkMessage). */
export const inlineWorkReply = z.discriminatedUnion('status', [
  z.object({
    status: z.literal('completed'),
    outputKey: z.string().nullable(),
    outputText: z.string().nullable(),
    metrics: jobMetrics,
    usage: usageDimensions,
  }),
  z.object({
    status: z.literal('failed'),
    error: z.string(),
    /**
     * Whether another attempt may succeed (storage briefly unreachable, a timeout…), by the same
     * rule as `failAttempt`'s `permanent` (its negation). A retryable failure is not the job's
     * fate: the job service queues the job, as when no worker answers, and the queued worker
     * retries it with backoff. Only a permanent failure (bad input) fails the job at once.
     * Absent (a worker that predates the flag) reads as false: such workers were written for a
     * `failed` that is final, so during a rolling upgrade their failures keep answering 200
     * failed, instead of every one of them (corrupt input included) becoming a 202 and a rerun.
     */
    retryable: z.boolean().default(false),
  }),
  /**
   * Not run: the worker is saturated (every slot busy and as many waiting, or the machine's
   * CPU or memory taken). The job service queues the job at once instead of waiting.
   */
  z.object({ status: z.literal('declined'), reason: z.string() }),
]);
export type InlineWorkReply = z.infer<typeof inlineWorkReply>;
