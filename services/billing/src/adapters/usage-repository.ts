import { KeyedRepository } from '@tamp/kit';
import type { Pipeline } from '@tamp/proto';
import type { Db } from 'mongodb';
import type { BillingPeriod } from '../domain/billing-period';
import type { KeyedTotal, UnpricedUsage } from '../domain/usage-report';
import type { PipelineUsageTotals } from '../domain/usage-summary';
import { COLLECTIONS, type UsageDocument } from './documents';

/**
 * The `usage` collection: one record per completed job (`_id`: job id), summed per period on read.
 *
 * Every sum is its own aggregation with exactly one `$sum`: FerretDB 1.24 fills only the first
 * accumulator of a `$group` and returns 0 for the others (measured). Nor does it implement
 * `$ifNull` (measured), so records without `credits` are not defaulted in the query: `$sum`
 * skips the missing field and `unpriced` hands those records over to be priced one by one.
 * MongoDB gives the same answers.
 */
export class UsageRepository extends KeyedRepository<UsageDocument> {
  constructor(db: Db) {
    super(db, COLLECTIONS.usage);
  }

  /** In one command; a job that has its record already (a redelivered event) is skipped. */
  async insertAll(records: UsageDocument[]): Promise<void> {
    await this.insertAllIfAbsent(records);
  }

  /** Jobs and measures per pipeline. */
  async totals(accountId: string, period: BillingPeriod): Promise<PipelineUsageTotals[]> {
    const totals = new Map<Pipeline, PipelineUsageTotals>();
    for (const measure of MEASURES) {
      const summand = measure === 'requests' ? 1 : `$${measure}`;
      for (const row of await this.sumPerPipeline(accountId, period, summand)) {
        const pipelineTotals = totals.get(row.key) ?? emptyTotals(row.key);
        pipelineTotals[measure] = row.total;
        totals.set(row.key, pipelineTotals);
      }
    }
    return [...totals.values()];
  }

  /** Credits of the records that carry them, per pipeline. */
  creditsPerPipeline(accountId: string, period: BillingPeriod): Promise<KeyedTotal<Pipeline>[]> {
    return this.sumPerPipeline(accountId, period, '$credits');
  }

  /** Jobs, or their credits, per UTC day, of the records that carry their day. */
  async perDay(
    accountId: string,
    period: BillingPeriod,
    measure: 'jobs' | 'credits',
  ): Promise<KeyedTotal<string>[]> {
    const summand = measure === 'jobs' ? 1 : '$credits';
    const rows = await this.sum(accountId, period, '$completedDay', summand);
    // Records older than `completedDay` make one group keyed null; `unpriced` has them.
    return rows.flatMap((row) => (row._id === null ? [] : [{ key: row._id, total: row.total }]));
  }

  /** The period's records written before usage records carried their credits and day. */
  unpriced(accountId: string, period: BillingPeriod): Promise<UnpricedUsage[]> {
    return this.collection
      .find(
        { ...inPeriod(accountId, period), credits: { $exists: false } },
        { projection: { _id: 0, pipeline: 1, inputBytes: 1, completedAt: 1 } },
      )
      .toArray() as Promise<UnpricedUsage[]>;
  }

  private async sumPerPipeline(
    accountId: string,
    period: BillingPeriod,
    summand: string | number,
  ): Promise<KeyedTotal<Pipeline>[]> {
    const rows = await this.sum(accountId, period, '$pipeline', summand);
    return rows.map((row) => ({ key: row._id as Pipeline, total: row.total }));
  }

  private sum(
    accountId: string,
    period: BillingPeriod,
    groupBy: '$pipeline' | '$completedDay',
    summand: string | number,
  ): Promise<{ _id: string | null; total: number }[]> {
    return this.collection
      .aggregate<{ _id: string | null; total: number }>([
        { $match: inPeriod(accountId, period) },
        { $group: { _id: groupBy, total: { $sum: summand } } },
      ])
      .toArray();
  }
}

const MEASURES = ['requests', 'inputBytes', 'audioSeconds', 'megapixels', 'characters'] as const;

/** Leads with the equality FerretDB pushes down to its `accountId, completedAt` index. */
function inPeriod(accountId: string, period: BillingPeriod) {
  return { accountId, completedAt: { $gte: period.start, $lt: period.end } };
}

function emptyTotals(pipeline: Pipeline): PipelineUsageTotals {
  return { pipeline, requests: 0, inputBytes: 0, audioSeconds: 0, megapixels: 0, characters: 0 };
}
