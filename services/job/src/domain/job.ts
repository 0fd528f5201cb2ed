import type {
  JobInput,
  JobMetrics,
  JobStatus,
  Pipeline,
  PresetName,
  UsageDimensions,
} from '@tamp/proto';
import { LIMITS, TERMINAL_STATUSES } from '@tamp/proto';
import { expiryHourOf } from './expiry-hours';

/** What a finished job keeps of its output. `expired` turns true when retention removes it. */
export interface StoredResult {
  outputKey: string | null;
  outputText: string | null;
  metrics: JobMetrics;
  expired: boolean;
}

/**
 * A job as stored in `jobs`. Every change is one guarded single-document update (see
 * ARCHITECTURE "Data"), so the document also carries the outbox flags that let a reconciler
 * finish side effects a crash interrupted: publishing the work, refunding, publishing the event.
 */
export interface JobDocument {
  _id: string;
  accountId: string;
  pipeline: Pipeline;
  status: JobStatus;
  /** The resolved chain (preset expanded, encode placed), as the gateway sent it. */
  operations: unknown[];
  /**
   * The preset `operations` was expanded from, null for an explicit chain; it only labels the
   * job's metrics. Absent on documents stored before jobs recorded it
   * (docs/decisions.md#what-a-job-holds).
   */
  preset?: PresetName | null;
  input: JobInput;
  /** Original filename, shown in summaries; audio and image jobs only. */
  filename: string | null;
  webhookUrl: string | null;
  /** True when the job ran through `work.<pipeline>.inline` and never entered the queue. */
  inline: boolean;
  /** Highest attempt number begun (JetStream's delivery count less hand-backs); 0 before the first. */
  attempts: number;
  /**
   * Deliveries handed back by workers shutting down (handBackAttempt). JetStream counts them,
   * the job does not: every delivery number is reduced by this. Absent on older documents.
   */
  handedBack?: number;
  /** Error of the latest failed attempt; becomes `error` if the job ends failed. */
  lastError: string | null;
  createdAt: Date;
  updatedAt: Date;
  completedAt: Date | null;
  /** When a `pending` job's retry is due (the worker naks with that delay). */
  retryAt: Date | null;
  result: StoredResult | null;
  /**
   * The hour bucket in which a completed job's result reaches the end of its retention (see
   * expiry-hours.ts); the retention sweeper finds jobs by it. Absent until the job completes, and
   * on documents stored before jobs recorded it.
   */
  resultExpiryHour?: string;
  error: string | null;
  usage: UsageDimensions | null;
  /**
   * Outbox of jobs stored before their creation's admission answered for the publish: false
   * while JOBS' receipt of the work is unconfirmed. Absent on newer jobs: a creation closes its
   * admission only once the work is published, and the reconciler publishes the work of a
   * stored job whose admission outlived its deadline (application/unfinished-creations.ts).
   */
  workPublished?: boolean;
  /**
   * Outbox: false while the event of a failed queued job is unconfirmed (set with the terminal
   * state, true once EVENTS has it). Absent on inline jobs, whose creation's admission answers
   * for the event, and on jobs completed by a worker's report, whose JOBS delivery answers for
   * it (application/settlement.ts `settleReported`); false on completed jobs stored before that.
   */
  eventPublished?: boolean;
  /** Outbox: a failed job whose refund has not been confirmed by billing yet. */
  refundPending: boolean;
}

/**
 * What `jobs` holds under the id of a creation that was given up before its job was stored. It
 * takes the id, so a job write still on its way (a stalled database, a service that died
 * mid-creation) can never land after the client was told nothing was created; reads answer
 * 404 with `outcome: "not-created"` (docs/decisions.md#when-a-creation-fails).
 */
export interface AbandonedCreation {
  _id: string;
  accountId: string;
  abandonedAt: Date;
}

export function isAbandonedCreation(
  entry: JobDocument | AbandonedCreation,
): entry is AbandonedCreation {
  return 'abandonedAt' in entry;
}

/**
 * How long after its id was minted a creation may still start: older ones are refused before
 * anything is written, and deadlines are cut to it. So an id this old that holds nothing and has
 * no open admission can never hold a job, which is how a read answers "not created" for good
 * without writing (docs/decisions.md#when-a-creation-fails). Well above the creation budget
 * (25 s) and any clock skew between the gateway that mints ids and the job service; about when
 * the reconciler has settled abandoned admissions too (deadline + JOB_ABANDON_AFTER_MS).
 */
export const MAX_CREATION_AGE_MS = 2 * 60 * 1000;

/** The hour bucket in which the result of a job completed at `completedAt` expires. */
export function resultExpiryHourOf(completedAt: Date): string {
  return expiryHourOf(completedAt, LIMITS.resultRetentionMs);
}

export function isTerminal(status: JobStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

/** Bytes that the job's cost and `inputSize` are measured on (inline text: UTF-8 bytes). */
export function inputBytesOf(input: JobInput): number {
  switch (input.kind) {
    case 'upload':
    case 'stored-text':
      return input.size;
    case 'text':
      return Buffer.byteLength(input.text, 'utf8');
  }
}
