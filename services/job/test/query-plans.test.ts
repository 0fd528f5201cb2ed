import { jobEndpoints, MB, newId } from '@tamp/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queriesThatScan, recordQueries } from '../../../test/support/query-plans';
import { JOBS_COLLECTION } from '../src/adapters/job-repository';
import type { JobDocument } from '../src/domain/job';
import { audioRequest, JobHarness, newAccount, textRequest } from './harness';

/**
 * Every query the job service sends on a request, a job transition or a sweep is served by an
 * index, on a store that holds many other jobs: the cost of a job must not grow with the jobs
 * stored (ARCHITECTURE "Data"). Checked with the server's own plans (PostgreSQL's under
 * FerretDB), for the queries the service really sent, recorded from the driver.
 */
const harness = new JobHarness();
const accountId = newAccount();
const STORED_JOBS = 4_000;
/** Jobs of one account among them: a list must read a page of them, not all of them. */
const LISTED_ACCOUNT = 'acct_seedbig';
const LISTED_JOBS = 1_500;
/** An account with a few dozen of the stored jobs (every fiftieth from the 7th). */
const SMALL_ACCOUNT = 'acct_seed7';
const DAY = 24 * 60 * 60 * 1000;

beforeAll(async () => {
  await harness.start();
  await seedJobs();
});
afterAll(() => harness.stop());

/** Completed jobs of other accounts, in every state the reconciler and sweepers look for. */
async function seedJobs(): Promise<void> {
  const now = Date.now();
  const documents = Array.from({ length: STORED_JOBS }, (_, index): JobDocument => {
    const completedAt = new Date(now - (index % 6) * DAY);
    return {
      // One id per millisecond, oldest first, so the listed account's newest jobs are the
      // collection's newest too: a page read along the `_id` index finds them at once.
      _id: newId('job', now - (STORED_JOBS - index)),
      accountId:
        index % 2 === 0 && index < 2 * LISTED_JOBS ? LISTED_ACCOUNT : `acct_seed${index % 50}`,
      pipeline: 'text',
      status: 'completed',
      operations: [],
      preset: 'medium',
      input: { kind: 'text', text: 'stored' },
      filename: null,
      webhookUrl: null,
      inline: true,
      attempts: 1,
      lastError: null,
      createdAt: completedAt,
      updatedAt: completedAt,
      completedAt,
      retryAt: null,
      result: {
        outputKey: null,
        outputText: 'stored',
        metrics: {
          inputSize: 6,
          outputSize: 6,
          compressionRatio: 1,
          operationsApplied: ['trim'],
          processingMs: 1,
        },
        expired: false,
      },
      resultExpiryHour: new Date(completedAt.getTime() + 7 * DAY).toISOString().slice(0, 13),
      error: null,
      usage: { inputBytes: 6 },
      eventPublished: true,
      refundPending: false,
    };
  });
  const jobs = harness.db.collection<JobDocument>(JOBS_COLLECTION);
  for (let start = 0; start < documents.length; start += 1_000) {
    await jobs.insertMany(documents.slice(start, start + 1_000));
  }
}

