import { setTimeout as sleep } from 'node:timers/promises';
import {
  billingEndpoints,
  type ConsumedUpload,
  creditCost,
  type JobInput,
  LIMITS,
  type PublicJob,
  ServiceError,
  uploadEndpoints,
} from '@tamp/proto';
import { claimIdOf } from './adapters/idempotency-repository';
import type { JobContext } from './context';
import { jobWorkOf } from './domain/events';
import { imageInputFitsInline, type Route, routeOf } from './domain/inline';
import { inputBytesOf, type JobDocument } from './domain/job';
import { normalizeMetrics } from './domain/metrics';
import { publicJobOf } from './domain/representation';
import type { CreateJobRequest } from './domain/requests';
import type { JobReads } from './reads';
import type { Settlement } from './settlement';

export interface CreateJobAnswer {
  httpStatus: 200 | 202;
  job: PublicJob;
}

/** How often a twin re-reads a claim whose job is not there yet. */
const CLAIM_POLL_MS = 50;
/** Time kept back from the budget after an inline run, to store and queue the job. */
const STORE_RESERVE_MS = 2_000;
/** An inline run with less time than this left is skipped: the job is queued at once. */
const MIN_INLINE_MS = 1_000;
/** Releasing an abandoned creation's reservation may take this long before it is left to the reconciler. */
const RELEASE_TIMEOUT_MS = 3_000;

/**
 * `createJob`: idempotency, upload consumption, credit reservation, then the inline path
 * (HTTP 200) or the queue (HTTP 202), within the request's deadline.
 *
 * Money is exact under any timing: before credits are reserved an admission record names the
 * job id they are reserved under; the job is stored before the deadline or not at all; a
 * creation that cannot finish releases its reservation (billing's refund also blocks a reserve
 * request still on its way), and the reconciler releases what an abandoned or crashed creation
 * left behind. A 503 therefore never leaves a charge, and an Idempotency-Key whose creation is
 * still in doubt answers 409 IDEMPOTENCY_KEY_IN_USE until it is settled, never a second charge.
 *
 * Idempotency applies to queued jobs only (the spec: "inline jobs are not deduplicated").
 * Whether a job is inline is decided from the request, so the key of an inline-eligible request
 * is ignored, even if that job later falls back to the queue (no inline worker answered, or the
 * inline attempt failed in a way a retry may fix).
 * For images the upload's size decides; there the existing claim is looked up before the
 * upload is consumed, so a replay answers with its job even once the upload has expired.
 */
export class JobCreation {
  /** Creations holding a claim in this process, so twins here wait without polling. */
  private readonly inFlight = new Map<string, Promise<CreateJobAnswer>>();

  constructor(
    private readonly context: JobContext,
    private readonly reads: JobReads,
    private readonly settlement: Settlement,
  ) {}

  async create(request: CreateJobRequest, deadline: number): Promise<CreateJobAnswer> {
    const route = routeOf(request);
    const key = request.idempotencyKey;
    if (key === null || route === 'inline') return this.execute(request, route, deadline);
    const claimId = claimIdOf(request.accountId, key);
    if (route === 'by-input-size') {
      if ((await this.context.claims.find(claimId)) !== null) {
        return this.replay(claimId, request, undefined, deadline);
      }
      const upload = await this.consume(request, deadline);
      if (imageInputFitsInline(upload.size)) {
        return this.execute(request, 'inline', deadline, { upload });
      }
      return this.createClaimed(claimId, request, upload, deadline);
    }
    return this.createClaimed(claimId, request, undefined, deadline);
  }

  /** Claims the key before any side effect; a taken key is a replay or a concurrent twin. */
  private async createClaimed(
    claimId: string,
    request: CreateJobRequest,
    upload: ConsumedUpload | undefined,
    deadline: number,
    reclaimsLeft = 3,
  ): Promise<CreateJobAnswer> {
    const claimed = await this.context.claims.claim({
      _id: claimId,
      jobId: request.jobId,
      requestHash: request.requestHash,
      createdAt: this.context.clock(),
    });
    if (!claimed) return this.replay(claimId, request, upload, deadline, reclaimsLeft);
    return this.runClaimed(claimId, request, upload, deadline);
  }

