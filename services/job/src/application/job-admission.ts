import type { Logger, Rpc } from '@tamp/kit';
import {
  billingEndpoints,
  type ConsumedUpload,
  type CreateJobRequest,
  type CreationRoute,
  creationNotCreated,
  creationOutcomeUnknown,
  creditCost,
  imageInputFitsInline,
  LIMITS,
  mintedAt,
  type PublicJob,
  ServiceError,
  uploadEndpoints,
  withCompressionRatio,
} from '@tamp/proto';
import type { AdmissionRepository } from '../adapters/admission-repository';
import type { IdempotencyRepository } from '../adapters/idempotency-repository';
import type { JobRepository } from '../adapters/job-repository';
import type { JobMessaging } from '../adapters/messaging';
import { jobWorkOf } from '../domain/events';
import {
  inputBytesOf,
  type JobDocument,
  MAX_CREATION_AGE_MS,
  resultExpiryHourOf,
} from '../domain/job';
import { newJob } from '../domain/new-job';
import { publicJobOf } from '../domain/representation';
import type { JobReads } from './job-reads';
import type { JobSettings } from './job-settings';
import type { Settlement } from './settlement';

export interface CreateJobAnswer {
  httpStatus: 200 | 202;
  job: PublicJob;
}

/** Time kept back from the budget after an inline run, to store and queue the job. */
const STORE_RESERVE_MS = 2_000;
/** An inline run with less time than this left is skipped: the job is queued at once. */
const MIN_INLINE_MS = 1_000;
/** Releasing an abandoned creation's reservation may take this long before it is left to the reconciler. */
const RELEASE_TIMEOUT_MS = 3_000;
/** ... and at least this long, even when the caller's deadline has passed. */
const MIN_RELEASE_MS = 250;
/** Time kept back from the budget to settle a failed creation and answer (answerFailedCreation). */
const SETTLE_RESERVE_MS = 1_000;

export interface AdmissionCollaborators {
  jobs: JobRepository;
  admissions: AdmissionRepository;
  claims: IdempotencyRepository;
  messaging: JobMessaging;
  reads: JobReads;
  settlement: Settlement;
  rpc: Rpc;
  settings: Pick<JobSettings, 'inlineReplyTimeoutMs'>;
  clock: () => Date;
  logger: Logger;
}

/**
 * One creation once its Idempotency-Key (if any) is settled: consume the upload, open the
 * admission and reserve credits, then run inline (HTTP 200) or store and queue (HTTP 202),
 * within the request's deadline.
 *
 * Money is exact under any timing: before credits are reserved an admission record names the
 * job id they are reserved under; the job is stored before the deadline or not at all; a
 * creation that cannot finish releases its reservation (billing's refund also blocks a reserve
 * request still on its way), and the reconciler releases what an abandoned or crashed creation
 * left behind. A 503 therefore never leaves a charge.
 */
export class JobAdmission {
  constructor(private readonly collaborators: AdmissionCollaborators) {}

  async consumeUpload(request: CreateJobRequest, deadline: number): Promise<ConsumedUpload> {
    if (request.source.kind !== 'upload') throw new Error('only upload sources are consumed');
    return this.collaborators.rpc.call(
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
  async admit(
    request: CreateJobRequest,
    route: CreationRoute,
    deadline: number,
    known: { upload?: ConsumedUpload | undefined; claimId?: string } = {},
  ): Promise<CreateJobAnswer> {
    // A creation ends within MAX_CREATION_AGE_MS of its id's minting, so a read can tell an id
    // that will never hold a job (JobReads).
    const minted = mintedAt(request.jobId);
    if (Date.now() - minted > MAX_CREATION_AGE_MS) {
      throw creationNotCreated(
        unavailable('The request is too old to create its job'),
        request.jobId,
      );
    }
    deadline = Math.min(deadline, minted + MAX_CREATION_AGE_MS);
    const upload =
      request.source.kind === 'upload'
        ? (known.upload ?? (await this.consumeUpload(request, deadline)))
        : undefined;
    const job = newJob(request, upload, this.collaborators.clock());
    const inline =
      route === 'inline' ||
      (route === 'by-input-size' && imageInputFitsInline(inputBytesOf(job.input)));
    const claimId = known.claimId ?? null;
    // The creation's own steps end early enough for a failure to be settled and answered
    // before the caller stops waiting.
    const workDeadline = deadline - SETTLE_RESERVE_MS;
    try {
      await this.reserve(job, claimId, workDeadline);
      if (inline) {
        const answer = await this.runInline(job, workDeadline);
        if (answer !== null) return answer;
      }
      return await this.enqueue(job, workDeadline);
    } catch (error) {
      if (error instanceof ServiceError && error.code === 'INSUFFICIENT_CREDITS') throw error;
      return this.answerFailedCreation(job, claimId, error, deadline);
    }
  }

  /**
   * A creation that cannot finish settles its job id before it answers, so the answer is true
   * whatever failed between which two writes (docs/decisions.md#when-a-creation-fails):
   * - abandoned (the id taken, the reservation released): the error, with `outcome:
   *   "not-created"`: nothing exists, and nothing ever will under that id;
   * - stored after all (a write reported failed that landed): that job is the answer;
   * - not settled (the database unreachable): UNAVAILABLE naming the job id with `outcome:
   *   "unknown"`; the reconciler settles it, and GET /v1/jobs/<id> then tells which.
   */
  private async answerFailedCreation(
    job: JobDocument,
    claimId: string | null,
    error: unknown,
    deadline: number,
  ): Promise<CreateJobAnswer> {
    const settled = await this.abandon(job, claimId, deadline);
    if (settled === 'unknown') throw creationOutcomeUnknown(job._id);
    if (settled !== 'abandoned') {
      return {
        httpStatus: settled.inline ? 200 : 202,
        job: await this.collaborators.reads.represent(settled),
      };
    }
    if (!(error instanceof ServiceError)) throw error;
    throw creationNotCreated(error, job._id);
  }

  /**
   * Opens the job's admission, then reserves its credits. INSUFFICIENT_CREDITS propagates with
   * nothing reserved or stored; any other failure (billing slow or down, the deadline reached)
   * is UNAVAILABLE, and the creation is then abandoned (what may have been reserved released).
   */
  private async reserve(job: JobDocument, claimId: string | null, deadline: number): Promise<void> {
    const { admissions, rpc, clock } = this.collaborators;
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
      throw unavailable('Credits could not be reserved in time');
    }
  }

  /**
   * `null` when the job goes to the queue instead: no inline worker answered, or its failure is
   * retryable. Such a fallback is the queued path from the start (202, `created`, every queued
   * attempt still ahead), as the inline attempt never became one of the job's attempts.
   */
  private async runInline(job: JobDocument, deadline: number): Promise<CreateJobAnswer | null> {
    const { messaging, settings, clock, logger } = this.collaborators;
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
              metrics: withCompressionRatio(reply.metrics),
              expired: false,
            },
            usage: reply.usage,
            inline: true,
            attempts: 1,
            completedAt: now,
            resultExpiryHour: resultExpiryHourOf(now),
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
    if (stored !== finished)
      return { httpStatus: 200, job: await this.collaborators.reads.represent(stored) };
    if (await this.collaborators.settlement.settleInline(finished)) this.closeAdmission(job._id);
    return { httpStatus: 200, job: await this.collaborators.reads.represent(finished) };
  }

