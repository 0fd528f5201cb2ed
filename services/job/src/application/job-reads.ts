import type { EndpointRequest, ObjectStore } from '@tamp/kit';
import {
  isId,
  type JobEvent,
  type JobRead,
  type JobStatus,
  type JobType,
  type jobEndpoints,
  LIMITS,
  mintedAt,
  type PublicJobSummary,
  ServiceError,
} from '@tamp/proto';
import type { AdmissionRepository } from '../adapters/admission-repository';
import type { JobRepository } from '../adapters/job-repository';
import { type CursorScope, decodeCursor, encodeCursor } from '../domain/cursor';
import { jobEventOf } from '../domain/events';
import {
  type AbandonedCreation,
  isAbandonedCreation,
  isTerminal,
  type JobDocument,
  MAX_CREATION_AGE_MS,
} from '../domain/job';
import {
  outputToResolve,
  publicJobOf,
  publicJobSummaryOf,
  type ResolvedOutput,
} from '../domain/representation';
import type { FinishedJobs } from './finished-jobs';

type ListRequest = EndpointRequest<(typeof jobEndpoints)['listJobs']>;

/** `getJob`, `getJobEvent`, `listJobs`, and the representation every creation answer uses. */
export class JobReads {
  /**
   * `jobs` is the pooled read connection: public reads only, never a read that decides a write.
   * `cursorSecret` is the HMAC key of list cursors, the same on every replica.
   */
  constructor(
    private readonly jobs: JobRepository,
    private readonly store: ObjectStore,
    private readonly cursorSecret: string,
    /** Open creations, to tell an id still being created from one that never will be. */
    private readonly admissions: Pick<AdmissionRepository, 'find'>,
    /** Shared with retention, which forgets the jobs whose results it expires. */
    private readonly finished: FinishedJobs,
  ) {}

  async getJob(accountId: string, jobId: string): Promise<JobRead> {
    // A malformed id or another account's job is just as unknown as a missing one.
    if (!isId('job', jobId)) throw new ServiceError('JOB_NOT_FOUND', `No job ${jobId}`);
    const job = await this.findOfAccount(accountId, jobId);
    // The answer a client polls for after a creation answered 503 with this id: final.
    if (job === null ? await this.neverCreated(jobId) : isAbandonedCreation(job)) {
      throw new ServiceError(
        'JOB_NOT_FOUND',
        `No job ${jobId}: it was not created and never will be; nothing was charged`,
        { outcome: 'not-created' },
      );
    }
    if (job === null || isAbandonedCreation(job)) {
      throw new ServiceError('JOB_NOT_FOUND', `No job ${jobId}`);
    }
    return this.represent(job);
  }

  /**
   * The event the job published when it became terminal (inline jobs included: built the same
   * way, from the stored job), for the dashboard's test delivery; nothing is written. One read by
   * `_id`. Unknown, malformed, another account's, abandoned and unfinished jobs are all unknown.
   */
  async getJobEvent(accountId: string, jobId: string): Promise<JobEvent> {
    const job = isId('job', jobId) ? await this.jobs.findOfAccount(accountId, jobId) : null;
    if (job === null || isAbandonedCreation(job) || !isTerminal(job.status)) {
      throw new ServiceError('JOB_NOT_FOUND', `No finished job ${jobId}`);
    }
    return jobEventOf(job);
  }

  /** The account's job; a finished one from memory once read (FinishedJobs says why). */
  private async findOfAccount(
    accountId: string,
    jobId: string,
  ): Promise<JobDocument | AbandonedCreation | null> {
    const remembered = this.finished.find(accountId, jobId);
    if (remembered !== undefined) return remembered;
    const entry = await this.jobs.findOfAccount(accountId, jobId);
    if (entry !== null && !isAbandonedCreation(entry)) this.finished.remember(entry, Date.now());
    return entry;
  }

  /**
   * Whether nothing can ever be created under an id that holds nothing: no creation of it is
   * open (no admission), and it is too old for one to start (JobAdmission refuses creations of
   * ids minted longer ago than MAX_CREATION_AGE_MS, and a creation stores its job only before its
   * deadline). A read decides this without writing anything.
   */
  private async neverCreated(jobId: string): Promise<boolean> {
    if (Date.now() - mintedAt(jobId) <= MAX_CREATION_AGE_MS) return false;
    return (await this.admissions.find(jobId)) === null;
  }

  /** The public job, with a freshly signed 1-hour URL or the output text when completed. */
  async represent(job: JobDocument): Promise<JobRead> {
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
        return { outputTextKey: output.key };
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
