import { setTimeout as sleep } from 'node:timers/promises';
import {
  billingEndpoints,
  type ConsumedUpload,
  creditCost,
  type JobInput,
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

/**
 * `createJob`: idempotency, upload consumption, credit reservation, then the inline path
 * (HTTP 200) or the queue (HTTP 202).
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

  async create(request: CreateJobRequest): Promise<CreateJobAnswer> {
    const route = routeOf(request);
    const key = request.idempotencyKey;
    if (key === null || route === 'inline') return this.execute(request, route);
    const claimId = claimIdOf(request.accountId, key);
    if (route === 'by-input-size') {
      if ((await this.context.claims.find(claimId)) !== null) {
        return this.replay(claimId, request, undefined);
      }
      const upload = await this.consume(request);
      if (imageInputFitsInline(upload.size)) return this.execute(request, 'inline', upload);
      return this.createClaimed(claimId, request, upload);
    }
    return this.createClaimed(claimId, request, undefined);
  }

  /** Claims the key before any side effect; a taken key is a replay or a concurrent twin. */
  private async createClaimed(
    claimId: string,
    request: CreateJobRequest,
    upload: ConsumedUpload | undefined,
    reclaimsLeft = 3,
  ): Promise<CreateJobAnswer> {
    const claimed = await this.context.claims.claim({
      _id: claimId,
      jobId: request.jobId,
      requestHash: request.requestHash,
      createdAt: this.context.clock(),
    });
    if (!claimed) return this.replay(claimId, request, upload, reclaimsLeft);
    return this.runClaimed(claimId, request, upload);
  }

  private async runClaimed(
    claimId: string,
    request: CreateJobRequest,
    upload: ConsumedUpload | undefined,
  ): Promise<CreateJobAnswer> {
    const running = this.executeClaimed(claimId, request, upload);
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
  ): Promise<CreateJobAnswer> {
    try {
      return await this.execute(request, 'queued', upload);
    } catch (error) {
      // No job came of it (e.g. INSUFFICIENT_CREDITS, an upload error): free the key so the
      // client can fix the cause and retry with the same key.
      if ((await this.context.jobs.find(request.jobId)) === null) {
        await this.context.claims.release(claimId, request.jobId);
      }
      throw error;
    }
  }

  /**
   * The key is claimed already. Same request hash: answer with the claimed job once it exists
   * (202, its current representation). A claim left without a job past `idempotencyStaleMs`
   * means its claimant died in between; this request then finishes the creation under the
   * claimed job id, which billing and JOBS both deduplicate on, so two takers still make one job.
   */
  private async replay(
    claimId: string,
    request: CreateJobRequest,
    upload: ConsumedUpload | undefined,
    reclaimsLeft = 3,
  ): Promise<CreateJobAnswer> {
    const { claims, clock, jobs, settings } = this.context;
    const deadline = Date.now() + settings.idempotencyWaitMs;
    for (;;) {
      const claim = await claims.find(claimId);
      if (claim === null) {
        // Released by a claimant whose creation failed: this request may claim it now.
        if (reclaimsLeft <= 0) throw busy();
        return this.createClaimed(claimId, request, upload, reclaimsLeft - 1);
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
      if (clock().getTime() - claim.createdAt.getTime() >= settings.idempotencyStaleMs) {
        return this.runClaimed(claimId, { ...request, jobId: claim.jobId }, upload);
      }
      if (Date.now() >= deadline) throw busy();
      await sleep(CLAIM_POLL_MS);
    }
  }

  private async consume(request: CreateJobRequest): Promise<ConsumedUpload> {
    if (request.source.kind !== 'upload') throw new Error('only upload sources are consumed');
    return this.context.rpc.call(uploadEndpoints.consumeUpload, {
      accountId: request.accountId,
      uploadId: request.source.uploadId,
      pipeline: request.pipeline,
      maxUploadBytes: request.maxUploadBytes,
    });
  }

  /** Consumes the upload if any, reserves credits, then runs inline or queues. */
  private async execute(
    request: CreateJobRequest,
    route: Route,
    consumed?: ConsumedUpload,
  ): Promise<CreateJobAnswer> {
    const { rpc, clock } = this.context;
    const upload =
      request.source.kind === 'upload' ? (consumed ?? (await this.consume(request))) : undefined;
    const input = inputOf(request, upload);
    const inputBytes = inputBytesOf(input);
    const inline =
      route === 'inline' || (route === 'by-input-size' && imageInputFitsInline(inputBytes));
    // INSUFFICIENT_CREDITS propagates from here, before anything is stored.
    await rpc.call(
      billingEndpoints.reserveCredits,
      {
        accountId: request.accountId,
        jobId: request.jobId,
        pipeline: request.pipeline,
        credits: creditCost(request.pipeline, inputBytes),
      },
      { timeoutMs: this.context.settings.reserveTimeoutMs },
    );
    const now = clock();
    const job: JobDocument = {
      _id: request.jobId,
      accountId: request.accountId,
      pipeline: request.pipeline,
      status: 'created',
      operations: request.operations,
      input,
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
    try {
      if (inline) {
        const answer = await this.runInline(job);
        if (answer !== null) return answer;
      }
      return await this.enqueue(job);
    } catch (error) {
      await this.refundOrphanedReservation(job);
      throw error;
    }
  }

  /**
   * `null` when the job goes to the queue instead: no inline worker answered, or its failure is
   * retryable. Such a fallback is the queued path from the start (202, `created`, every queued
   * attempt still ahead), as the inline attempt never became one of the job's attempts.
   */
  private async runInline(job: JobDocument): Promise<CreateJobAnswer | null> {
    const { jobs, messaging, settings, clock, logger } = this.context;
    const work = jobWorkOf(job);
    if (work.pipeline === 'audio') return null;
    const reply = await messaging.requestInline(work, settings.inlineReplyTimeoutMs);
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
    if (!(await jobs.insert(finished))) {
      const existing = await jobs.find(job._id);
      if (existing === null) throw new Error(`job ${job._id} vanished`);
      return { httpStatus: 200, job: await this.reads.represent(existing) };
    }
    await this.settlement.settle(finished);
    return { httpStatus: 200, job: await this.reads.represent(finished) };
  }

  /**
   * Stores the job as `created`, then publishes it with msgID = jobId. A publish that fails is
   * not an error for the client: the job is stored, and the reconciler republishes `created`
   * jobs whose publish was never confirmed (JOBS deduplicates a repeat).
   */
  private async enqueue(job: JobDocument): Promise<CreateJobAnswer> {
    const { jobs, messaging, logger } = this.context;
    if (!(await jobs.insert(job))) {
      // Another taker of an orphaned claim created it first.
      const existing = await jobs.find(job._id);
      if (existing === null) throw new Error(`job ${job._id} vanished`);
      return { httpStatus: 202, job: await this.reads.represent(existing) };
    }
    try {
      await messaging.publishWork(jobWorkOf(job));
      await jobs.markDone(job._id, { workPublished: true });
    } catch (error) {
      logger.warn({ err: error, jobId: job._id }, 'work not published; the reconciler retries');
    }
    return { httpStatus: 202, job: publicJobOf(job) };
  }

  /** Credits were reserved but the job could not be stored: give them back (best effort). */
  private async refundOrphanedReservation(job: JobDocument): Promise<void> {
    const { jobs, rpc, logger } = this.context;
    try {
      if ((await jobs.find(job._id)) !== null) return;
      await rpc.call(billingEndpoints.refundCredits, { accountId: job.accountId, jobId: job._id });
    } catch (error) {
      logger.error({ err: error, jobId: job._id }, 'reservation of an uncreated job not refunded');
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

function busy(): ServiceError {
  return new ServiceError(
    'UNAVAILABLE',
    'A request with this Idempotency-Key is still being processed; retry shortly',
  );
}
