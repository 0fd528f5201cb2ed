/** What the client needs from its platform; `#platform` resolves to Node's or a browser's. */

export interface PutObjectRequest {
  url: string;
  body: Blob | ReadableStream<Uint8Array>;
  /** Exact byte count: presigned PUTs need a Content-Length. */
  size: number;
  contentType: string;
  onProgress?: ((sentBytes: number) => void) | undefined;
  signal?: AbortSignal | undefined;
}

export interface PutObjectAnswer {
  status: number;
  body: string;
}

/** Bytes written here appear at the destination only on `commit`, never half-written. */
export interface FileSink {
  writable: WritableStream<Uint8Array>;
  commit(): Promise<void>;
  discard(): Promise<void>;
}

/** Counts bytes as they pass, for progress. */
export function countingStream(onBytes: (total: number) => void): TransformStream<Uint8Array> {
  let total = 0;
  return new TransformStream({
    transform(chunk, controller) {
      total += chunk.byteLength;
      controller.enqueue(chunk);
      onBytes(total);
    },
  });
}
