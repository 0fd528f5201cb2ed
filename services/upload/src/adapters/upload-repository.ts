import { type Db, type IndexSpecification, KeyedRepository } from '@tamp/kit';
import type { FirstConsumption, Upload } from '../domain/upload';

export const UPLOADS_COLLECTION = 'uploads';

/** Lookups are by `_id`; the sweeper walks uploads by age. */
export const UPLOAD_INDEXES: readonly IndexSpecification[] = [
  { collection: UPLOADS_COLLECTION, name: 'created_at', keys: { createdAt: 1 } },
];

/**
 * The `uploads` collection. Every change is one single-document update guarded in its filter;
 * this service is the collection's only writer, which (with kit's one FerretDB connection per
 * process) keeps the guards atomic.
 */
export class UploadRepository extends KeyedRepository<Upload> {
  constructor(db: Db) {
    super(db, UPLOADS_COLLECTION);
  }

  async insert(upload: Upload): Promise<void> {
    await this.collection.insertOne(upload);
  }

  /**
   * Stores the first consumption's facts unless another job stored its own first, and returns
   * whichever facts are stored, so concurrent first consumptions all judge the same facts.
   */
  async recordFirstConsumption(
    id: string,
    consumption: FirstConsumption,
  ): Promise<FirstConsumption> {
    const result = await this.collection.updateOne(
      { _id: id, consumption: null },
      { $set: { consumption } },
    );
    if (result.modifiedCount === 1) return consumption;
    const stored = await this.find(id);
    // Gone only if swept meanwhile (days old); the facts just measured are still true.
    return stored?.consumption ?? consumption;
  }

  /** The oldest uploads created before `cutoff`, at most `limit` of them. */
  findCreatedBefore(cutoff: Date, limit: number): Promise<Upload[]> {
    return this.collection
      .find({ createdAt: { $lt: cutoff } })
      .sort({ createdAt: 1 })
      .limit(limit)
      .toArray();
  }

  async delete(id: string): Promise<void> {
    await this.collection.deleteOne({ _id: id });
  }
}
