import { apiClientOf } from '@tamp/scripts/bench/bench-stack';
import {
  type Accounting,
  accountCredits,
  auditSettledBooks,
  type BooksSource,
  violations,
} from '@tamp/scripts/load/accounting';
import { summarizeOutcomes, unfinishedOf } from '@tamp/scripts/load/report';
import { type Creation, drainJobs, runTraffic } from '@tamp/scripts/load/traffic';
import { type JobKindName, prepareWorkload } from '@tamp/scripts/load/workload';
import { expect } from 'vitest';

/**
 * A stream of job creations from a careful client (keyed retries, see scripts/load/traffic.ts)
 * on an account of its own, with a disruption (a pod deleted, a node drained, a rollout) started
 * while it flows; then every accepted job waited for and the books audited where each fact
 * lives. For a deployment reached only through its public and admin APIs (the cluster test).
 */
export interface DisruptedRun {
  creations: Creation[];
  books: Accounting;
  /** The longest a creation took to be accepted, retries included. */
  slowestCreationSec: number;
  /** What the disruption returned. */
  disruption: unknown;
  /** Jobs still not terminal when the client stopped waiting: where to start looking. */
  unfinishedJobIds: string[];
}

export async function loadDuring(
  source: Omit<BooksSource, 'apiKey' | 'accountId'>,
  options: {
    kinds: readonly JobKindName[];
    ratePerSecond: number;
    durationMs: number;
    /** Started this long after the first creation. */
    disruptAfterMs: number;
    disrupt: () => Promise<unknown>;
    drainMs: number;
    log?: (message: string) => void;
  },
): Promise<DisruptedRun> {
  const log = options.log ?? console.log;
  const account = await createAccount(source);
  const books: BooksSource = { ...source, ...account };
  const kinds = await prepareWorkload(apiClientOf(source.baseUrl), account.apiKey, options.kinds);
  const creditsBefore = await accountCredits(books);
  const traffic = runTraffic({
    baseUrl: source.baseUrl,
    apiKey: account.apiKey,
    kinds,
    ratePerSecond: options.ratePerSecond,
    durationMs: options.durationMs,
  });
  await new Promise((resolve) => setTimeout(resolve, options.disruptAfterMs));
  const started = Date.now();
  const disruption = await options.disrupt();
  log(`disruption done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const creations = await traffic;
  const finished = await drainJobs(
    { baseUrl: source.baseUrl, apiKey: account.apiKey },
    creations,
    options.drainMs,
  );
  log(`outcomes: ${JSON.stringify(summarizeOutcomes(finished))}`);
  const unfinishedJobIds = unfinishedOf(finished).map((job) => job.jobId);
  const audited = await auditSettledBooks(books, creations, creditsBefore, 60_000);
  const slowestCreationSec = Math.max(...creations.map((creation) => creation.latencyMs)) / 1000;
  // What a slow creation met on each try (0 a network error, -1 this client's time-out).
  for (const slow of creations.filter((creation) => creation.latencyMs > 30_000).slice(0, 5)) {
    log(
      `slow creation: ${slow.kind} ${(slow.latencyMs / 1000).toFixed(1)} s: ${slow.trace.join('; ')}`,
    );
  }
  log(
    `${creations.length} creations, ${audited.jobs} jobs, ${audited.completed} completed, ` +
      `${audited.creditsCharged} credits charged, slowest creation ${slowestCreationSec.toFixed(1)} s`,
  );
  return { creations, books: audited, slowestCreationSec, disruption, unfinishedJobIds };
}

/**
 * What every disrupted run must show: each creation accepted (retried by its key where the
 * disruption refused it), within 30 s; each job completed once, with one terminal event, one
 * reservation, no refund; the credits charged exactly what the completed jobs cost.
 */
export function expectNothingLostOrChargedTwice(run: DisruptedRun): void {
  expect(
    run.creations
      .filter((creation) => creation.jobId === null)
      .map((creation) => creation.statuses),
  ).toEqual([]);
  expect(violations(run.books)).toEqual([]);
  expect(run.books.completed).toBe(run.books.jobs);
  expect(run.books.jobs).toBe(new Set(run.creations.map((creation) => creation.jobId)).size);
  expect(run.books.creditsCharged).toBeGreaterThan(0);
  expect(run.slowestCreationSec).toBeLessThanOrEqual(30);
}

async function createAccount(
  source: Pick<BooksSource, 'adminUrl' | 'adminToken'>,
): Promise<{ accountId: string; apiKey: string }> {
  const response = await fetch(`${source.adminUrl}/admin/accounts`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${source.adminToken}`,
      'content-type': 'application/json',
    },
    body: JSON.stringify({ plan: 'pro', credits: 100_000 }),
  });
  const body = (await response.json()) as { data: { accountId: string; apiKey: string } };
  if (response.status !== 201) throw new Error(`account: ${JSON.stringify(body)}`);
  return body.data;
}