  /**
   * Stores the job as `created`, then publishes it with msgID = jobId. A publish that fails is
   * not an error for the client: the job is stored, and its admission stays open until the
   * reconciler has published it (JOBS deduplicates a repeat).
   */
  private async enqueue(job: JobDocument, deadline: number): Promise<CreateJobAnswer> {
    const { messaging, logger } = this.collaborators;
    const stored = await this.store(job, deadline);
    // Another taker of an orphaned claim created it first, and closes the admission.
    if (stored !== job)
      return { httpStatus: 202, job: await this.collaborators.reads.represent(stored) };
    try {
      await messaging.publishWork(jobWorkOf(job));
      this.closeAdmission(job._id);
    } catch (error) {
      logger.warn({ err: error, jobId: job._id }, 'work not published; the reconciler retries');
    }
    return { httpStatus: 202, job: publicJobOf(job) };
  }

  /**
   * Stores the job, once and only before the deadline (the reconciler releases admissions
   * only well after theirs). Returns the stored job: `job` itself, or the one a concurrent
   * taker stored first. The admission stays open: it answers for what follows the store.
   */
  private async store(job: JobDocument, deadline: number): Promise<JobDocument> {
    const { jobs } = this.collaborators;
    if (Date.now() >= deadline) throw unavailable('The request ran out of time');
    const stored = (await jobs.insert(job)) ? job : await jobs.find(job._id);
    // Taken by an abandoned creation: this one ran past the point where it was given up.
    if (stored === null) throw unavailable('The request ran out of time');
    return stored;
  }

  /**
   * The creation is complete: its job stored and its side effects confirmed (the work
   * published, or an inline job's event), so nothing is left for its admission to answer for
   * (UnfinishedCreations). Written behind the answer.
   */
  private closeAdmission(jobId: string): void {
    this.collaborators.admissions.closeStored(jobId).catch((error: unknown) => {
      this.collaborators.logger.warn(
        { err: error, jobId },
        'admission left open; the reconciler closes it',
      );
    });
  }

  /**
   * Settles a creation that will not finish. Its id is taken first (JobRepository's
   * abandonCreation), so no job write still on its way can land after this; then the
   * reservation is given back (billing's refund also turns away a reservation still on its way),
   * the admission closed and the key freed. If billing cannot be reached the admission stays
   * open and the reconciler finishes the release; the outcome is settled all the same.
   * `unknown` when not even the id could be taken: the reconciler settles it later.
   */
  private async abandon(
    job: JobDocument,
    claimId: string | null,
    deadline: number,
  ): Promise<'abandoned' | 'unknown' | JobDocument> {
    const { jobs, admissions, claims, rpc, clock, logger } = this.collaborators;
    let settled: Awaited<ReturnType<JobRepository['abandonCreation']>>;
    try {
      settled = await jobs.abandonCreation(job._id, job.accountId, clock());
    } catch (error) {
      logger.warn(
        { err: error, jobId: job._id },
        'creation not settled; the reconciler settles it',
      );
      return 'unknown';
    }
    if (settled.outcome === 'stored') return settled.job;
    try {
      await rpc.call(
        billingEndpoints.refundCredits,
        { accountId: job.accountId, jobId: job._id },
        // Within the caller's deadline if it can be: the answer waits for this release.
        {
          timeoutMs: Math.max(MIN_RELEASE_MS, Math.min(RELEASE_TIMEOUT_MS, deadline - Date.now())),
        },
      );
      await admissions.close(job._id);
      if (claimId !== null) await claims.release(claimId, job._id);
    } catch (error) {
      logger.warn({ err: error, jobId: job._id }, 'reservation release left to the reconciler');
    }
    return 'abandoned';
  }
}

function unavailable(reason: string): ServiceError {
  return new ServiceError(
    'UNAVAILABLE',
    `${reason}; nothing was created or charged, retry shortly`,
  );
}
