import { z } from 'zod';
import { publicJob, publicJobList, publicUpload, publicUsage } from './api';
import { JOB_STATUSES, JOB_TYPES, PIPELINES, type Pipeline } from './limits';
import { jobMetrics, jobWorkMessage, usageDimensions } from './messages';
import { AUDIO_PRESET_NAMES, audioOperationSchema } from './pipelines/audio';
import { IMAGE_PRESET_NAMES, imageOperationSchema } from './pipelines/image';
import { TEXT_PRESET_NAMES, textOperationSchema } from './pipelines/text';
import { withoutNul } from './storable-strings';

/**
 * The request/reply contracts between services, on `svc.<service>.<name>` (namespaced by the
 * topology). Each endpoint is served by a queue group of its owning service; requests and
 * responses are validated on both ends with these schemas. Failures travel as ServiceError
 * JSON (`{ code, message, details }`) and are rethrown as ServiceError by the caller.
 */
export interface EndpointDefinition<Request extends z.ZodType, Response extends z.ZodType> {
  service: string;
  name: string;
  request: Request;
  response: Response;
}

function endpoint<Request extends z.ZodType, Response extends z.ZodType>(
  service: string,
  name: string,
  request: Request,
  response: Response,
): EndpointDefinition<Request, Response> {
  return { service, name, request, response };
}

/**
 * Webhook targets: absolute http(s) URLs only, IPv6 literals included, and storable (a URL
 * parser would percent-encode a U+0000 in the path, but the string itself is what is stored).
 * Whether a target may be reached is the deployment's target policy (`webhook-targets.ts`):
 * checked by the gateway when the URL is given and by the webhook service at delivery time.
 */
export const httpUrl = z
  .url({ protocol: /^https?$/ })
  .max(2048)
  .check(withoutNul());

export const PLANS = ['free', 'pro'] as const;
export type Plan = (typeof PLANS)[number];

/** What the gateway needs to know about the caller's account on every request. */
export const accountLimits = z.object({
  accountId: z.string(),
  plan: z.enum(PLANS),
  maxUploadBytes: z.number().int().positive(),
  rateLimitPerMinute: z.number().int().positive(),
});
export type AccountLimits = z.infer<typeof accountLimits>;

/**
 * Where an account's 30-day billing cycles are counted from (docs/decisions.md#plans-credits-and-usage): an ISO-8601
 * instant with `Z` or an offset (e.g. `2025-01-15T00:00:00Z`), stored in UTC. That it is not in
 * the future is checked by billing (VALIDATION_ERROR), whose clock periods are computed with.
 */
export const billingCycleAnchorInput = z.iso.datetime({ offset: true });

/** Longest grace period a rotated-out webhook secret may keep signing deliveries: 7 days. */
export const MAX_WEBHOOK_SECRET_GRACE_SECONDS = 7 * 24 * 60 * 60;

const accountView = accountLimits.extend({
  webhookUrl: z.string().nullable(),
  /** `whsec_…`; only the webhook service and the admin API read it. */
  webhookSecret: z.string(),
  /**
   * The secret the last rotation replaced, while its grace period lasts: until `validUntil`
   * every delivery is signed with both. Null otherwise (and when billing predates rotation).
   */
  previousWebhookSecret: z
    .object({ secret: z.string(), validUntil: z.iso.datetime() })
    .nullable()
    .default(null),
  billingCycleAnchor: z.iso.datetime().nullable(),
  createdAt: z.iso.datetime(),
  /** Credits left now: the period's allowance (after any rollover due) and granted credits. */
  credits: z.object({
    allowanceRemaining: z.number().int(),
    grantedRemaining: z.number().int(),
    available: z.number().int(),
  }),
});

const keyView = z.object({
  keyId: z.string(),
  accountId: z.string(),
  /** The first characters of the key, for people to tell keys apart. Never the key. */
  displayPrefix: z.string(),
  createdAt: z.iso.datetime(),
  revokedAt: z.iso.datetime().nullable(),
});

