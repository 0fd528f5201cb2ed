import { KeyedRepository, WRITE_BEHIND_LINGER_MS, WriteBatcher } from '@tamp/kit';
import type { Db } from 'mongodb';
import { ADMISSIONS_COLLECTION } from './job-repository';

/**
 * A job creation from its first side effect until it is complete: written before credits are
 * reserved, removed once the job is stored and what follows its store is confirmed (a queued
 * job's work published, an inline job's event), or once its reservation is released. One that
 * outlives its creation's deadline names a reservation that may have no job, or a stored job
 * whose side effects may be missing; the reconciler finishes or releases it
 * (application/unfinished-creations.ts). So no reservation is ever without a job or one of
 * these, and no stored job is without its work or event or one of these.
 */
export interface AdmissionDocument {
  /** The job id the credits are reserved under. */
  _id: string;
  accountId: string;
  /** The Idempotency-Key claim to free when the creation is abandoned. */
  claimId: string | null;
  createdAt: Date;
  /** The creation stores its job before this or not at all. */
  deadline: Date;
}

export class AdmissionRepository extends KeyedRepository<AdmissionDocument> {
  private readonly closes = new WriteBatcher<string>(
    async (jobIds) => {
      await this.collection.deleteMany({ _id: { $in: [...new Set(jobIds)] } });
    },
    { lingerMs: WRITE_BEHIND_LINGER_MS },
  );

  constructor(db: Db) {
    super(db, ADMISSIONS_COLLECTION);
  }

  /** Idempotent: a taker of an orphaned claim reopens the admission of the same job id. */
  async open(admission: AdmissionDocument): Promise<void> {
    await this.insertIfAbsent(admission);
  }

  async close(jobId: string): Promise<void> {
    await this.collection.deleteOne({ _id: jobId });
  }

  /**
   * The close of a creation that is complete, write-behind like the job's outbox flags
   * (JobRepository.markDone): gathered for a moment and deleted together. One left open by a
   * crash is finished again by the reconciler, which finds its job stored: a repeat its
   * receivers deduplicate. Settles once written.
   */
  closeStored(jobId: string): Promise<void> {
    return this.closes.add(jobId);
  }

  /** Writes the closes still gathering (on stop). */
  flush(): Promise<void> {
    return this.closes.flush();
  }

  /** Admissions whose deadline is before `before`: their creation stored its job or never will. */
  async overdue(before: Date, limit: number): Promise<AdmissionDocument[]> {
    return this.collection
      .find({ deadline: { $lt: before } })
      .limit(limit)
      .toArray();
  }
}
