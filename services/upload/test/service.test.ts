import {
  connectMongo,
  connectNats,
  createLogger,
  type Db,
  type MongoClient,
  type NatsConnection,
  ObjectStore,
  provisionIndexes,
  Rpc,
} from '@tamp/kit';
import {
  createTopology,
  isId,
  LIMITS,
  newId,
  type Pipeline,
  type PublicUpload,
  ServiceError,
  STORAGE_LIFECYCLE_RULES,
  storageKeys,
  uploadEndpoints,
} from '@tamp/proto';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import { UPLOAD_INDEXES, UPLOADS_COLLECTION } from '../src/adapters/upload-repository';
import { UPLOAD_RETENTION_MS } from '../src/application/upload-sweeper';
import { configSchema, uploadSettingsFrom } from '../src/config';
import { type RunningUpload, startUploadService } from '../src/service';
import { type FileHead, fileOf } from './support/file-heads';

const infrastructure = isolatedInfrastructure();
const settings = uploadSettingsFrom(configSchema.parse(infrastructure.serviceEnv));
const logger = createLogger('upload-test', 'silent');
const topology = createTopology(infrastructure.namespace);
const FREE_LIMIT = 25 * 1024 * 1024;
const HOUR_MS = 60 * 60 * 1000;

let serverNats: NatsConnection;
let clientNats: NatsConnection;
let mongo: MongoClient;
let db: Db;
let store: ObjectStore;
let service: RunningUpload;
let rpc: Rpc;
/** The service's clock; each test starts at the real time and may move it. */
let now: Date;
let account: string;

beforeAll(async () => {
  serverNats = await connectNats({ url: infrastructure.natsUrl, name: 'upload', logger });
  clientNats = await connectNats({ url: infrastructure.natsUrl, name: 'caller', logger });
  ({ client: mongo, db } = await connectMongo({
    url: infrastructure.mongoUrl,
    database: infrastructure.database,
    appName: 'upload-test',
  }));
  await provisionIndexes(db, UPLOAD_INDEXES);
  store = new ObjectStore({ ...infrastructure.s3, bucket: infrastructure.bucket });
  await store.provision(STORAGE_LIFECYCLE_RULES);
  service = await startUploadService({
    rpc: new Rpc(serverNats, topology, logger),
    db,
    store,
    logger,
    clock: () => now,
    settings,
  });
  await serverNats.flush();
  rpc = new Rpc(clientNats, topology, logger);
});

afterAll(async () => {
  await service?.stop();
  await db?.dropDatabase();
  await Promise.all([mongo?.close(), serverNats?.close(), clientNats?.close()]);
});

beforeEach(() => {
  now = new Date();
  account = newId('account');
});

function create(filename: string, size = 1000, accountId = account, maxUploadBytes = FREE_LIMIT) {
  return rpc.call(uploadEndpoints.createUpload, { accountId, filename, size, maxUploadBytes });
}

function consume(
  uploadId: string,
  pipeline: Pipeline,
  options: { accountId?: string; maxUploadBytes?: number } = {},
) {
  return rpc.call(uploadEndpoints.consumeUpload, {
    accountId: options.accountId ?? account,
    uploadId,
    pipeline,
    maxUploadBytes: options.maxUploadBytes ?? FREE_LIMIT,
  });
}

/** The client's PUT to the presigned URL, as a browser or curl would send it. */
function put(upload: PublicUpload, body: Buffer, contentType = upload.contentType) {
  return fetch(upload.uploadUrl, {
    method: 'PUT',
    headers: { 'content-type': contentType },
    body: new Uint8Array(body),
  });
}

async function uploaded(filename: string, body: Buffer): Promise<PublicUpload> {
  const upload = await create(filename, body.length);
  expect((await put(upload, body)).status).toBe(200);
  return upload;
}

async function errorCode(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!(error instanceof ServiceError)) throw new Error(`expected a ServiceError, got ${error}`);
  return error.code;
}

const storedUpload = (id: string) =>
  db.collection(UPLOADS_COLLECTION).findOne({ _id: id as never });

