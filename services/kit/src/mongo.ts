import type {
  Collection,
  Db,
  Document,
  Filter,
  MongoClient,
  MongoClientOptions,
  OptionalUnlessRequiredId,
} from 'mongodb';
import { WriteBatcher } from './write-batcher';

export type { Collection, Db, MongoClient };

/** A unique-key violation (MongoDB and FerretDB both answer code 11000). */
export function isDuplicateKey(error: unknown): boolean {
  return (
    typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 11000
  );
}

/**
 * Inserts `document` unless one with its `_id` (or another unique key) exists: true when this
 * call inserted it. The one way every service claims something exactly once.
 */
export async function insertIfAbsent<Schema extends Document>(
  collection: Collection<Schema>,
  document: OptionalUnlessRequiredId<Schema>,
): Promise<boolean> {
  try {
    await collection.insertOne(document);
    return true;
  } catch (error) {
    if (isDuplicateKey(error)) return false;
    throw error;
  }
}

/** One document's failure in a bulk write, as the driver reports it. */
interface DocumentWriteError {
  index: number;
  code?: unknown;
}

/**
 * Inserts each document whose `_id` (or other unique key) is not taken, in one command that goes
 * on past duplicates: per document, in order, true when this call inserted it, false when it was
 * taken (by an earlier document of the batch too), or why it failed. A failure of the command
 * itself (the server gone) throws: some of the documents may be in, and a repeat settles them.
 * So does a reply whose inserted count disagrees with its errors, as a document's fate would
 * then be unknown.
 */
export async function insertEachIfAbsent<Schema extends Document>(
  collection: Collection<Schema>,
  documents: OptionalUnlessRequiredId<Schema>[],
): Promise<PromiseSettledResult<boolean>[]> {
  if (documents.length === 0) return [];
  let insertedCount: number;
  let failures: DocumentWriteError[] = [];
  let failure: unknown;
  try {
    insertedCount = (await collection.insertMany(documents, { ordered: false })).insertedCount;
  } catch (error) {
    // The driver's MongoBulkWriteError, matched by shape: the driver is loaded lazily.
    const bulk = error as { writeErrors?: unknown; result?: { insertedCount?: unknown } };
    const reported = bulk.writeErrors === undefined ? [] : [bulk.writeErrors].flat();
    const counted = bulk.result?.insertedCount;
    if (reported.length === 0 || typeof counted !== 'number') throw error;
    insertedCount = counted;
    failures = reported as DocumentWriteError[];
    failure = error;
  }
  if (insertedCount !== documents.length - failures.length) {
    throw new Error(
      `an insert of ${documents.length} documents reported ${insertedCount} inserted and ${failures.length} failed`,
    );
  }
  const failed = new Map(failures.map((entry) => [entry.index, entry]));
  return documents.map((_, index): PromiseSettledResult<boolean> => {
    const entry = failed.get(index);
    if (entry === undefined) return { status: 'fulfilled', value: true };
    if (isDuplicateKey(entry)) return { status: 'fulfilled', value: false };
    return { status: 'rejected', reason: failure };
  });
}

/**
 * Inserts every document whose `_id` (or other unique key) is not taken, in one command that
 * goes on past duplicates: how many this call inserted. Any other failure throws (some of the
 * documents may be in; a repeat inserts the rest).
 */
export async function insertAllIfAbsent<Schema extends Document>(
  collection: Collection<Schema>,
  documents: OptionalUnlessRequiredId<Schema>[],
): Promise<number> {
  let inserted = 0;
  for (const outcome of await insertEachIfAbsent(collection, documents)) {
    if (outcome.status === 'rejected') throw outcome.reason;
    if (outcome.value) inserted++;
  }
  return inserted;
}

/**
 * Documents per insert command at most when concurrent inserts into one collection are written
 * together (KeyedRepository): far below the server's 100,000 per batch, and few enough that no
 * caller waits long behind the others' documents.
 */
const GROUPED_INSERTS_MAX = 100;

/**
 * The base of a repository over one collection whose documents are keyed by a string `_id`: the
 * typed collection, the read by id and the insert-once, so each repository says only what is its
 * own (its names for claiming, its queries and guarded updates).
 */
export abstract class KeyedRepository<Schema extends Document & { _id: string }> {
  protected readonly collection: Collection<Schema>;
  /**
   * The inserts of concurrent callers, written together: what queues behind the insert in
   * flight goes as one insertMany. On FerretDB a document inserted with three others costs
   * about 40 % of the server CPU of one inserted alone (docs/performance.md, "Inserts written
   * together"); a quiet service still writes each at once.
   */
  private readonly inserts: WriteBatcher<OptionalUnlessRequiredId<Schema>, boolean>;

  constructor(db: Db, collectionName: string) {
    this.collection = db.collection<Schema>(collectionName);
    this.inserts = new WriteBatcher((documents) => insertEachIfAbsent(this.collection, documents), {
      maxBatch: GROUPED_INSERTS_MAX,
    });
  }

  async find(id: string): Promise<Schema | null> {
    return (await this.collection.findOne({ _id: id } as Filter<Schema>)) as Schema | null;
  }

  /**
   * True when this call inserted `document`; false when its `_id` was taken already. Written
   * together with the inserts of concurrent callers into the same collection.
   */
  protected insertIfAbsent(document: OptionalUnlessRequiredId<Schema>): Promise<boolean> {
    return this.inserts.add(document);
  }

  /** How many of `documents` this call inserted; those whose `_id` was taken are skipped. */
  protected insertAllIfAbsent(documents: OptionalUnlessRequiredId<Schema>[]): Promise<number> {
    return insertAllIfAbsent(this.collection, documents);
  }
}

