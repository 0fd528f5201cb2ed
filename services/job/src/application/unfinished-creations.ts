import type { Logger, Rpc } from '@tamp/kit';
import { billingEndpoints } from '@tamp/proto';
import type { AdmissionDocument, AdmissionRepository } from '../adapters/admission-repository';
import type { IdempotencyRepository } from '../adapters/idempotency-repository';
import type { JobRepository } from '../adapters/job-repository';
import type { JobMessaging } from '../adapters/messaging';
import { jobWorkOf } from '../domain/events';
import type { JobDocument } from '../domain/job';
import type { Settlement } from './settlement';

export interface UnfinishedCreationsCollaborators {
  jobs: JobRepository;
  admissions: AdmissionRepository;
  claims: IdempotencyRepository;
  messaging: JobMessaging;
  settlement: Settlement;
  rpc: Rpc;
  clock: () => Date;
  logger: Logger;
}

/** What settling an admission found: a job given up, a job stored, or neither yet. */
export type CreationOutcome = 'abandoned' | 'stored' | 'undecided';

/**
 * Settles a creation whose admission outlived it (its process died, billing or NATS could not
 * be reached). An admission stays open until its creation's side effects are confirmed, so
 * it answers for two things:
 * - a job stored but whose creation did not confirm what follows the store: the work message of
 *   a queued job (JOBS deduplicates on the job id), the refund and event of an inline one
 *   (billing and EVENTS deduplicate): done again here, then the admission closed. Jobs thus
 *   need no outbox flag written after their insert for these;
 * - a creation that neither stored its job nor released its reservation: its job id is taken
 *   by an abandoned creation unless the job was stored, so no write of it still on its way can
 *   land after this; then the reservation is released (billing also turns away a reservation
 *   still on its way), the Idempotency-Key freed and the admission closed.
 * Every step is idempotent, so the reconciler and a retry of the same key may both get here.
 */
export class UnfinishedCreations {
  constructor(private readonly collaborators: UnfinishedCreationsCollaborators) {}

  /**
   * For an admission whose creation has certainly given up: past its deadline long enough that
   * it may be abandoned, or whose id an abandoned creation holds already.
   */
  async settle(admission: AdmissionDocument): Promise<'abandoned' | 'stored'> {
    const { admissions, claims, jobs, rpc, clock, logger } = this.collaborators;
    const settled = await jobs.abandonCreation(admission._id, admission.accountId, clock());
    if (settled.outcome === 'stored') return this.finishStored(settled.job);
    await rpc.call(billingEndpoints.refundCredits, {
      accountId: admission.accountId,
      jobId: admission._id,
    });
    if (admission.claimId !== null) await claims.release(admission.claimId, admission._id);
    logger.warn({ jobId: admission._id }, 'released the reservation of an abandoned creation');
    await admissions.close(admission._id);
    return 'abandoned';
  }

  /**
   * For an admission past its deadline (its creation stores its job before it or not at all):
   * a stored job's creation is finished here; a creation without a job only once
   * `abandonBefore` is past its deadline too, as `settle`.
   */
  async settleOverdue(admission: AdmissionDocument, abandonBefore: Date): Promise<CreationOutcome> {
    if (admission.deadline < abandonBefore) return this.settle(admission);
    const job = await this.collaborators.jobs.find(admission._id);
    return job === null ? 'undecided' : this.finishStored(job);
  }

  /** `settle`, with a failure logged and left to the next try: true when it settled. */
  async trySettle(admission: AdmissionDocument): Promise<boolean> {
    return (await this.loggingFailure(admission, () => this.settle(admission))) !== 'undecided';
  }

  /** `settleOverdue`, with a failure logged and left to the next pass ('undecided'). */
  trySettleOverdue(admission: AdmissionDocument, abandonBefore: Date): Promise<CreationOutcome> {
    return this.loggingFailure(admission, () => this.settleOverdue(admission, abandonBefore));
  }

  private async loggingFailure(
    admission: AdmissionDocument,
    settle: () => Promise<CreationOutcome>,
  ): Promise<CreationOutcome> {
    try {
      return await settle();
    } catch (error) {
      this.collaborators.logger.warn(
        { err: error, jobId: admission._id },
        'unfinished creation not settled yet',
      );
      return 'undecided';
    }
  }

  /** The side effects its creation may not have confirmed, then the admission closed. */
  private async finishStored(job: JobDocument): Promise<'stored'> {
    const { admissions, messaging, settlement } = this.collaborators;
    if (job.status === 'created') {
      await messaging.publishWork(jobWorkOf(job));
    } else if (job.inline) {
      // Stored straight in its terminal state (JobAdmission.runInline).
      if (!(await settlement.settleInline(job))) {
        throw new Error(`The side effects of inline job ${job._id} are not confirmed yet`);
      }
    }
    // A queued job a worker claimed got its work; its end has outbox flags of its own.
    await admissions.close(job._id);
    return 'stored';
  }
}
