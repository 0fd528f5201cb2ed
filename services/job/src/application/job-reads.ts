import type { EndpointRequest, ObjectStore } from '@tamp/kit';
import {
  isId,
  type JobStatus,
  type JobType,
  type jobEndpoints,
  LIMITS,
  mintedAt,
  type PublicJob,
  type PublicJobSummary,
  ServiceError,
} from '@tamp/proto';
import type { JobRepository } from '../adapters/job-repository';
import { type CursorScope, decodeCursor, encodeCursor } from '../domain/cursor';
import { type AbandonedCreation, isAbandonedCreation, type JobDocument } from '../domain/job';
import {
  outputToResolve,
  publicJobOf,
  publicJobSummaryOf,
  type ResolvedOutput,
} from '../domain/representation';

type ListRequest = EndpointRequest<(typeof jobEndpoints)['listJobs']>;

/**
 * How far from now an id's minting time may lie for a read of it to settle it. A creation
 * lasts at most its budget; a day leaves room for clock skew and stalls, and keeps what a
 * client can make this service write bounded to recent ids of its own account.
 */
const SETTLE_ON_READ_WINDOW_MS = 24 * 60 * 60 * 1000;

/** `getJob`, `listJobs`, and the representation every creation answer uses. */
export class JobReads {
  /**
   * `jobs` is the pooled read connection: public reads only, never a read that decides a write.
   * `cursorSecret` is the HMAC key of list cursors, the same on every replica.
   */
  constructor(
    private readonly jobs: JobRepository,
    private readonly store: ObjectStore,
    private readonly cursorSecret: string,
    /** The writing connection's jobs, to settle an unknown id a reader asks for. */
    private readonly creations: Pick<JobRepository, 'abandonCreation'>,
  ) {}

  async getJob(accountId: string, jobId: string): Promise<PublicJob> {
    // A malformed id or another account's job is just as unknown as a missing one.
    const job = isId('job', jobId)
      ? ((await this.jobs.findOfAccount(accountId, jobId)) ??
        (await this.settleUnknown(accountId, jobId)))
      : null;
    if (job === null) throw new ServiceError('JOB_NOT_FOUND', `No job ${jobId}`);
    if (isAbandonedCreation(job)) {
      // The answer a client polls for after a creation answered 503 with this id: final.
      throw new ServiceError(
        'JOB_NOT_FOUND',
        `No job ${jobId}: its creation was given up; nothing was created or charged`,
        { outcome: 'not-created' },
      );
    }
    return this.represent(job);
  }

  /**
   * An id of this account with no job may be one a failed creation answered with (a 503 names
   * its job id, outcome unknown). Asking for it settles it, so the answer is final: the id is
   * taken as not created unless its job turned out stored. Ids minted outside the window cannot
   * belong to a creation still in flight and are not written for.
   */
  private async settleUnknown(
    accountId: string,
    jobId: string,
  ): Promise<JobDocument | AbandonedCreation | null> {
    if (Math.abs(Date.now() - mintedAt(jobId)) > SETTLE_ON_READ_WINDOW_MS) return null;
    const settled = await this.creations.abandonCreation(jobId, accountId, new Date());
    const found = settled.outcome === 'abandoned' ? settled.entry : settled.job;
    // Whatever holds the id, another account's is as unknown as nothing.
    return found.accountId === accountId ? found : null;
  }

  /** The public job, with a freshly signed 1-hour URL or the output text when completed. */
  async represent(job: JobDocument): Promise<PublicJob> {
    return publicJobOf(job, await this.resolveOutput(job));
  }

  async listJobs(request: ListRequest): Promise<{
    items: PublicJobSummary[];
    nextCursor: string | null;
  }> {
    const scope: CursorScope = {
      accountId: request.accountId,
      type: request.type as JobType | undefined,
      status: request.status as JobStatus | undefined,
    };
    const secret = this.cursorSecret;
    const beforeId =
      request.cursor === undefined ? undefined : decodeCursor(secret, scope, request.cursor);
    const limit = Math.min(Math.max(request.limit, LIMITS.listLimit.min), LIMITS.listLimit.max);
    // `video` is a reserved type without a pipeline: it never has jobs.
    if (scope.type === 'video') return { items: [], nextCursor: null };
    const jobs = await this.jobs.list({ ...scope, beforeId, limit: limit + 1 });
    const page = jobs.slice(0, limit);
    const last = page.at(-1);
    return {
      items: page.map((job) => publicJobSummaryOf(job)),
      nextCursor:
        jobs.length > limit && last !== undefined ? encodeCursor(secret, scope, last._id) : null,
    };
  }

  private async resolveOutput(job: JobDocument): Promise<ResolvedOutput> {
    const output = outputToResolve(job);
    switch (output.kind) {
      case 'none':
        return {};
      case 'text':
        return { outputText: output.text };
      case 'stored-text':
        return { outputText: (await this.store.getBuffer(output.key)).toString('utf8') };
      case 'download':
        return {
          outputUrl: await this.store.presignDownload(
            output.key,
            output.filename,
            LIMITS.outputUrlTtlSeconds,
          ),
        };
    }
  }
}