export const billingEndpoints = {
  /** Verifies a full `sk_live_…` key against its SHA-256 hash; unknown or revoked → UNAUTHORIZED. */
  authenticate: endpoint(
    'billing',
    'authenticate',
    z.object({ apiKey: z.string() }),
    accountLimits.extend({ keyId: z.string() }),
  ),
  getAccount: endpoint('billing', 'get-account', z.object({ accountId: z.string() }), accountView),
  /**
   * Reserves a job's credits exactly once per job id (allowance first, then granted credits);
   * INSUFFICIENT_CREDITS when short, and then nothing is taken.
   */
  reserveCredits: endpoint(
    'billing',
    'reserve-credits',
    z.object({
      accountId: z.string(),
      jobId: z.string(),
      pipeline: z.enum(PIPELINES),
      credits: z.number().int().positive(),
    }),
    z.object({ reserved: z.number().int(), replayed: z.boolean() }),
  ),
  /** Gives a job's reservation back exactly once; a second call is a no-op. */
  refundCredits: endpoint(
    'billing',
    'refund-credits',
    z.object({ accountId: z.string(), jobId: z.string() }),
    z.object({ refunded: z.number().int(), replayed: z.boolean() }),
  ),
  getUsage: endpoint('billing', 'get-usage', z.object({ accountId: z.string() }), publicUsage),

  // Admin operations, reached through the admin API only.
  createAccount: endpoint(
    'billing',
    'create-account',
    z.object({
      plan: z.enum(PLANS).default('free'),
      credits: z.number().int().nonnegative().optional(),
      webhookUrl: httpUrl.nullable().optional(),
      /** Unset: calendar-month periods. */
      billingCycleAnchor: billingCycleAnchorInput.optional(),
    }),
    z.object({ accountId: z.string(), apiKey: z.string(), webhookSecret: z.string() }),
  ),
  /** `billingCycleAnchor: null` goes back to calendar-month periods. */
  updateAccount: endpoint(
    'billing',
    'update-account',
    z.object({
      accountId: z.string(),
      plan: z.enum(PLANS).optional(),
      webhookUrl: httpUrl.nullable().optional(),
      billingCycleAnchor: billingCycleAnchorInput.nullable().optional(),
    }),
    accountView,
  ),
  /**
   * Replaces the account's webhook secret with a new one (sealed at rest like the first). The
   * replaced secret keeps signing, next to the new one, for `gracePeriodSeconds` (default:
   * billing's `WEBHOOK_SECRET_GRACE_MS`, 24 h); a secret replaced earlier stops at once.
   * 0 retires it immediately (a leaked secret). Unknown account → NOT_FOUND.
   */
  rotateWebhookSecret: endpoint(
    'billing',
    'rotate-webhook-secret',
    z.object({
      accountId: z.string(),
      gracePeriodSeconds: z.number().int().min(0).max(MAX_WEBHOOK_SECRET_GRACE_SECONDS).optional(),
    }),
    z.object({ webhookSecret: z.string(), previousValidUntil: z.iso.datetime() }),
  ),
  addCredits: endpoint(
    'billing',
    'add-credits',
    z.object({ accountId: z.string(), credits: z.number().int().positive() }),
    z.object({ accountId: z.string(), grantedCredits: z.number().int() }),
  ),
  createKey: endpoint(
    'billing',
    'create-key',
    z.object({ accountId: z.string() }),
    z.object({ keyId: z.string(), apiKey: z.string() }),
  ),
  revokeKey: endpoint('billing', 'revoke-key', z.object({ keyId: z.string() }), keyView),
  listKeys: endpoint(
    'billing',
    'list-keys',
    z.object({ accountId: z.string() }),
    z.object({ keys: z.array(keyView) }),
  ),
};

/** An upload a job may consume: the first-consumption checks have passed. */
export const consumedUpload = z.object({
  uploadId: z.string(),
  key: z.string(),
  size: z.number().int().nonnegative(),
  contentType: z.string(),
  filename: z.string(),
});
export type ConsumedUpload = z.infer<typeof consumedUpload>;

export const uploadEndpoints = {
  /** INVALID_FORMAT for an extension not allowed, FILE_TOO_LARGE over `maxUploadBytes`. */
  createUpload: endpoint(
    'upload',
    'create-upload',
    z.object({
      accountId: z.string(),
      filename: z.string(),
      size: z.number().int().positive(),
      maxUploadBytes: z.number().int().positive(),
    }),
    publicUpload,
  ),
  /**
   * Checks, in this order: unknown, malformed or another account's id (404 UPLOAD_NOT_FOUND);
   * an extension the pipeline does not take (422 INVALID_FORMAT); older than 24 h (410
   * UPLOAD_EXPIRED); then the spec's first-consumption checks: the object exists (409
   * UPLOAD_NOT_COMPLETED), real size within the plan (413), leading bytes match the kind (422).
   * The facts of the first consumption are stored; later jobs reuse them (until 24 h).
   */
  consumeUpload: endpoint(
    'upload',
    'consume-upload',
    z.object({
      accountId: z.string(),
      uploadId: z.string(),
      pipeline: z.enum(PIPELINES),
      maxUploadBytes: z.number().int().positive(),
    }),
    consumedUpload,
  ),
};

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
    publicJob,
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
   * `failed`: attempts are used up (e.g. the previous attempt's worker died); the job was
   * failed and refunded; ack.
   */
  beginAttempt: endpoint(
    'job',
    'begin-attempt',
    z.object({ jobId: z.string(), attempt: z.number().int().positive(), worker: z.string() }),
    z.object({ action: z.enum(['run', 'skip', 'failed']), work: jobWorkMessage.optional() }),
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

export const webhookEndpoints = {
  listDeliveries: endpoint(
    'webhook',
    'list-deliveries',
    z.object({ jobId: z.string() }),
    z.object({
      deliveries: z.array(
        z.object({
          deliveryId: z.string(),
          jobId: z.string(),
          event: z.enum(['job.completed', 'job.failed']),
          attempt: z.number().int(),
          attemptedAt: z.iso.datetime(),
          target: z.string(),
          statusCode: z.number().int().nullable(),
          latencyMs: z.number().nullable(),
          outcome: z.enum(['delivered', 'failed', 'refused']),
          error: z.string().nullable(),
        }),
      ),
    }),
  ),
  /** Starts a fresh delivery sequence for a job's event (operator action). */
  redeliver: endpoint(
    'webhook',
    'redeliver',
    z.object({ jobId: z.string(), event: z.enum(['job.completed', 'job.failed']).optional() }),
    z.object({ scheduled: z.boolean() }),
  ),
};
