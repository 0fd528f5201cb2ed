import {
  type IndexSpecification,
  insertIfAbsent,
  KeyedRepository,
  WRITE_BEHIND_LINGER_MS,
  WriteBatcher,
} from '@tamp/kit';
import { ID_PREFIXES, type JobStatus, type JobType } from '@tamp/proto';
import type { Collection, Db, Filter } from 'mongodb';
import { type AbandonedCreation, isAbandonedCreation, type JobDocument } from '../domain/job';

export const JOBS_COLLECTION = 'jobs';
export const IDEMPOTENCY_COLLECTION = 'idempotency';
export const ADMISSIONS_COLLECTION = 'admissions';

/** Indexes of the collections this service owns; plain ones only (FerretDB rules). */
export const JOB_INDEXES: readonly IndexSpecification[] = [
  // Lists: one account's jobs, newest first (ULID ids sort by creation time). FerretDB keeps an
  // index whose keys end with `_id` in key order, so a page is read along it
  // (docs/dependencies.md, "Keyset pages"); `account_id`, its predecessor, was kept unordered.
  {
    collection: JOBS_COLLECTION,
    name: 'account_newest',
    keys: { accountId: 1, _id: -1 },
    replaces: 'account_id',
  },
  // Reconciler: `created` jobs whose publish is unconfirmed, terminal jobs whose event or refund
  // is. Each query leads with an equality, the only filter FerretDB serves from an index; the
  // matching documents are the jobs in flight, not the jobs stored.
  { collection: JOBS_COLLECTION, name: 'status_updated', keys: { status: 1, updatedAt: 1 } },
  { collection: JOBS_COLLECTION, name: 'event_pending', keys: { eventPublished: 1 } },
  { collection: JOBS_COLLECTION, name: 'refund_pending', keys: { refundPending: 1 } },
  // Retention sweeper: one hour bucket at a time (domain/expiry-hours.ts).
  { collection: JOBS_COLLECTION, name: 'result_expiry', keys: { resultExpiryHour: 1 } },
  { collection: IDEMPOTENCY_COLLECTION, name: 'expiry', keys: { expiryHour: 1 } },
  { collection: ADMISSIONS_COLLECTION, name: 'deadline', keys: { deadline: 1 } },
];

/**
 * Every job id (its prefix, then upper-case Crockford base32, proto's ids.ts) sorts between
 * these two: `~` sorts after every character of a ULID.
 */
const BEFORE_EVERY_JOB_ID = `${ID_PREFIXES.job}_`;
const AFTER_EVERY_JOB_ID = `${ID_PREFIXES.job}_~`;

/** The outbox flags, each with the value that says its side effect is confirmed. */
const OUTBOX_DONE = { workPublished: true, eventPublished: true, refundPending: false } as const;
export type OutboxFlag = keyof typeof OUTBOX_DONE;

/** What a guarded transition expects to find: the state the decision was made on. */
export interface ExpectedState {
  status: JobStatus;
  attempts?: number;
}

export interface ListQuery {
  accountId: string;
  type: JobType | undefined;
  status: JobStatus | undefined;
  beforeId: string | undefined;
  limit: number;
}

const SUMMARY_FIELDS = {
  _id: 1,
  pipeline: 1,
  status: 1,
  filename: 1,
  error: 1,
  result: 1,
  createdAt: 1,
  completedAt: 1,
} as const;

/**
 * The `jobs` collection. Every state change is `transition`: one updateOne whose filter is the
 * state the caller decided on, so of several concurrent callers exactly one wins (kit's Mongo
 * connection serializes operations on FerretDB to keep that true there as well).
 */
export class JobRepository extends KeyedRepository<JobDocument> {
  /** The same collection, as it also holds abandoned creations (domain/job.ts). */
  private readonly entries: Collection<JobDocument | AbandonedCreation>;
  /** One per flag: confirmations of many jobs written together (see markDone). */
  private readonly confirmations = new Map<OutboxFlag, WriteBatcher<string>>();