describe('createUpload', () => {
  it('returns the spec Upload object and stores the upload', async () => {
    const upload = await create('Holiday Photo.PNG', 4096);
    expect(isId('upload', upload.id)).toBe(true);
    expect(upload).toMatchObject({ contentType: 'image/png', uploadUrlExpiresIn: 900 });
    expect(upload.expiresAt).toBe(new Date(now.getTime() + LIMITS.uploadLifetimeMs).toISOString());
    const url = new URL(upload.uploadUrl);
    expect(url.pathname).toBe(`/${infrastructure.bucket}/uploads/${account}/${upload.id}`);
    expect(url.searchParams.get('X-Amz-Expires')).toBe('900');
    expect(url.searchParams.get('X-Amz-SignedHeaders')).toContain('content-type');
    expect(await storedUpload(upload.id)).toEqual({
      _id: upload.id,
      accountId: account,
      filename: 'Holiday Photo.PNG',
      extension: '.png',
      contentType: 'image/png',
      declaredSize: 4096,
      key: storageKeys.upload(account, upload.id),
      createdAt: now,
      expiresAt: new Date(upload.expiresAt),
      consumption: null,
    });
  });

  it('derives every content type of the spec table', async () => {
    const expected = {
      'a.mp3': 'audio/mpeg',
      'a.wav': 'audio/wav',
      'a.pdf': 'application/pdf',
      'a.txt': 'text/plain',
      'a.jpg': 'image/jpeg',
      'a.jpeg': 'image/jpeg',
      'a.png': 'image/png',
      'a.webp': 'image/webp',
    };
    for (const [filename, contentType] of Object.entries(expected)) {
      expect((await create(filename)).contentType).toBe(contentType);
    }
  });

  it('refuses an extension outside the table with INVALID_FORMAT', async () => {
    expect(await errorCode(create('movie.mp4'))).toBe('INVALID_FORMAT');
    expect(await errorCode(create('no-extension'))).toBe('INVALID_FORMAT');
  });

  it('refuses a declared size over the plan limit with FILE_TOO_LARGE', async () => {
    expect(await errorCode(create('big.wav', FREE_LIMIT + 1))).toBe('FILE_TOO_LARGE');
    expect((await create('exact.wav', FREE_LIMIT)).contentType).toBe('audio/wav');
  });

  it('defends the filename length and the account id itself', async () => {
    expect(await errorCode(create(''))).toBe('VALIDATION_ERROR');
    expect(await errorCode(create(`${'x'.repeat(252)}.png`))).toBe('VALIDATION_ERROR');
    expect(await errorCode(create('a.png', 10, '../../etc'))).toBe('VALIDATION_ERROR');
  });
});

/** A PUT whose body is streamed: sent chunked, without a Content-Length. */
function putStreamed(upload: PublicUpload, body: Buffer) {
  return fetch(upload.uploadUrl, {
    method: 'PUT',
    headers: { 'content-type': upload.contentType },
    body: new Blob([new Uint8Array(body)]).stream(),
    duplex: 'half',
  } as RequestInit);
}

describe('presigned PUT', () => {
  it('binds the declared size: storage refuses any other length and takes exactly that one', async () => {
    const upload = await create('photo.png', 64);
    const signed = new URL(upload.uploadUrl).searchParams.get('X-Amz-SignedHeaders');
    expect(signed?.split(';')).toContain('content-length');
    for (const size of [1, 63, 65, 4096]) {
      const response = await put(upload, fileOf('png', size));
      expect(response.status, `${size} bytes`).toBe(403);
    }
    // Sent without a length at all: storage asks for one (411 Length Required).
    expect((await putStreamed(upload, fileOf('png', 64))).status).toBe(411);
    expect(await errorCode(consume(upload.id, 'image'))).toBe('UPLOAD_NOT_COMPLETED');
    expect((await put(upload, fileOf('png', 64))).status).toBe(200);
    expect((await consume(upload.id, 'image')).size).toBe(64);
  });

  it('refuses 26 MB PUT on a 1-byte declaration', async () => {
    const upload = await create('big.txt', 1);
    const response = await put(upload, Buffer.alloc(26 * 1024 * 1024, 0x61)).catch(
      // Storage may answer and close before the whole body is sent.
      (error: unknown) => ({ status: `closed early (${String(error)})` }),
    );
    expect(response.status).not.toBe(200);
    expect(await store.stat(storageKeys.upload(account, upload.id))).toBeUndefined();
  });

  it('is refused by storage when sent with another content type', async () => {
    const upload = await create('photo.png');
    const response = await put(upload, fileOf('png'), 'text/plain');
    expect(response.status).toBe(403);
    expect(await errorCode(consume(upload.id, 'image'))).toBe('UPLOAD_NOT_COMPLETED');
  });
});