  private async runClaimed(
    claimId: string,
    request: CreateJobRequest,
    upload: ConsumedUpload | undefined,
    deadline: number,
  ): Promise<CreateJobAnswer> {
    const running = this.executeClaimed(claimId, request, upload, deadline);
    this.inFlight.set(claimId, running);
    try {
      return await running;
    } finally {
      if (this.inFlight.get(claimId) === running) this.inFlight.delete(claimId);
    }
  }

  private async executeClaimed(
    claimId: string,
    request: CreateJobRequest,
    upload: ConsumedUpload | undefined,
    deadline: number,
  ): Promise<CreateJobAnswer> {
    try {
      return await this.execute(request, 'queued', deadline, { upload, claimId });
    } catch (error) {
      // Nothing came of it (INSUFFICIENT_CREDITS, an upload error, a released reservation):
      // free the key so the client can retry with it. A creation still in doubt (its admission
      // open) keeps the key until the reconciler settles it.
      const { jobs, admissions, claims } = this.context;
      if (
        (await jobs.find(request.jobId)) === null &&
        (await admissions.find(request.jobId)) === null
      ) {
        await claims.release(claimId, request.jobId);
      }
      throw error;
    }
  }

  /**
   * The key is claimed already. Same request hash: answer with the claimed job once it exists
   * (202, its current representation). A claim left without a job and without an open
   * admission past `idempotencyStaleMs` means its claimant died before reserving anything; this
   * request then finishes the creation under the claimed job id, which billing and JOBS both
   * deduplicate on, so two takers still make one job. Anything else still in progress elsewhere
   * answers IDEMPOTENCY_KEY_IN_USE: retry later, never a second job.
   */
  private async replay(
    claimId: string,
    request: CreateJobRequest,
    upload: ConsumedUpload | undefined,
    deadline: number,
    reclaimsLeft = 3,
  ): Promise<CreateJobAnswer> {
    const { admissions, claims, clock, jobs, settings } = this.context;
    const waitUntil = Math.min(deadline, Date.now() + settings.idempotencyWaitMs);
    for (;;) {
      const claim = await claims.find(claimId);
      if (claim === null) {
        // Released by a claimant whose creation failed: this request may claim it now.
        if (reclaimsLeft <= 0) throw inUse();
        return this.createClaimed(claimId, request, upload, deadline, reclaimsLeft - 1);
      }
      if (claim.requestHash !== request.requestHash) {
        throw new ServiceError(
          'IDEMPOTENCY_KEY_REUSED',
          'This Idempotency-Key was used with a different endpoint or body',
        );
      }
      const job = await jobs.findOfAccount(request.accountId, claim.jobId);
      if (job !== null) return { httpStatus: 202, job: await this.reads.represent(job) };
      const running = this.inFlight.get(claimId);
      if (running !== undefined) {
        // A twin in this process holds the claim: share its outcome, error included.
        const failure = await running.then(
          () => undefined,
          (error: unknown) => error,
        );
        if (failure !== undefined) throw failure;
        continue;
      }
      const stale = clock().getTime() - claim.createdAt.getTime() >= settings.idempotencyStaleMs;
      if (stale && (await admissions.find(claim.jobId)) === null) {
        return this.runClaimed(claimId, { ...request, jobId: claim.jobId }, upload, deadline);
      }
      if (Date.now() >= waitUntil) throw inUse();
      await sleep(CLAIM_POLL_MS);
    }
  }

  private async consume(request: CreateJobRequest, deadline: number): Promise<ConsumedUpload> {
    if (request.source.kind !== 'upload') throw new Error('only upload sources are consumed');
    return this.context.rpc.call(
      uploadEndpoints.consumeUpload,
      {
        accountId: request.accountId,
        uploadId: request.source.uploadId,
        pipeline: request.pipeline,
        maxUploadBytes: request.maxUploadBytes,
      },
      { deadline },
    );
  }

