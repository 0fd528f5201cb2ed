/**
 * A customer's code that uses Tamp: thumbnails for the photos its users upload, and the
 * webhook that tells it a queued job is done. It knows nothing of containers; its tests
 * (thumbnails.test.ts) give it a real Tamp from @tamp/testcontainers.
 */

export interface TampConnection {
  baseUrl: string;
  apiKey: string;
}

interface Job {
  id: string;
  status: 'created' | 'pending' | 'processing' | 'completed' | 'failed';
  result?: { outputUrl?: string };
  error?: { message?: string };
}

async function call<T>(tamp: TampConnection, method: string, path: string, body?: unknown) {
  const response = await fetch(`${tamp.baseUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${tamp.apiKey}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = (await response.json()) as { data?: T; error?: unknown };
  if (!response.ok || answer.data === undefined) {
    throw new Error(`Tamp ${method} ${path}: ${response.status} ${JSON.stringify(answer.error)}`);
  }
  return answer.data;
}

/** A WebP thumbnail of `photo`: uploaded, compressed with the `thumbnail` preset, downloaded. */
export async function thumbnail(photo: Buffer, tamp: TampConnection): Promise<Buffer> {
  const upload = await call<{ id: string; uploadUrl: string; contentType: string }>(
    tamp,
    'POST',
    '/v1/upload',
    { filename: 'photo.jpg', size: photo.length },
  );
  const put = await fetch(upload.uploadUrl, {
    method: 'PUT',
    headers: { 'content-type': upload.contentType },
    body: photo,
  });
  if (!put.ok) throw new Error(`upload: ${put.status}`);
  let job = await call<Job>(tamp, 'POST', '/v1/image', { imageId: upload.id, preset: 'thumbnail' });
  while (job.status !== 'completed' && job.status !== 'failed') {
    job = await call<Job>(tamp, 'GET', `/v1/jobs/${job.id}?wait=20`);
  }
  if (job.status === 'failed' || job.result?.outputUrl === undefined) {
    throw new Error(`thumbnail failed: ${job.error?.message ?? 'no result'}`);
  }
  const result = await fetch(job.result.outputUrl);
  return Buffer.from(await result.arrayBuffer());
}

/** Queues notes for compression; Tamp calls `webhookUrl`, if given, when it is done. */
export async function compressNotes(
  text: string,
  webhookUrl: string | undefined,
  tamp: TampConnection,
): Promise<string> {
  const job = await call<Job>(tamp, 'POST', '/v1/text', { text, preset: 'chill', webhookUrl });
  return job.id;
}
