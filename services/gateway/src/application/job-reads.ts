import type { ObjectStore, Rpc } from '@tamp/kit';
import { type JobRead, jobEndpoints, type PublicJob, TERMINAL_STATUSES } from '@tamp/proto';
import type { JobWaiters } from '../adapters/job-waiters';

/** GET /v1/jobs/:id: a job read, or a long-poll until it finishes or the wait runs out. */
export class JobReads {
  constructor(
    private readonly rpc: Rpc,
    private readonly waiters: JobWaiters,
    private readonly store: Pick<ObjectStore, 'getBuffer'>,
  ) {}

  /**
   * The job now, or, with `waitMs`, once it is terminal or the wait is over (a closed
   * connection, `abandoned`, ends the wait early).
   */
  async read(
    accountId: string,
    jobId: string,
    waitMs: number,
    abandoned: AbortSignal,
  ): Promise<PublicJob> {
    const read = async () =>
      this.withStoredOutputText(await this.rpc.call(jobEndpoints.getJob, { accountId, jobId }));
    if (waitMs === 0) return read();
    // Register before the first read: a notification in between still wakes us.
    const waiter = this.waiters.register(jobId);
    const onAbandoned = () => waiter.cancel();
    abandoned.addEventListener('abort', onAbandoned, { once: true });
    try {
      const job = await read();
      if (TERMINAL_STATUSES.includes(job.status)) return job;
      await waiter.until(waitMs);
      return await read();
    } finally {
      waiter.cancel();
      abandoned.removeEventListener('abort', onAbandoned);
    }
  }

  /** The public job: a text output the job service named by its storage key is read here. */
  private async withStoredOutputText(job: JobRead): Promise<PublicJob> {
    const key = job.result?.outputTextKey;
    if (job.result === undefined || key === undefined) return job;
    const { outputTextKey: _, ...result } = job.result;
    const outputText = (await this.store.getBuffer(key)).toString('utf8');
    return { ...job, result: { ...result, outputText } };
  }
}
