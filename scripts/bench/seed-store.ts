import { mongoEnv } from '@tamp/kit';
import type { Plan } from '@tamp/proto';
import { type Db, type Document, MongoClient } from 'mongodb';
import pLimit from 'p-limit';
import { COLLECTIONS } from '../../services/billing/src/adapters/documents';
import {
  IDEMPOTENCY_COLLECTION,
  JOBS_COLLECTION,
} from '../../services/job/src/adapters/job-repository';
import { UPLOADS_COLLECTION } from '../../services/upload/src/adapters/upload-repository';
import { ATTEMPTS } from '../../services/webhook/src/adapters/attempt-repository';
import { DELIVERIES } from '../../services/webhook/src/adapters/delivery-repository';
import { type BenchStack, dataOf } from './bench-stack';
import { type JobTrail, jobTrail } from './seed-documents';

/**
 * Fills a running bench stack's store with what weeks of ordinary use leave in it: accounts
 * created through the admin API (so every collection an account has is written as billing
 * writes it), then jobs spread over them and the measured account with everything each job leaves in the other services'
 * collections (seed-documents.ts), inserted directly through the MongoDB driver in batches.
 */

export interface SeedPlan {
  accounts: number;
  jobs: number;
}

/** Seeding gives up after this long: a store that slow is not worth measuring. */
const TIME_LIMIT_MS = 20 * 60_000;
const ACCOUNT_CREATIONS_AT_ONCE = 8;
const JOBS_PER_BATCH = 1_000;
/** Progress is logged every this many jobs. */
const PROGRESS_EVERY_JOBS = 10_000;
/** Accounts on the plan that pays; the rest are free. */
const PRO_SHARE = 0.2;

export async function seedStore(
  stack: BenchStack,
  plan: SeedPlan,
  log: (message: string) => void,
): Promise<void> {
  const deadline = Date.now() + TIME_LIMIT_MS;
  // The measured account first, so the busiest: its reads and job list meet the most history.
  const accountIds = [
    stack.accountId,
    ...(await createAccounts(stack, plan.accounts, deadline, log)),
  ];
  const client = await new MongoClient(stack.infrastructure.mongoUrl).connect();
  try {
    // The database every service uses unless told otherwise.
    const db = client.db(mongoEnv.MONGO_DATABASE.parse(undefined));
    await insertJobTrails(db, accountIds, plan.jobs, deadline, log);
  } finally {
    await client.close();
  }
}

async function createAccounts(
  stack: BenchStack,
  count: number,
  deadline: number,
  log: (message: string) => void,
): Promise<string[]> {
  const limit = pLimit(ACCOUNT_CREATIONS_AT_ONCE);
  let created = 0;
  return Promise.all(
    Array.from({ length: count }, () =>
      limit(async () => {
        giveUpAfter(deadline, `${created} of ${count} accounts created`);
        const plan: Plan = Math.random() < PRO_SHARE ? 'pro' : 'free';
        const account = dataOf(
          await stack.admin<{ accountId: string }>('POST', '/accounts', { plan }),
          'POST /admin/accounts',
        );
        created++;
        if (created % 250 === 0 || created === count) log(`seed: ${created} accounts`);
        return account.accountId;
      }),
    ),
  );
}

async function insertJobTrails(
  db: Db,
  accountIds: readonly string[],
  jobs: number,
  deadline: number,
  log: (message: string) => void,
): Promise<void> {
  const now = new Date();
  const started = performance.now();
  for (let done = 0; done < jobs; done += JOBS_PER_BATCH) {
    giveUpAfter(deadline, `${done} of ${jobs} jobs stored`);
    const trails = Array.from({ length: Math.min(JOBS_PER_BATCH, jobs - done) }, () =>
      jobTrail(busyAccount(accountIds), now),
    );
    await insertBatch(db, trails);
    const stored = done + trails.length;
    if (stored % PROGRESS_EVERY_JOBS === 0 || stored === jobs) {
      const seconds = (performance.now() - started) / 1000;
      log(`seed: ${stored} of ${jobs} jobs (${Math.round(stored / seconds)} jobs/s)`);
    }
  }
}

/** Each service's documents of the batch, into that service's collections side by side. */
async function insertBatch(db: Db, trails: readonly JobTrail[]): Promise<void> {
  const collections: [string, Document[]][] = [
    [JOBS_COLLECTION, trails.map((trail) => trail.job)],
    [IDEMPOTENCY_COLLECTION, trails.flatMap((trail) => trail.claim ?? [])],
    [COLLECTIONS.ledger, trails.flatMap((trail) => trail.ledger)],
    [COLLECTIONS.usage, trails.flatMap((trail) => trail.usage ?? [])],
    [UPLOADS_COLLECTION, trails.flatMap((trail) => trail.upload ?? [])],
    [DELIVERIES, trails.flatMap((trail) => trail.delivery ?? [])],
    [ATTEMPTS, trails.flatMap((trail) => trail.attempts)],
  ];
  await Promise.all(
    collections
      .filter(([, documents]) => documents.length > 0)
      .map(([name, documents]) => db.collection(name).insertMany(documents, { ordered: false })),
  );
}

/** An account for the next job: a few busy accounts and a long tail of quiet ones. */
function busyAccount(accountIds: readonly string[]): string {
  return accountIds[Math.floor(accountIds.length * Math.random() ** 2)]!;
}

function giveUpAfter(deadline: number, progress: string): void {
  if (Date.now() > deadline) {
    throw new Error(`seeding gave up after ${TIME_LIMIT_MS / 60_000} minutes: ${progress}`);
  }
}