describe('consumeUpload', () => {
  it('passes a completed upload and reports its real size, content type and key', async () => {
    const body = fileOf('png', 3000);
    const upload = await create('photo.png', body.length);
    expect((await put(upload, body)).status).toBe(200);
    expect(await consume(upload.id, 'image')).toEqual({
      uploadId: upload.id,
      key: storageKeys.checkedUpload(account, upload.id),
      size: 3000,
      contentType: 'image/png',
      filename: 'photo.png',
    });
  });

  it('gives jobs the checked copy: bytes PUT again with the still-valid URL never reach them', async () => {
    const checked = fileOf('png', 2000);
    const upload = await create('swap.png', checked.length);
    expect((await put(upload, checked)).status).toBe(200);
    const first = await consume(upload.id, 'image');
    // The upload URL is valid for 15 minutes: replace the object with other bytes (of the
    // declared length, the only one storage takes).
    expect((await put(upload, Buffer.alloc(checked.length, 7))).status).toBe(200);
    const again = await consume(upload.id, 'image');
    expect(again).toEqual(first);
    expect(await store.getBuffer(again.key)).toEqual(checked);
  });

  it('answers 409 before the PUT without storing it, and passes after the PUT', async () => {
    const upload = await create('voice.wav', 64);
    expect(await errorCode(consume(upload.id, 'audio'))).toBe('UPLOAD_NOT_COMPLETED');
    expect((await storedUpload(upload.id))?.consumption).toBeNull();
    expect((await put(upload, fileOf('wav'))).status).toBe(200);
    expect((await consume(upload.id, 'audio')).size).toBe(64);
  });

  it('answers 413 when the real size exceeds the plan of the job (a plan changed since the upload)', async () => {
    const upload = await create('photo.jpg', 1001, account, 2000);
    expect((await put(upload, fileOf('jpeg', 1001))).status).toBe(200);
    expect(await errorCode(consume(upload.id, 'image', { maxUploadBytes: 1000 }))).toBe(
      'FILE_TOO_LARGE',
    );
    // The measured size is stored, and judged against the limit of each job: after an upgrade
    // the same upload passes, without storage being read again.
    await store.remove(storageKeys.upload(account, upload.id));
    expect((await consume(upload.id, 'image', { maxUploadBytes: 2000 })).size).toBe(1001);
  });

  it.each<[string, FileHead, Pipeline]>([
    ['photo.png', 'text', 'image'],
    ['photo.jpg', 'pdf', 'image'],
    ['photo.webp', 'wav', 'image'],
    ['voice.wav', 'png', 'audio'],
    ['song.mp3', 'text', 'audio'],
    ['song.mp3', 'webp', 'audio'],
    ['paper.pdf', 'jpeg', 'text'],
    ['paper.pdf', 'text', 'text'],
  ])('answers 422 for %s holding %s bytes', async (filename, head, pipeline) => {
    const upload = await uploaded(filename, fileOf(head));
    expect(await errorCode(consume(upload.id, pipeline))).toBe('INVALID_FORMAT');
  });

  it.each<[string, FileHead, Pipeline]>([
    ['song.mp3', 'mp3Id3', 'audio'],
    ['song.mp3', 'mp3Frame', 'audio'],
    ['voice.wav', 'wav', 'audio'],
    ['voice.mp3', 'wav', 'audio'],
    ['photo.jpeg', 'jpeg', 'image'],
    ['photo.png', 'png', 'image'],
    ['photo.webp', 'webp', 'image'],
    ['paper.pdf', 'pdf', 'text'],
  ])('passes %s holding %s bytes', async (filename, head, pipeline) => {
    const upload = await uploaded(filename, fileOf(head));
    expect((await consume(upload.id, pipeline)).size).toBe(64);
  });

  it('skips the signature check for .txt, even for an empty file', async () => {
    const binary = await uploaded('notes.txt', fileOf('png'));
    expect((await consume(binary.id, 'text')).contentType).toBe('text/plain');
    // Declared sizes start at 1 byte, so an empty object can only have arrived another way.
    const empty = await create('empty.txt', 1);
    await store.putBuffer(storageKeys.upload(account, empty.id), Buffer.alloc(0), 'text/plain');
    expect((await consume(empty.id, 'text')).size).toBe(0);
  });

  it('refuses an object stored under another content type than the upload was bound to', async () => {
    const upload = await create('photo.png');
    // Not possible through the presigned URL; bytes that arrived another way are not trusted.
    await store.putBuffer(storageKeys.upload(account, upload.id), fileOf('png'), 'text/plain');
    expect(await errorCode(consume(upload.id, 'image'))).toBe('INVALID_FORMAT');
  });

  it('answers 422 for an upload of the wrong kind, before looking at storage', async () => {
    const image = await create('photo.png');
    // Not uploaded yet: the kind answer comes first (not 409), it can never change.
    expect(await errorCode(consume(image.id, 'audio'))).toBe('INVALID_FORMAT');
    expect(await errorCode(consume(image.id, 'text'))).toBe('INVALID_FORMAT');
    const text = await uploaded('notes.txt', fileOf('text'));
    expect(await errorCode(consume(text.id, 'image'))).toBe('INVALID_FORMAT');
  });

  it('answers 404 for another account, an unknown id and a malformed id', async () => {
    const upload = await uploaded('photo.png', fileOf('png'));
    expect(await errorCode(consume(upload.id, 'image', { accountId: newId('account') }))).toBe(
      'UPLOAD_NOT_FOUND',
    );
    // 404 comes before the kind check, so another account's id reveals nothing.
    expect(await errorCode(consume(upload.id, 'audio', { accountId: newId('account') }))).toBe(
      'UPLOAD_NOT_FOUND',
    );
    for (const id of [newId('upload'), 'upl_nope', newId('job'), '', `${upload.id}x`]) {
      expect(await errorCode(consume(id, 'image'))).toBe('UPLOAD_NOT_FOUND');
    }
  });

  it('answers 410 once 24 hours have passed, even after a successful first consumption', async () => {
    const created = now;
    const used = await uploaded('photo.png', fileOf('png'));
    const neverSent = await create('late.png');
    expect((await consume(used.id, 'image')).size).toBe(64);
    now = new Date(created.getTime() + LIMITS.uploadLifetimeMs);
    expect((await consume(used.id, 'image')).size).toBe(64);
    now = new Date(created.getTime() + LIMITS.uploadLifetimeMs + 1);
    expect(await errorCode(consume(used.id, 'image'))).toBe('UPLOAD_EXPIRED');
    // Expiry is answered before the storage checks: no point telling the client to PUT.
    expect(await errorCode(consume(neverSent.id, 'image'))).toBe('UPLOAD_EXPIRED');
  });

  it('runs the first-consumption checks once and reuses a success', async () => {
    const upload = await uploaded('song.mp3', fileOf('mp3Id3', 500));
    expect((await consume(upload.id, 'audio')).size).toBe(500);
    const stored = await storedUpload(upload.id);
    expect(stored?.consumption).toMatchObject({
      size: 500,
      detectedFormat: 'mp3',
      formatProblem: null,
    });
    await store.remove(storageKeys.upload(account, upload.id));
    expect((await consume(upload.id, 'audio')).size).toBe(500);
  });

  it('keeps a definitive failure: a later PUT of valid bytes does not change it', async () => {
    const upload = await uploaded('photo.png', fileOf('text'));
    expect(await errorCode(consume(upload.id, 'image'))).toBe('INVALID_FORMAT');
    expect((await put(upload, fileOf('png'))).status).toBe(200);
    expect(await errorCode(consume(upload.id, 'image'))).toBe('INVALID_FORMAT');
  });

  it('lets concurrent first consumptions all pass on one stored outcome', async () => {
    const upload = await uploaded('photo.webp', fileOf('webp', 777));
    const results = await Promise.all(Array.from({ length: 8 }, () => consume(upload.id, 'image')));
    expect(results.map((result) => result.size)).toEqual(Array(8).fill(777));
    const checkedAt = (await storedUpload(upload.id))?.consumption.checkedAt;
    expect(checkedAt).toEqual(now);
  });
});

