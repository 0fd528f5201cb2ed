import { LIMITS } from '@tamp/proto';
import { LRUCache } from 'lru-cache';
import { isTerminal, type JobDocument } from '../domain/job';

/** Finished jobs remembered per process at most. */
const REMEMBERED_JOBS = 10_000;
/**
 * What they may hold together, in (approximate) bytes: since every job this process finishes is
 * remembered, not only those read again, a run of text jobs (input and output text kept in the
 * job, an output up to 256 KB) must not fill the heap. 10,000 jobs of ~2 KB fit.
 */
const REMEMBERED_BYTES = 64 * 1024 * 1024;
/** A job's fields besides its texts, in bytes, roughly. */
const JOB_FIELDS_BYTES = 2_048;
/** How long one is remembered after the read that found it, or the settlement that stored it. */
const REMEMBERED_FOR_MS = 10 * 60 * 1000;

/**
 * Finished jobs recently read or finished by this process, so a job read again (the long-poll
 * woken by its end, a client fetching a fresh download URL, a dashboard refreshing, a poll after
 * the end) costs no database command. Every replica keeps its own and none is ever told of a
 * change, which is safe because a finished job's public fields do not change: the only later
 * write that a read shows is retention marking its result expired, so a job is remembered only
 * while that moment is more than an entry's lifetime away.
 * Writes the public never sees (the outbox's confirmation flags) may leave a copy behind.
 */
export class FinishedJobs {
  private readonly jobs = new LRUCache<string, JobDocument>({
    max: REMEMBERED_JOBS,
    maxSize: REMEMBERED_BYTES,
    sizeCalculation: approximateBytesOf,
    ttl: REMEMBERED_FOR_MS,
  });

  /** The account's finished job under this id, when remembered. */
  find(accountId: string, jobId: string): JobDocument | undefined {
    const job = this.jobs.get(jobId);
    return job?.accountId === accountId ? job : undefined;
  }

  /** Remembers `job` when it is finished and its result is not about to expire. */
  remember(job: JobDocument, now: number): void {
    if (!isTerminal(job.status)) return;
    if (job.completedAt !== null && !outlivesEntry(job.completedAt, now)) return;
    this.jobs.set(job._id, job);
  }

  /** After this process's own retention marked it expired: its next read sees that at once. */
  forget(jobId: string): void {
    this.jobs.delete(jobId);
  }
}

function outlivesEntry(completedAt: Date, now: number): boolean {
  return completedAt.getTime() + LIMITS.resultRetentionMs - REMEMBERED_FOR_MS > now;
}

/** Two bytes a character for the texts a job holds (the most V8 takes), plus its other fields. */
function approximateBytesOf(job: JobDocument): number {
  const inputText = job.input.kind === 'text' ? job.input.text.length : 0;
  const outputText = job.result?.outputText?.length ?? 0;
  return JOB_FIELDS_BYTES + 2 * (inputText + outputText);
}
