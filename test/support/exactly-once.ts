import { pollUntil } from '@tamp/scripts/infra/kubernetes/processes';
import type { Db } from 'mongodb';
import { expect } from 'vitest';
import { assertStaysTrue } from './stays-true';

/**
 * What a deployed Tamp stored about one job, read where each fact lives (the services' MongoDB
 * database and a webhook receiver's deliveries), for tests that kill a worker mid-job: the
 * cluster test (a pod force-deleted) and the containers test (a container SIGKILLed).
 */

/** How long a test watches for a duplicate charge, attempt or event that would follow a job's end. */
export const DUPLICATE_WINDOW_MS = 3_000;

/** Billing's ledger entries of one job: reservations and refunds. */
export async function ledgerOf(
  db: Db,
  jobId: string,
): Promise<{ reserve: number; refund: number }> {
  const entries = await db
    .collection<{ _id: string; kind: string; jobId: string | null }>('ledger')
    .find({ jobId })
    .toArray();
  return {
    reserve: entries.filter((entry) => entry.kind === 'reserve').length,
    refund: entries.filter((entry) => entry.kind === 'refund').length,
  };
}

export async function jobDocument(
  db: Db,
  jobId: string,
): Promise<{ status: string; attempts: number } | null> {
  return db
    .collection<{ _id: string; status: string; attempts: number }>('jobs')
    .findOne({ _id: jobId });
}

/** How many of `deliveries` are a `job.completed` event of this job. */
export function completionsIn(deliveries: readonly { body: string }[], jobId: string): number {
  return deliveries.filter((delivery) => {
    const event = JSON.parse(delivery.body) as { event?: string; job?: { id?: string } };
    return event.event === 'job.completed' && event.job?.id === jobId;
  }).length;
}

/**
 * A completed job whose first attempt's worker was killed: once its completion event has been
 * delivered, it shows two attempts, one reservation, no refund and one completion event, and
 * keeps showing them through the duplicate window (a second charge, a third attempt or a
 * second event would follow the completion within seconds).
 */
export async function expectCompletedOnceAfterOneCrash(
  db: Db,
  jobId: string,
  deliveries: () => Promise<readonly { body: string }[]>,
): Promise<void> {
  await pollUntil(
    'the completion webhook',
    async () => (completionsIn(await deliveries(), jobId) > 0 ? true : undefined),
    60_000,
    500,
  );
  await assertStaysTrue(
    async () => {
      expect((await jobDocument(db, jobId))?.attempts).toBe(2);
      expect(await ledgerOf(db, jobId)).toEqual({ reserve: 1, refund: 0 });
      expect(completionsIn(await deliveries(), jobId)).toBe(1);
    },
    { forMs: DUPLICATE_WINDOW_MS, intervalMs: 500, what: 'one charge, two attempts, one event' },
  );
}