describe('sweeper', () => {
  it('deletes uploads past the 2-day retention with their objects, and nothing newer', async () => {
    const current = now;
    now = new Date(current.getTime() - UPLOAD_RETENTION_MS - HOUR_MS);
    const old = await uploaded('old.png', fileOf('png'));
    const oldNeverSent = await create('old-unsent.png');
    now = new Date(current.getTime() - UPLOAD_RETENTION_MS + HOUR_MS);
    const recent = await uploaded('recent.png', fileOf('png'));
    now = current;

    expect(await service.sweep()).toBeGreaterThanOrEqual(2);
    expect(await storedUpload(old.id)).toBeNull();
    expect(await storedUpload(oldNeverSent.id)).toBeNull();
    expect(await store.stat(storageKeys.upload(account, old.id))).toBeUndefined();
    expect(await errorCode(consume(old.id, 'image'))).toBe('UPLOAD_NOT_FOUND');
    expect(await storedUpload(recent.id)).not.toBeNull();
    expect(await store.stat(storageKeys.upload(account, recent.id))).toBeDefined();
  });

  it('runs on its configured interval', async () => {
    const current = now;
    now = new Date(current.getTime() - UPLOAD_RETENTION_MS - HOUR_MS);
    const old = await uploaded('old.png', fileOf('png'));
    now = current;
    const periodic = await startUploadService({
      rpc: new Rpc(serverNats, topology, logger),
      db,
      store,
      logger,
      clock: () => now,
      settings: { ...settings, sweepIntervalMs: 50 },
    });
    try {
      await vi.waitFor(async () => expect(await storedUpload(old.id)).toBeNull(), {
        timeout: 10_000,
        interval: 50,
      });
      expect(await store.stat(storageKeys.upload(account, old.id))).toBeUndefined();
    } finally {
      await periodic.stop();
    }
  });
});
