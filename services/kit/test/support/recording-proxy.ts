import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  /** Path and query as sent, e.g. `/tamp-t1/?lifecycle`. */
  url: string;
}

/**
 * An HTTP proxy in front of a real server that records every request passing through: what a
 * client really sent, observed on the wire. Requests and answers are forwarded unchanged (the
 * Host header too, so SigV4 signatures made for the proxy's address still verify).
 */
export async function startRecordingProxy(target: string): Promise<{
  endpoint: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}> {
  const upstream = new URL(target);
  const requests: RecordedRequest[] = [];
  const server = createServer((incoming, outgoing) => {
    requests.push({ method: incoming.method ?? '', url: incoming.url ?? '' });
    const forwarded = request(
      {
        hostname: upstream.hostname,
        port: upstream.port,
        method: incoming.method,
        path: incoming.url,
        headers: incoming.headers,
      },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    forwarded.on('error', (error) => outgoing.destroy(error));
    incoming.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** PutBucketLifecycleConfiguration and DeleteBucketLifecycle among the recorded requests. */
export function lifecycleWrites(requests: readonly RecordedRequest[]): RecordedRequest[] {
  return requests.filter(
    (each) =>
      (each.method === 'PUT' || each.method === 'DELETE') &&
      new URL(each.url, 'http://proxy').searchParams.has('lifecycle'),
  );
}

/** CreateBucket: a PUT of the bucket itself, without a sub-resource. */
export function bucketCreations(requests: readonly RecordedRequest[]): RecordedRequest[] {
  return requests.filter((each) => {
    const url = new URL(each.url, 'http://proxy');
    return each.method === 'PUT' && url.search === '' && /^\/[^/]+\/?$/.test(url.pathname);
  });
}
