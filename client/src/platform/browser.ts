import type { FileSink, PutObjectAnswer, PutObjectRequest } from './contract';

const NEEDS_NODE = 'file paths need Node.js; in a browser pass a Blob or File';

export async function openFile(_path: string): Promise<{ blob: Blob; name: string }> {
  throw new TypeError(NEEDS_NODE);
}

export async function createFileSink(_path: string): Promise<FileSink> {
  throw new TypeError(`${NEEDS_NODE}, or a WritableStream as the destination`);
}

/** The part of XMLHttpRequest used here (this package compiles without the DOM library). */
interface UploadRequest {
  open(method: string, url: string): void;
  setRequestHeader(name: string, value: string): void;
  send(body: Blob): void;
  abort(): void;
  readonly status: number;
  readonly responseText: string;
  upload: { onprogress: ((event: { loaded: number }) => void) | null };
  onload: (() => void) | null;
  onerror: (() => void) | null;
}

/**
 * XMLHttpRequest, because it reports upload progress and sends a File from disk without
 * reading it into memory; browsers' fetch does neither (streamed request bodies need HTTP/2
 * and may not carry the Content-Length storage requires).
 */
export function putObject(request: PutObjectRequest): Promise<PutObjectAnswer> {
  const { body, signal } = request;
  if (!(body instanceof Blob)) {
    return Promise.reject(new TypeError('in a browser, upload a Blob or File, not a stream'));
  }
  const Xhr = (globalThis as { XMLHttpRequest?: new () => UploadRequest }).XMLHttpRequest;
  if (Xhr === undefined) return putWithFetch(request, body);
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const xhr = new Xhr();
    const onAbort = () => {
      xhr.abort();
      reject(signal?.reason);
    };
    xhr.open('PUT', request.url);
    xhr.setRequestHeader('content-type', request.contentType);
    xhr.upload.onprogress = (event) => request.onProgress?.(event.loaded);
    xhr.onload = () => {
      signal?.removeEventListener('abort', onAbort);
      resolve({ status: xhr.status, body: xhr.responseText });
    };
    xhr.onerror = () => {
      signal?.removeEventListener('abort', onAbort);
      reject(new TypeError('network error while uploading'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    xhr.send(body);
  });
}

/** Service workers have no XMLHttpRequest: fetch sends the Blob, progress comes at the end. */
async function putWithFetch(request: PutObjectRequest, body: Blob): Promise<PutObjectAnswer> {
  const response = await fetch(request.url, {
    method: 'PUT',
    headers: { 'content-type': request.contentType },
    body,
    ...(request.signal !== undefined && { signal: request.signal }),
  });
  if (response.ok) request.onProgress?.(request.size);
  return { status: response.status, body: await response.text() };
}
