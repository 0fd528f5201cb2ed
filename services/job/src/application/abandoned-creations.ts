import type { Logger, Rpc } from '@tamp/kit';
import { billingEndpoints } from '@tamp/proto';
import type { AdmissionDocument, AdmissionRepository } from '../adapters/admission-repository';
import type { IdempotencyRepository } from '../adapters/idempotency-repository';
import type { JobRepository } from '../adapters/job-repository';

export interface AbandonedCreationsCollaborators {
  jobs: JobRepository;
  admissions: AdmissionRepository;
  claims: IdempotencyRepository;
  rpc: Rpc;
  clock: () => Date;
  logger: Logger;
}

/**
 * Settles a creation that will never finish: one that neither stored its job nor released its
 * reservation (its process died, billing could not be reached when it gave up). Its job id is
 * taken by an abandoned creation unless the job was stored, so no write of it still on its way
 * can land after this; then the reservation is released (billing also turns away a reservation
 * still on its way), the Idempotency-Key freed and the admission closed. One whose job turns
 * out stored only lost its clean-up. Every step is idempotent, so the reconciler and a retry of
 * the same key may both get here.
 *
 * Only for admissions whose creation has certainly given up: past its deadline, or whose id an
 * abandoned creation holds already.
 */
export class AbandonedCreations {
  constructor(private readonly collaborators: AbandonedCreationsCollaborators) {}

  async settle(admission: AdmissionDocument): Promise<'abandoned' | 'stored'> {
    const { admissions, claims, jobs, rpc, clock, logger } = this.collaborators;
    const settled = await jobs.abandonCreation(admission._id, admission.accountId, clock());
    if (settled.outcome === 'abandoned') {
      await rpc.call(billingEndpoints.refundCredits, {
        accountId: admission.accountId,
        jobId: admission._id,
      });
      if (admission.claimId !== null) await claims.release(admission.claimId, admission._id);
      logger.warn({ jobId: admission._id }, 'released the reservation of an abandoned creation');
    }
    await admissions.close(admission._id);
    return settled.outcome;
  }

  /** `settle`, with a failure logged and left to the next try: true when it settled. */
  async trySettle(admission: AdmissionDocument): Promise<boolean> {
    try {
      await this.settle(admission);
      return true;
    } catch (error) {
      this.collaborators.logger.warn(
        { err: error, jobId: admission._id },
        'abandoned creation not released yet',
      );
      return false;
    }
  }
}