/**
 * The driver (~20 MiB resident once loaded) is loaded on first connection, so processes that
 * never connect (the workers, whose memory is budgeted per image) do not carry it.
 */
export async function loadMongoClient(): Promise<typeof MongoClient> {
  return (await import('mongodb')).MongoClient;
}

/**
 * How often a connection pool checks that it holds minPoolSize connections (0 here, so the
 * check only prunes closed ones). The driver's 100 ms wakes every process that talks to the
 * database ten times a second for nothing: a bare 100 ms timer alone costs Node 0.5-1.4 ms of
 * CPU a second here, in each of up to six pools of an idle stack. The driver's option parser
 * refuses the setting (it is not public), so `connectMongoClient` sets it on the parsed options
 * before connecting; services/kit/test/mongo.test.ts checks that the pool still reads it.
 */
export const POOL_CHECK_INTERVAL_MS = 10_000;

/** A client with Tamp's options and the quiet pool check (POOL_CHECK_INTERVAL_MS), connected. */
export async function connectMongoClient(
  url: string,
  options: MongoClientOptions & { appName: string },
): Promise<MongoClient> {
  const MongoClient = await loadMongoClient();
  const client = new MongoClient(url, { ...MONGO_CLIENT_OPTIONS, ...options });
  (client.options as { minPoolSizeCheckFrequencyMS?: number }).minPoolSizeCheckFrequencyMS =
    POOL_CHECK_INTERVAL_MS;
  return client.connect();
}

/**
 * No operation waits forever: a database that is paused or gone makes calls fail within these
 * bounds (and become UNAVAILABLE, see transient-errors.ts) instead of piling up behind a dead
 * socket; the driver reconnects by itself once the server answers again. On the serialized
 * FerretDB connection `waitQueueTimeoutMS` also bounds the queue: work that would wait longer
 * is refused rather than run after its caller gave up. The server monitor keeps the driver's
 * 10 s heartbeat: an operation that meets a dead server marks it unknown at once and server
 * selection then checks every 500 ms, so a shorter heartbeat only costs idle CPU in every service.
 */
export const MONGO_CLIENT_OPTIONS = {
  serverSelectionTimeoutMS: 10_000,
  connectTimeoutMS: 5_000,
  socketTimeoutMS: 20_000,
  waitQueueTimeoutMS: 15_000,
  // On a replica set: a write is acknowledged once a majority holds it, so a primary that fails
  // over cannot take an acknowledged charge or transition with it; a write or read that meets a
  // primary change is retried once on the new primary (the driver's defaults, stated because the
  // exactly-once guarantees rely on them). A standalone server (FerretDB here) ignores all three.
  writeConcern: { w: 'majority' },
  retryWrites: true,
  retryReads: true,
} as const;

/**
 * Connects to MongoDB with the driver's normal pool, or to FerretDB with every operation of this
 * process on one connection. Guarded updates are atomic on both: FerretDB's only with the
 * project's patch (scripts/infra/ferretdb/atomic-updates.patch: a compare-and-set per document,
 * decided again when another connection changed it in between), which is what lets several
 * replicas of a service share a collection. One connection per process stays for FerretDB
 * because of hot documents: many reservations of one account at once would otherwise lose the
 * compare-and-set to each other in turn (200 concurrent ones took longer than 20 s), whereas in
 * one process they simply queue. Replicas race only with each other.
 */
export async function connectMongo(options: {
  url: string;
  database: string;
  appName: string;
  /** Emit the driver's command events (tests record the queries a service sends). */
  monitorCommands?: boolean;
}): Promise<{ client: MongoClient; db: Db; serialized: boolean }> {
  const clientOptions = {
    appName: options.appName,
    monitorCommands: options.monitorCommands ?? false,
  };
  let client = await connectMongoClient(options.url, clientOptions);
  const serialized = await isFerretDb(client);
  if (serialized) {
    await client.close();
    client = await connectMongoClient(options.url, { ...clientOptions, maxPoolSize: 1 });
  }
  return { client, db: client.db(options.database), serialized };
}

async function isFerretDb(client: MongoClient): Promise<boolean> {
  const buildInfo = await client.db('admin').command({ buildInfo: 1 });
  return typeof buildInfo.ferretdbVersion === 'string';
}

/**
 * An index a service needs. Deliberately narrow: FerretDB (the local MongoDB-wire server)
 * rejects partial and TTL indexes and ignores sparse ones, so uniqueness comes only from `_id`
 * or plain unique indexes, and expiry from sweepers.
 */
export interface IndexSpecification {
  collection: string;
  name: string;
  keys: Record<string, 1 | -1>;
  unique?: boolean;
  /** An index of an earlier release that this one takes over from: dropped before this one is made. */
  replaces?: string;
}

/** MongoDB's codes for dropping an index that does not exist, or of a collection that does not. */
const NOTHING_TO_DROP = new Set([26, 27]);

/**
 * Drops the index each one replaces, if that is still there, then creates it if missing (an
 * identical existing index is left alone by the server). The drop comes first: a successor with
 * the same keys is refused while its predecessor exists under another name.
 */
export async function provisionIndexes(
  db: Db,
  indexes: readonly IndexSpecification[],
): Promise<void> {
  for (const index of indexes) {
    const collection = db.collection(index.collection);
    if (index.replaces !== undefined) {
      await collection.dropIndex(index.replaces).catch((error: unknown) => {
        if (!NOTHING_TO_DROP.has((error as { code?: number }).code ?? 0)) throw error;
      });
    }
    await collection.createIndex(index.keys, { name: index.name, unique: index.unique ?? false });
  }
}
