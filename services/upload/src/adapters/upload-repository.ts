import type { Db, IndexSpecification } from '@tamp/kit';
import type { FirstConsumption, Upload } from '../domain/upload';

type UploadDocument = Omit<Upload, 'id'> & { _id: string };

export const UPLOADS_COLLECTION = 'uploads';

// The driver's Collection type, without depending on the driver package directly.
const uploadsIn = (db: Db) => db.collection<UploadDocument>(UPLOADS_COLLECTION);

/** Lookups are by `_id`; the sweeper walks uploads by age. */
export const UPLOAD_INDEXES: readonly IndexSpecification[] = [
  { collection: UPLOADS_COLLECTION, name: 'created_at', keys: { createdAt: 1 } },
];

/**
 * The `uploads` collection. Every change is one single-document update guarded in its filter;
 * this service is the collection's only writer, which (with kit's one FerretDB connection per
 * process) keeps the guards atomic.
 */
export class UploadRepository {
  private readonly uploads: ReturnType<typeof uploadsIn>;

  constructor(db: Db) {
    this.uploads = uploadsIn(db);
  }

  async insert(upload: Upload): Promise<void> {
    await this.uploads.insertOne(toDocument(upload));
  }

  async find(id: string): Promise<Upload | undefined> {
    const document = await this.uploads.findOne({ _id: id });
    return document === null ? undefined : fromDocument(document);
  }

  /**
   * Stores the first consumption's facts unless another job stored its own first, and returns
   * whichever facts are stored, so concurrent first consumptions all judge the same facts.
   */
  async recordFirstConsumption(
    id: string,
    consumption: FirstConsumption,
  ): Promise<FirstConsumption> {
    const result = await this.uploads.updateOne(
      { _id: id, consumption: null },
      { $set: { consumption } },
    );
    if (result.modifiedCount === 1) return consumption;
    const stored = await this.uploads.findOne({ _id: id });
    // Gone only if swept meanwhile (days old); the facts just measured are still true.
    return stored?.consumption ?? consumption;
  }

  /** The oldest uploads created before `cutoff`, at most `limit` of them. */
  async findCreatedBefore(cutoff: Date, limit: number): Promise<Upload[]> {
    const documents = await this.uploads
      .find({ createdAt: { $lt: cutoff } })
      .sort({ createdAt: 1 })
      .limit(limit)
      .toArray();
    return documents.map(fromDocument);
  }

  async delete(id: string): Promise<void> {
    await this.uploads.deleteOne({ _id: id });
  }
}

function toDocument({ id, ...rest }: Upload): UploadDocument {
  return { _id: id, ...rest };
}

function fromDocument({ _id, ...rest }: UploadDocument): Upload {
  return { id: _id, ...rest };
}