describe('query plans', () => {
  it('serves every query of creation, transitions, reads and sweeps from an index', async () => {
    const recording = recordQueries(harness.mongo);
    try {
      const inlineWorker = harness.serveInline('text', async () => ({
        status: 'completed',
        outputKey: null,
        outputText: 'x',
        metrics: {
          inputSize: 5,
          outputSize: 1,
          compressionRatio: 5,
          operationsApplied: ['trim'],
          processingMs: 1,
        },
        usage: { inputBytes: 5 },
      }));
      const inline = await harness.createJob(textRequest(accountId, 'hello'));
      inlineWorker.unsubscribe();
      expect(inline.httpStatus).toBe(200);

      const uploadId = harness.addUpload(accountId, 'voice.mp3', 1 * MB, 'audio/mpeg');
      const queued = await harness.createJob(
        audioRequest(accountId, uploadId, { idempotencyKey: 'plans' }),
      );
      const jobId = queued.job.id;
      await harness.beginAttempt(jobId, 1);
      await harness.completeAttempt(jobId, 1);
      await harness.rpc.call(jobEndpoints.getJob, { accountId, jobId });
      await harness.rpc.call(jobEndpoints.getJobEvent, { accountId, jobId });
      await harness.service.sweep(new Date());
      await harness.service.sweep(new Date(Date.now() + 8 * DAY));
    } finally {
      recording.stop();
    }
    const commands = new Set(recording.queries.map((query) => query.command));
    expect(commands).toEqual(new Set(['find', 'findAndModify', 'update', 'delete']));
    expect(await queriesThatScan(harness.db, recording.queries)).toEqual([
      // The admissions collection holds only creations in progress: a few documents at most.
      'find admissions {"deadline":{"$lt":"date"}}',
    ]);
  });

  it('reads one page of an account’s job list, however many jobs the account holds', async () => {
    const jobs = harness.db.collection(JOBS_COLLECTION);
    const abandoned = newId('job', Date.now() - STORED_JOBS / 2);
    await jobs.insertOne({
      _id: abandoned as never,
      accountId: LISTED_ACCOUNT,
      abandonedAt: new Date(),
    });
    const expected = await jobs
      .find({ accountId: LISTED_ACCOUNT, status: { $exists: true } }, { projection: { _id: 1 } })
      .toArray();
    const newestFirst = expected
      .map((job) => String(job._id))
      .sort()
      .reverse();
    expect(newestFirst).toHaveLength(LISTED_JOBS);

    const recording = recordQueries(harness.mongo);
    const listed: string[] = [];
    try {
      let cursor: string | undefined;
      do {
        const page = await harness.rpc.call(jobEndpoints.listJobs, {
          accountId: LISTED_ACCOUNT,
          limit: 100,
          ...(cursor === undefined ? {} : { cursor }),
        });
        listed.push(...page.items.map((item) => item.id));
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
    } finally {
      recording.stop();
    }
    // Every job once, newest first; the abandoned creation is not a job.
    expect(listed).toEqual(newestFirst);

    const pages = recording.queries.filter((query) => query.command === 'find');
    expect(pages.length).toBeGreaterThanOrEqual(LISTED_JOBS / 100);
    for (const page of pages) {
      const explained = await harness.db.command({
        explain: { find: JOBS_COLLECTION, filter: page.filter, sort: { _id: -1 }, limit: 101 },
        verbosity: 'queryPlanner',
      });
      // FerretDB answers the page in PostgreSQL, sorted and limited there (docs/dependencies.md):
      // without that it reads and sorts every job of the account for each page.
      expect(explained).toMatchObject({ sortPushdown: true, limitPushdown: true });
    }
    expect(await queriesThatScan(harness.db, pages)).toEqual([]);
  });

  it('finds a page of an account with few jobs through the account index, by account and cursor', async () => {
    const page = await harness.rpc.call(jobEndpoints.listJobs, {
      accountId: SMALL_ACCOUNT,
      limit: 5,
    });
    expect(page.items).toHaveLength(5);
    const recording = recordQueries(harness.mongo);
    try {
      await harness.rpc.call(jobEndpoints.listJobs, {
        accountId: SMALL_ACCOUNT,
        limit: 5,
        cursor: page.nextCursor!,
      });
    } finally {
      recording.stop();
    }
    const [query] = recording.queries.filter((recorded) => recorded.command === 'find');
    const explained = await harness.db.command({
      explain: { find: JOBS_COLLECTION, filter: query!.filter, sort: { _id: -1 }, limit: 6 },
      verbosity: 'queryPlanner',
    });
    // PostgreSQL's plan (FerretDB answers explain with it): the ordered account index finds the
    // account's jobs before the cursor, and no others. An unordered index finds every job of
    // the account, and the `_id` index passes over other accounts' jobs.
    const conditions = planNodes(explained.queryPlanner)
      .filter((node) => String(node['Index Name'] ?? '').includes('account_newest'))
      .map((node) => String(node['Index Cond']));
    expect(conditions).toHaveLength(1);
    expect(conditions[0]).toMatch(/'accountId'::text\) = '"acct_seed7"'::jsonb/);
    expect(conditions[0]).toMatch(/'_id'::text\) < '"job_/);
  });
});

/** Every node of a PostgreSQL plan in EXPLAIN's JSON form. */
function planNodes(plan: unknown): Record<string, unknown>[] {
  if (Array.isArray(plan)) return plan.flatMap(planNodes);
  if (plan === null || typeof plan !== 'object') return [];
  const node = plan as Record<string, unknown>;
  const own = 'Node Type' in node ? [node] : [];
  return [...own, ...Object.values(node).flatMap(planNodes)];
}
