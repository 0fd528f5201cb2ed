import { insertIfAbsent } from '@tamp/kit';
import type { JobEvent, Pipeline } from '@tamp/proto';
import type { Collection, Db } from 'mongodb';
import type { BillingPeriod } from '../domain/billing-period';
import type { PipelineUsageTotals } from '../domain/usage-summary';
import { COLLECTIONS, type UsageDocument } from './documents';

/** One usage record per completed job (`_id`: job id), summed per period on read. */
export class UsageStore {
  private readonly usage: Collection<UsageDocument>;

  constructor(db: Db) {
    this.usage = db.collection<UsageDocument>(COLLECTIONS.usage);
  }

  /** Records a completed job; a redelivered event finds its record and counts nothing. */
  async recordCompleted(event: JobEvent): Promise<boolean> {
    const usage = event.usage;
    return insertIfAbsent(this.usage, {
      _id: event.jobId,
      accountId: event.accountId,
      pipeline: event.pipeline,
      inputBytes: usage?.inputBytes ?? event.result?.metrics.inputSize ?? 0,
      audioSeconds: usage?.audioSeconds ?? 0,
      megapixels: usage?.megapixels ?? 0,
      characters: usage?.characters ?? 0,
      completedAt: new Date(event.completedAt),
    });
  }

  /**
   * Sums per pipeline, one aggregation per measure: FerretDB 1.24 fills only the first
   * accumulator of a `$group` and returns 0 for the others (measured), so every `$group` here
   * carries exactly one `$sum`. MongoDB gives the same answer either way.
   */
  async totals(accountId: string, period: BillingPeriod): Promise<PipelineUsageTotals[]> {
    const match = { $match: { accountId, completedAt: { $gte: period.start, $lt: period.end } } };
    const totals = new Map<Pipeline, PipelineUsageTotals>();
    for (const measure of MEASURES) {
      const rows = await this.usage
        .aggregate<{ _id: Pipeline; total: number }>([
          match,
          {
            $group: {
              _id: '$pipeline',
              total: { $sum: measure === 'requests' ? 1 : `$${measure}` },
            },
          },
        ])
        .toArray();
      for (const row of rows) {
        const pipelineTotals = totals.get(row._id) ?? emptyTotals(row._id);
        pipelineTotals[measure] = row.total;
        totals.set(row._id, pipelineTotals);
      }
    }
    return [...totals.values()];
  }
}

const MEASURES = ['requests', 'inputBytes', 'audioSeconds', 'megapixels', 'characters'] as const;

function emptyTotals(pipeline: Pipeline): PipelineUsageTotals {
  return { pipeline, requests: 0, inputBytes: 0, audioSeconds: 0, megapixels: 0, characters: 0 };
}
