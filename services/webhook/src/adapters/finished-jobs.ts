import type { Rpc } from '@tamp/kit';
import { type JobEvent, jobEndpoints } from '@tamp/proto';

/** Finished jobs, read from the job service on every use. */
export class FinishedJobs {
  constructor(private readonly rpc: Rpc) {}

  /**
   * The event the job published when it finished (inline jobs' too). Throws the job service's
   * JOB_NOT_FOUND for an unknown, unfinished or another account's job, UNAVAILABLE when it does
   * not answer (by `deadline` when the caller set one).
   */
  eventOf(accountId: string, jobId: string, deadline?: number): Promise<JobEvent> {
    return this.rpc.call(jobEndpoints.getJobEvent, { accountId, jobId }, { deadline });
  }
}
