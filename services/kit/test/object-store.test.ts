import { type AddressInfo, createServer, type Socket } from 'node:net';
import { STORAGE_LIFECYCLE_RULES } from '@tamp/proto';
import { beforeAll, describe, expect, it } from 'vitest';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import { MissingObjectError, ObjectStore } from '../src/object-store';
import { isTransientError } from '../src/transient-errors';

const infrastructure = isolatedInfrastructure();
const store = new ObjectStore({ ...infrastructure.s3, bucket: infrastructure.bucket });

beforeAll(async () => {
  await store.provision(STORAGE_LIFECYCLE_RULES);
});

describe('object store (against MinIO)', () => {
  it('creates the bucket with the lifecycle rules, idempotently', async () => {
    await store.provision(STORAGE_LIFECYCLE_RULES);
    await store.ping();
    const rules = await store.lifecycleRules();
    expect(rules.sort((a, b) => a.id.localeCompare(b.id))).toEqual([
      { id: 'tamp-expire-inputs', prefix: 'inputs/', days: 2 },
      { id: 'tamp-expire-results', prefix: 'results/', days: 8 },
      { id: 'tamp-expire-uploads', prefix: 'uploads/', days: 2 },
    ]);
  });

  it('accepts a presigned PUT with the signed content type', async () => {
    const url = await store.presignUpload(
      'uploads/acct_1/upl_ok',
      { type: 'image/png', length: 'png bytes'.length },
      900,
    );
    expect(new URL(url).searchParams.get('X-Amz-SignedHeaders')).toBe(
      'content-length;content-type;host',
    );
    const response = await fetch(url, {
      method: 'PUT',
      headers: { 'content-type': 'image/png' },
      body: 'png bytes',
    });
    expect(response.status).toBe(200);
    const stored = await store.stat('uploads/acct_1/upl_ok');
    expect(stored?.size).toBe('png bytes'.length);
    expect(stored?.contentType).toBe('image/png');
  });

  it('refuses a presigned PUT sent with another content type', async () => {
    const url = await store.presignUpload(
      'uploads/acct_1/upl_wrong',
      { type: 'image/png', length: 1 },
      900,
    );
    const response = await fetch(url, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain' },
      body: 'x',
    });
    expect(response.status).toBe(403);
    expect(await response.text()).toContain('SignatureDoesNotMatch');
    expect(await store.stat('uploads/acct_1/upl_wrong')).toBeUndefined();
  });

  it('refuses a presigned PUT of another length than the signed one', async () => {
    const url = await store.presignUpload(
      'uploads/acct_1/upl_length',
      { type: 'image/png', length: 4 },
      900,
    );
    for (const body of ['abc', 'abcde']) {
      const response = await fetch(url, {
        method: 'PUT',
        headers: { 'content-type': 'image/png' },
        body,
      });
      expect(response.status, body).toBe(403);
      expect(await response.text()).toContain('SignatureDoesNotMatch');
    }
    expect(await store.stat('uploads/acct_1/upl_length')).toBeUndefined();
  });

  it('signs for the public endpoint clients reach', async () => {
    const publicStore = new ObjectStore({
      ...infrastructure.s3,
      bucket: infrastructure.bucket,
      publicEndpoint: 'https://files.example.com',
    });
    const url = new URL(
      await publicStore.presignUpload('uploads/a/b', { type: 'audio/wav', length: 10 }, 900),
    );
    expect(url.origin).toBe('https://files.example.com');
    expect(url.pathname).toBe(`/${infrastructure.bucket}/uploads/a/b`);
    expect(url.searchParams.get('X-Amz-Expires')).toBe('900');
  });

  it('gives a download URL that serves the bytes as an attachment', async () => {
    await store.putBuffer('results/acct_1/job_1/result.txt', 'hello', 'text/plain');
    const url = await store.presignDownload('results/acct_1/job_1/result.txt', 'result.txt', 3600);
    const response = await fetch(url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-disposition')).toBe('attachment; filename="result.txt"');
    expect(await response.text()).toBe('hello');
  });

  it('reports a missing object on download with its own error, not the storage message', async () => {
    const error = await store
      .downloadToFile('uploads/acct_1/gone', '/tmp/never-written')
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(MissingObjectError);
    expect((error as Error).message).toBe('The input file could not be read from storage');
  });

  it('reads only the head of an object, and reports missing objects as undefined', async () => {
    await store.putBuffer(
      'uploads/acct_1/upl_head',
      Buffer.from('%PDF-1.7 and much more'),
      'application/pdf',
    );
    expect((await store.readHead('uploads/acct_1/upl_head', 5)).toString()).toBe('%PDF-');
    expect(await store.stat('uploads/acct_1/missing')).toBeUndefined();
  });
});

describe('object store that stops answering', () => {
  it('fails a call with a transient error after the idle time-out instead of hanging', async () => {
    // A black hole: the connection is accepted and the request read, but nothing comes back,
    // as from a paused MinIO.
    const sockets: Socket[] = [];
    const silent = createServer((socket) => {
      sockets.push(socket);
      socket.on('data', () => {});
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as AddressInfo;
    const paused = new ObjectStore({
      ...infrastructure.s3,
      endpoint: `http://127.0.0.1:${port}`,
      bucket: infrastructure.bucket,
      idleTimeoutMs: 500,
    });
    try {
      const error = await paused.getBuffer('inputs/acct_1/anything').then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toMatchObject({ code: 'ETIMEDOUT' });
      expect(isTransientError(error)).toBe(true);
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });
});