  /** Consumes the upload if any, reserves credits, then runs inline or queues. */
  private async execute(
    request: CreateJobRequest,
    route: Route,
    deadline: number,
    known: { upload?: ConsumedUpload | undefined; claimId?: string } = {},
  ): Promise<CreateJobAnswer> {
    const upload =
      request.source.kind === 'upload'
        ? (known.upload ?? (await this.consume(request, deadline)))
        : undefined;
    const job = this.newJob(request, upload);
    const inline =
      route === 'inline' ||
      (route === 'by-input-size' && imageInputFitsInline(inputBytesOf(job.input)));
    const claimId = known.claimId ?? null;
    await this.reserve(job, claimId, deadline);
    try {
      if (inline) {
        const answer = await this.runInline(job, deadline);
        if (answer !== null) return answer;
      }
      return await this.enqueue(job, deadline);
    } catch (error) {
      await this.abandon(job, claimId);
      throw error;
    }
  }

  private newJob(request: CreateJobRequest, upload: ConsumedUpload | undefined): JobDocument {
    const now = this.context.clock();
    return {
      _id: request.jobId,
      accountId: request.accountId,
      pipeline: request.pipeline,
      status: 'created',
      operations: request.operations,
      input: inputOf(request, upload),
      filename: request.pipeline === 'text' ? null : (upload?.filename ?? null),
      webhookUrl: request.webhookUrl,
      inline: false,
      attempts: 0,
      lastError: null,
      createdAt: now,
      updatedAt: now,
      completedAt: null,
      retryAt: null,
      result: null,
      error: null,
      usage: null,
      workPublished: false,
      eventPublished: false,
      refundPending: false,
    };
  }

  /**
   * Opens the job's admission, then reserves its credits. INSUFFICIENT_CREDITS propagates with
   * nothing reserved or stored; any other failure (billing slow or down, the deadline reached)
   * releases what may have been reserved and answers UNAVAILABLE.
   */
  private async reserve(job: JobDocument, claimId: string | null, deadline: number): Promise<void> {
    const { admissions, rpc, clock } = this.context;
    await admissions.open({
      _id: job._id,
      accountId: job.accountId,
      claimId,
      createdAt: clock(),
      deadline: new Date(deadline),
    });
    try {
      await rpc.call(
        billingEndpoints.reserveCredits,
        {
          accountId: job.accountId,
          jobId: job._id,
          pipeline: job.pipeline,
          credits: creditCost(job.pipeline, inputBytesOf(job.input)),
        },
        { deadline, timeoutMs: LIMITS.createJobBudgetMs },
      );
    } catch (error) {
      if (error instanceof ServiceError && error.code === 'INSUFFICIENT_CREDITS') {
        await admissions.close(job._id);
        throw error;
      }
      await this.abandon(job, claimId);
      throw unavailable('Credits could not be reserved in time');
    }
  }

  /**
   * `null` when the job goes to the queue instead: no inline worker answered, or its failure is
   * retryable. Such a fallback is the queued path from the start (202, `created`, every queued
   * attempt still ahead), as the inline attempt never became one of the job's attempts.
   */
  private async runInline(job: JobDocument, deadline: number): Promise<CreateJobAnswer | null> {
    const { messaging, settings, clock, logger } = this.context;
    const work = jobWorkOf(job);
    if (work.pipeline === 'audio') return null;
    const timeoutMs = Math.min(
      settings.inlineReplyTimeoutMs,
      deadline - Date.now() - STORE_RESERVE_MS,
    );
    if (timeoutMs < MIN_INLINE_MS) return null;
    const reply = await messaging.requestInline(work, timeoutMs);
    if (reply === null) return null;
    if (reply.status === 'failed' && reply.retryable) {
      logger.info(
        { jobId: job._id, pipeline: job.pipeline, error: reply.error },
        'inline attempt failed but may succeed on retry; queueing the job',
      );
      return null;
    }
    const now = clock();
    const finished: JobDocument =
      reply.status === 'completed'
        ? {
            ...job,
            status: 'completed',
            result: {
              outputKey: reply.outputKey,
              outputText: reply.outputText,
              metrics: normalizeMetrics(reply.metrics),
              expired: false,
            },
            usage: reply.usage,
            inline: true,
            attempts: 1,
            completedAt: now,
            updatedAt: now,
          }
        : {
            ...job,
            status: 'failed',
            error: reply.error,
            lastError: reply.error,
            inline: true,
            attempts: 1,
            completedAt: now,
            updatedAt: now,
            refundPending: true,
          };
    // Inline jobs never enter the queue: stored straight in their terminal state.
    const stored = await this.store(finished, deadline);
    if (stored !== finished) return { httpStatus: 200, job: await this.reads.represent(stored) };
    await this.settlement.settle(finished);
    return { httpStatus: 200, job: await this.reads.represent(finished) };
  }