  constructor(db: Db) {
    super(db, JOBS_COLLECTION);
    this.entries = db.collection(JOBS_COLLECTION);
    for (const flag of Object.keys(OUTBOX_DONE) as OutboxFlag[]) {
      this.confirmations.set(
        flag,
        new WriteBatcher(
          async (jobIds) => {
            await this.collection.updateMany(
              { _id: { $in: [...new Set(jobIds)] } },
              { $set: { [flag]: OUTBOX_DONE[flag] } },
            );
          },
          { lingerMs: WRITE_BEHIND_LINGER_MS },
        ),
      );
    }
  }

  /** False when the id is taken already: by a job, or by an abandoned creation. */
  async insert(job: JobDocument): Promise<boolean> {
    return this.insertIfAbsent(job);
  }

  /** The job, or null when there is none (never an abandoned creation). */
  override async find(jobId: string): Promise<JobDocument | null> {
    const entry = await this.entries.findOne({ _id: jobId });
    return entry === null || isAbandonedCreation(entry) ? null : entry;
  }

  /** The account's job under this id, or what was given up under it, or null. */
  async findOfAccount(
    accountId: string,
    jobId: string,
  ): Promise<JobDocument | AbandonedCreation | null> {
    return this.entries.findOne({ _id: jobId, accountId });
  }

  /**
   * Settles a creation that did not finish: takes its id with an abandoned creation unless its
   * job was stored. `abandoned` also when an earlier call took it; `stored` with the job.
   */
  async abandonCreation(
    jobId: string,
    accountId: string,
    now: Date,
  ): Promise<
    { outcome: 'abandoned'; entry: AbandonedCreation } | { outcome: 'stored'; job: JobDocument }
  > {
    const abandoned: AbandonedCreation = { _id: jobId, accountId, abandonedAt: now };
    if (await insertIfAbsent(this.entries as Collection<AbandonedCreation>, abandoned)) {
      return { outcome: 'abandoned', entry: abandoned };
    }
    const entry = await this.entries.findOne({ _id: jobId });
    if (entry === null) throw new Error(`the id ${jobId} is taken but nothing holds it`);
    return isAbandonedCreation(entry)
      ? { outcome: 'abandoned', entry }
      : { outcome: 'stored', job: entry };
  }

  /** Applies `changes` only if the job is still in `expected`; true when it was applied. */
  async transition(
    jobId: string,
    expected: ExpectedState,
    changes: Partial<JobDocument>,
    now: Date,
  ): Promise<boolean> {
    const filter: Filter<JobDocument> = { _id: jobId, status: expected.status };
    if (expected.attempts !== undefined) filter.attempts = expected.attempts;
    const outcome = await this.collection.updateOne(filter, {
      $set: { ...changes, updatedAt: now },
    });
    return outcome.modifiedCount === 1;
  }

  /**
   * The completion of the attempt running as it was started, decided without reading the job
   * first: `processing` at exactly `attempt` and never handed back (so the delivery number is
   * the attempt). The job after the change, or null when it is in any other state (the caller
   * then reads it and decides).
   */
  completeRunning(
    jobId: string,
    attempt: number,
    changes: Partial<JobDocument>,
    now: Date,
  ): Promise<JobDocument | null> {
    return this.collection.findOneAndUpdate(
      { _id: jobId, status: 'processing', attempts: attempt, handedBack: { $exists: false } },
      { $set: { ...changes, updatedAt: now } },
      { returnDocument: 'after' },
    );
  }

  /**
   * A worker's claim of a job never started (`created`, no attempt made) → `pending`, decided
   * without reading the job first: the job after the claim, or null when it is not in that
   * state (the caller then reads it and decides).
   */
  claimCreated(jobId: string, now: Date): Promise<JobDocument | null> {
    return this.collection.findOneAndUpdate(
      { _id: jobId, status: 'created', attempts: 0 },
      { $set: { status: 'pending', updatedAt: now } },
      { returnDocument: 'after' },
    );
  }

