import { setTimeout as sleep } from 'node:timers/promises';
import {
  type ConsumedUpload,
  type CreateJobRequest,
  imageInputFitsInline,
  ServiceError,
} from '@tamp/proto';
import type { AdmissionDocument, AdmissionRepository } from '../adapters/admission-repository';
import { claimIdOf, type IdempotencyRepository } from '../adapters/idempotency-repository';
import type { JobRepository } from '../adapters/job-repository';
import { routeOf } from '../domain/creation-route';
import { isAbandonedCreation } from '../domain/job';
import type { CreateJobAnswer, JobAdmission } from './job-admission';
import type { JobReads } from './job-reads';
import type { JobSettings } from './job-settings';
import type { UnfinishedCreations } from './unfinished-creations';

/** A creation under an Idempotency-Key: its claim, and the upload when consumed already. */
interface KeyedCreation {
  claimId: string;
  request: CreateJobRequest;
  upload: ConsumedUpload | undefined;
  deadline: number;
}

/** How often a twin re-reads a claim whose job is not there yet. */
const CLAIM_POLL_MS = 50;
/**
 * A twin settles a claimant's creation itself once this long past its deadline: the creation
 * has given up by then (it stores its job before the deadline or not at all), and the margin
 * covers clocks of different pods that disagree a little.
 */
const SETTLE_AFTER_DEADLINE_MS = 2_000;

/**
 * `createJob`: routing and the Idempotency-Key, in front of the JobAdmission that consumes,
 * reserves and runs or queues. An Idempotency-Key whose creation is still in doubt answers 409
 * IDEMPOTENCY_KEY_IN_USE until it is settled, never a second charge.
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
    private readonly admission: JobAdmission,
    private readonly unfinished: UnfinishedCreations,
    private readonly jobs: JobRepository,
    private readonly admissions: AdmissionRepository,
    private readonly claims: IdempotencyRepository,
    private readonly reads: JobReads,
    private readonly settings: Pick<JobSettings, 'idempotencyWaitMs' | 'idempotencyStaleMs'>,
    private readonly clock: () => Date,
  ) {}

  async create(request: CreateJobRequest, deadline: number): Promise<CreateJobAnswer> {
    const route = routeOf(request);
    const key = request.idempotencyKey;
    if (key === null || route === 'inline') return this.admission.admit(request, route, deadline);
    const claimId = claimIdOf(request.accountId, key);
    if (route === 'by-input-size') {
      if ((await this.claims.find(claimId)) !== null) {
        return this.replay({ claimId, request, upload: undefined, deadline });
      }
      const upload = await this.admission.consumeUpload(request, deadline);
      if (imageInputFitsInline(upload.size)) {
        return this.admission.admit(request, 'inline', deadline, { upload });
      }
      return this.createClaimed({ claimId, request, upload, deadline });
    }
    return this.createClaimed({ claimId, request, upload: undefined, deadline });
  }

  /** Claims the key before any side effect; a taken key is a replay or a concurrent twin. */
  private async createClaimed(keyed: KeyedCreation, reclaimsLeft = 3): Promise<CreateJobAnswer> {
    const { claimId, request } = keyed;
    const claimed = await this.claims.claim({
      _id: claimId,
      jobId: request.jobId,
      requestHash: request.requestHash,
      createdAt: this.clock(),
    });
    if (!claimed) return this.replay(keyed, reclaimsLeft);
    return this.runClaimed(keyed);
  }

  private async runClaimed(keyed: KeyedCreation): Promise<CreateJobAnswer> {
    const running = this.executeClaimed(keyed);
    this.inFlight.set(keyed.claimId, running);
    try {
      return await running;
    } finally {
      if (this.inFlight.get(keyed.claimId) === running) this.inFlight.delete(keyed.claimId);
    }
  }

  private async executeClaimed(keyed: KeyedCreation): Promise<CreateJobAnswer> {
    const { claimId, request, upload, deadline } = keyed;
    try {
      return await this.admission.admit(request, 'queued', deadline, { upload, claimId });
    } catch (error) {
      // Nothing came of it (INSUFFICIENT_CREDITS, an upload error, a released reservation):
      // free the key so the client can retry with it. A creation still in doubt (its admission
      // open) keeps the key until the reconciler settles it.
      const { jobs, admissions, claims } = this;
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
   *
   * A creation that has certainly given up (its id taken by an abandoned creation, or its claim
   * stale and its deadline past) but left its reservation held, because its process died or billing could
   * not be reached, is settled here by the twin rather than left to the reconciler's next pass
   * a minute or more later: a client retrying its key after a 503 gets its job within seconds.
   */
  private async replay(keyed: KeyedCreation, reclaimsLeft = 3): Promise<CreateJobAnswer> {
    const { claimId, request, deadline } = keyed;
    const { admissions, claims, clock, jobs, settings } = this;
    const waitUntil = Math.min(deadline, Date.now() + settings.idempotencyWaitMs);
    for (;;) {
      const claim = await claims.find(claimId);
      if (claim === null) {
        // Released by a claimant whose creation failed: this request may claim it now.
        if (reclaimsLeft <= 0) throw inUse();
        return this.createClaimed(keyed, reclaimsLeft - 1);
      }
      if (claim.requestHash !== request.requestHash) {
        throw new ServiceError(
          'IDEMPOTENCY_KEY_REUSED',
          'This Idempotency-Key was used with a different endpoint or body',
        );
      }
      const job = await jobs.findOfAccount(request.accountId, claim.jobId);
      if (job !== null && isAbandonedCreation(job)) {
        // Given up: the key is free once the reservation is released (the admission closed);
        // until then the creation is still in doubt for money, and the key in use.
        const admission = await admissions.find(claim.jobId);
        if (admission === null) {
          await claims.release(claimId, claim.jobId);
          continue;
        }
        // Its id is taken, so the creation is over: only its release is left.
        if (await this.unfinished.trySettle(admission)) continue;
        if (Date.now() >= waitUntil) throw inUse();
        await sleep(CLAIM_POLL_MS);
        continue;
      }
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
      // A claim younger than the stale window belongs to a creation that may still be under way
      // (the window outlasts any creation's deadline), so its admission is not read.
      const stale = clock().getTime() - claim.createdAt.getTime() >= settings.idempotencyStaleMs;
      if (stale) {
        const admission = await admissions.find(claim.jobId);
        if (admission === null) {
          return this.runClaimed({ ...keyed, request: { ...request, jobId: claim.jobId } });
        }
        if (this.isPastDeadline(admission) && (await this.unfinished.trySettle(admission)))
          continue;
      }
      if (Date.now() >= waitUntil) throw inUse();
      await sleep(CLAIM_POLL_MS);
    }
  }
  /** Its creation has given up: it stores its job before its deadline or not at all. */
  private isPastDeadline(admission: AdmissionDocument): boolean {
    return this.clock().getTime() >= admission.deadline.getTime() + SETTLE_AFTER_DEADLINE_MS;
  }
}

function inUse(): ServiceError {
  return new ServiceError(
    'IDEMPOTENCY_KEY_IN_USE',
    'A request with this Idempotency-Key is still being processed; retry shortly with the same key',
  );
}
