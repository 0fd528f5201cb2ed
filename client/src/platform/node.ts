import { createWriteStream, openAsBlob } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { Writable } from 'node:stream';
import {
  countingStream,
  type FileSink,
  type PutObjectAnswer,
  type PutObjectRequest,
} from './contract';

/** A Blob backed by the file: read as it is sent, never loaded whole, and readable again. */
export async function openFile(path: string): Promise<{ blob: Blob; name: string }> {
  return { blob: await openAsBlob(path), name: basename(path) };
}

/** Writes to `<path>.<random>.part` and renames it into place on commit. */
export async function createFileSink(path: string): Promise<FileSink> {
  await mkdir(dirname(path), { recursive: true });
  const partial = `${path}.${globalThis.crypto.randomUUID().slice(0, 8)}.part`;
  return {
    writable: Writable.toWeb(createWriteStream(partial)) as WritableStream<Uint8Array>,
    commit: () => rename(partial, path),
    discard: () => rm(partial, { force: true }),
  };
}

/**
 * The body is streamed with an explicit Content-Length (storage refuses chunked uploads), so a
 * large file is never held in memory; progress counts the bytes handed to the connection.
 */
export async function putObject(request: PutObjectRequest): Promise<PutObjectAnswer> {
  const source = request.body instanceof Blob ? request.body.stream() : request.body;
  const body =
    request.onProgress === undefined
      ? source
      : source.pipeThrough(countingStream(request.onProgress));
  const response = await fetch(request.url, {
    method: 'PUT',
    headers: { 'content-type': request.contentType, 'content-length': String(request.size) },
    body,
    duplex: 'half',
    ...(request.signal !== undefined && { signal: request.signal }),
  });
  return { status: response.status, body: await response.text() };
}