  /**
   * Confirms one outbox flag, write-behind: confirmations gathered for WRITE_BEHIND_LINGER_MS go
   * together in one updateMany by `_id` (FerretDB serves `_id: { $in }` from the `_id` index
   * with this repository's patch, docs/dependencies.md), so a busy service writes one command a
   * window instead of one per job. Nobody waits on it: a confirmation lost to a crash only means
   * the reconciler redoes the side effect, which its receiver deduplicates. Settles once written.
   */
  markDone(jobId: string, flag: OutboxFlag): Promise<void> {
    return this.confirmations.get(flag)!.add(jobId);
  }

  /** Writes the confirmations still gathering (on stop). */
  async flush(): Promise<void> {
    await Promise.all([...this.confirmations.values()].map((batcher) => batcher.flush()));
  }

  async list(query: ListQuery): Promise<JobDocument[]> {
    const filter: Filter<JobDocument> = {
      // The account id itself, not an array holding it: an equality FerretDB answers from the
      // ordered account index (docs/dependencies.md, "Keyset pages").
      accountId: { $eq: query.accountId, $not: { $type: 'array' } },
      // Abandoned creations share the collection; they are not jobs.
      status: { $exists: true },
    };
    if (query.type !== undefined) filter.pipeline = query.type as JobDocument['pipeline'];
    if (query.status !== undefined) filter.status = query.status;
    // Bounded on both sides by job ids: a range of strings is what FerretDB answers as one page,
    // read along the `_id` index or the account's, instead of sorting every job of the account,
    // and one starting at `job_` cannot hold an ObjectId, which it would otherwise check each
    // document for (docs/dependencies.md, "Keyset pages").
    filter._id = { $gt: BEFORE_EVERY_JOB_ID, $lt: query.beforeId ?? AFTER_EVERY_JOB_ID };
    return this.collection
      .find(filter, { projection: SUMMARY_FIELDS })
      .sort({ _id: -1 })
      .limit(query.limit)
      .toArray();
  }

  /**
   * `created` jobs whose work message may not have reached JOBS, of those stored before their
   * admission answered for the publish (domain/job.ts `workPublished`).
   */
  async unpublished(createdBefore: Date, limit: number): Promise<JobDocument[]> {
    return this.collection
      .find({ status: 'created', workPublished: false, createdAt: { $lt: createdBefore } })
      .limit(limit)
      .toArray();
  }

  /**
   * Terminal jobs whose refund or event is not confirmed yet. Two queries, one per outbox flag,
   * rather than one `$or`: FerretDB serves only top-level equalities from an index.
   */
  async unsettled(updatedBefore: Date, limit: number): Promise<JobDocument[]> {
    const terminal = {
      status: { $in: ['completed', 'failed'] },
      updatedAt: { $lt: updatedBefore },
    } satisfies Filter<JobDocument>;
    const unsettled = new Map<string, JobDocument>();
    for (const flag of [{ eventPublished: false }, { refundPending: true }]) {
      const found = await this.collection
        .find({ ...flag, ...terminal })
        .limit(limit)
        .toArray();
      for (const job of found) unsettled.set(job._id, job);
    }
    return [...unsettled.values()].slice(0, limit);
  }

  /** Completed jobs of one expiry hour past retention whose output is still kept. */
  async pastRetention(
    expiryHour: string,
    completedBefore: Date,
    limit: number,
  ): Promise<JobDocument[]> {
    return this.collection
      .find({
        resultExpiryHour: expiryHour,
        'result.expired': false,
        completedAt: { $lt: completedBefore },
      })
      .limit(limit)
      .toArray();
  }

  async markExpired(jobId: string, now: Date): Promise<boolean> {
    const outcome = await this.collection.updateOne(
      { _id: jobId, status: 'completed', 'result.expired': false },
      { $set: { 'result.expired': true, 'result.outputText': null, updatedAt: now } },
    );
    return outcome.modifiedCount === 1;
  }
}