  /**
   * Stores the job as `created`, then publishes it with msgID = jobId. A publish that fails is
   * not an error for the client: the job is stored, and the reconciler republishes `created`
   * jobs whose publish was never confirmed (JOBS deduplicates a repeat).
   */
  private async enqueue(job: JobDocument, deadline: number): Promise<CreateJobAnswer> {
    const { jobs, messaging, logger } = this.context;
    const stored = await this.store(job, deadline);
    // Another taker of an orphaned claim created it first.
    if (stored !== job) return { httpStatus: 202, job: await this.reads.represent(stored) };
    try {
      await messaging.publishWork(jobWorkOf(job));
      await jobs.markDone(job._id, { workPublished: true });
    } catch (error) {
      logger.warn({ err: error, jobId: job._id }, 'work not published; the reconciler retries');
    }
    return { httpStatus: 202, job: publicJobOf(job) };
  }

  /**
   * Stores the job, once and only before the deadline (the reconciler releases admissions
   * only well after theirs), then closes its admission. Returns the stored job: `job` itself,
   * or the one a concurrent taker stored first.
   */
  private async store(job: JobDocument, deadline: number): Promise<JobDocument> {
    const { jobs, admissions, logger } = this.context;
    if (Date.now() >= deadline) throw unavailable('The request ran out of time');
    const stored = (await jobs.insert(job)) ? job : await jobs.find(job._id);
    if (stored === null) throw new Error(`job ${job._id} vanished`);
    await admissions.close(job._id).catch((error: unknown) => {
      logger.warn({ err: error, jobId: job._id }, 'admission left open; the reconciler closes it');
    });
    return stored;
  }

  /**
   * A creation that will not store its job gives its reservation back (billing's refund also
   * turns away a reservation still on its way), closes the admission and frees the key. If
   * billing cannot be reached, the admission stays open and the reconciler finishes this.
   */
  private async abandon(job: JobDocument, claimId: string | null): Promise<void> {
    const { jobs, admissions, claims, rpc, logger } = this.context;
    try {
      if ((await jobs.find(job._id)) !== null) return;
      await rpc.call(
        billingEndpoints.refundCredits,
        { accountId: job.accountId, jobId: job._id },
        { timeoutMs: RELEASE_TIMEOUT_MS },
      );
      await admissions.close(job._id);
      if (claimId !== null) await claims.release(claimId, job._id);
    } catch (error) {
      logger.warn({ err: error, jobId: job._id }, 'abandoned creation left to the reconciler');
    }
  }
}

function inputOf(request: CreateJobRequest, upload: ConsumedUpload | undefined): JobInput {
  const source = request.source;
  switch (source.kind) {
    case 'upload':
      if (upload === undefined) throw new Error('upload source without a consumed upload');
      return {
        kind: 'upload',
        uploadId: upload.uploadId,
        key: upload.key,
        size: upload.size,
        contentType: upload.contentType,
        filename: upload.filename,
      };
    case 'text':
      return { kind: 'text', text: source.text };
    case 'stored-text':
      return { kind: 'stored-text', key: source.key, size: source.size };
  }
}

function inUse(): ServiceError {
  return new ServiceError(
    'IDEMPOTENCY_KEY_IN_USE',
    'A request with this Idempotency-Key is still being processed; retry shortly with the same key',
  );
}

function unavailable(reason: string): ServiceError {
  return new ServiceError(
    'UNAVAILABLE',
    `${reason}; nothing was created or charged, retry shortly`,
  );
}
