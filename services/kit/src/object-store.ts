import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { type AgentOptions, Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { Duplex } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { SignatureV4 } from '@smithy/signature-v4';
import { Client, CopyDestinationOptions, CopySourceOptions } from 'minio';
import { type LifecycleRule, planLifecycle, summarizeLifecycle } from './lifecycle-configuration';
import {
  awsCredentialChain,
  IdentitySourceProvider,
  type S3Identity,
  type S3IdentitySource,
} from './s3-credentials';

export type { LifecycleRule } from './lifecycle-configuration';

export interface ObjectStoreConfig {
  endpoint: string;
  /** Where clients reach storage; presigned URLs are signed for this host. */
  publicEndpoint?: string | undefined;
  /**
   * Static keys, both or neither (S3_ACCESS_KEY, S3_SECRET_KEY). Neither: the AWS SDK's standard
   * credential chain (awsCredentialChain), e.g. a pod's IRSA or EKS Pod Identity role.
   */
  accessKey?: string | undefined;
  secretKey?: string | undefined;
  region: string;
  bucket: string;
  /** See S3_IDLE_TIMEOUT_MS; tests shorten it. */
  idleTimeoutMs?: number;
}

export interface StoredObject {
  size: number;
  contentType: string | undefined;
  lastModified: Date;
}

/**
 * The one bucket Tamp keeps bytes in. Data-plane calls go through the `minio` client against the
 * in-cluster endpoint; presigned URLs are signed with the AWS SDK's own SigV4 signer because
 * minio-js leaves `content-type` and `content-length` out of presigned signatures, and uploads
 * bind both. Both take their credentials from one place: the static keys, or the AWS credential
 * chain, whose temporary credentials (with their session token) each request and presign reads
 * as they are at that moment.
 */
export class ObjectStore {
  readonly bucket: string;
  private readonly client: Client;
  private signer: Promise<SignatureV4> | undefined;
  private readonly publicUrl: URL;
  private readonly region: string;
  /** The static keys, or the chain's provider (asked by the signer for every presign). */
  private readonly credentials: S3Identity | S3IdentitySource;

  constructor(config: ObjectStoreConfig) {
    const endpoint = new URL(config.endpoint);
    this.bucket = config.bucket;
    this.region = config.region;
    const { accessKey, secretKey } = config;
    if ((accessKey === undefined) !== (secretKey === undefined)) {
      throw new Error(
        'S3 credentials: give both the access key and the secret key (S3_ACCESS_KEY, ' +
          'S3_SECRET_KEY), or neither to use the AWS credential chain',
      );
    }
    this.credentials =
      accessKey !== undefined && secretKey !== undefined
        ? { accessKeyId: accessKey, secretAccessKey: secretKey }
        : awsCredentialChain();
    this.client = new Client({
      endPoint: endpoint.hostname,
      port: endpoint.port === '' ? undefined : Number(endpoint.port),
      useSSL: endpoint.protocol === 'https:',
      ...(typeof this.credentials === 'function'
        ? { credentialsProvider: new IdentitySourceProvider(this.credentials).asClientOption() }
        : { accessKey, secretKey }),
      region: config.region,
      pathStyle: true,
      transportAgent: idleTimeoutAgent(
        endpoint.protocol === 'https:',
        config.idleTimeoutMs ?? S3_IDLE_TIMEOUT_MS,
      ),
    });
    this.publicUrl = new URL(config.publicEndpoint ?? config.endpoint);
  }

  /**
   * The SigV4 signer is loaded on the first presign: only the upload and job services sign
   * URLs, and workers, whose memory is budgeted, should not carry it.
   */
  private loadSigner(): Promise<SignatureV4> {
    this.signer ??= Promise.all([import('@smithy/signature-v4'), import('@smithy/hash-node')]).then(
      ([{ SignatureV4 }, { Hash }]) =>
        new SignatureV4({
          service: 's3',
          region: this.region,
          // A provider is asked on every presign: temporary credentials are current, and their
          // session token goes into the URL (X-Amz-Security-Token).
          credentials: this.credentials,
          sha256: Hash.bind(null, 'sha256'),
          // S3 canonical paths are encoded once, unlike other AWS services.
          uriEscapePath: false,
        }),
    );
    return this.signer;
  }

  /**
   * Creates the bucket if it is missing and merges Tamp's lifecycle rules into its configuration
   * (planLifecycle): the rules that are not Tamp's stay as they are, and nothing is written when
   * Tamp's rules are already right, so a start against a provisioned bucket needs no write
   * permission on its configuration and sends no write.
   *
   * Several replicas start at once, and each reads, merges and writes. S3 offers no conditional
   * write of a lifecycle configuration, so two writes race and the last one wins; that is safe
   * enough here because:
   * - replicas of one version compute the same document from the same read (their rules are
   *   fixed in code and the others are copied as read), so whichever write lands last, the
   *   result is the same; a replica that read after another's write finds nothing to change;
   * - a write replaces the whole configuration atomically, so no one ever sees half of one;
   * - writes happen only while Tamp's rules differ (the first start, an upgrade that changes
   *   them), so an operator's concurrent edit of their own rules can be lost only in that short
   *   read-to-write window, never in steady state. Whoever needs a guarantee manages the bucket
   *   itself (S3_MANAGE_BUCKET=false), and Tamp then writes nothing.
   * Creating the bucket races too: losing that race (BucketAlreadyOwnedByYou) is success.
   */
  async provision(
    rules: readonly LifecycleRule[],
  ): Promise<{ createdBucket: boolean; lifecycle: 'unchanged' | 'written' | 'removed' }> {
    let createdBucket = false;
    if (!(await this.client.bucketExists(this.bucket))) {
      try {
        await this.client.makeBucket(this.bucket);
        createdBucket = true;
      } catch (error) {
        // Another replica may have created it in between.
        if (!isCode(error, 'BucketAlreadyOwnedByYou')) throw error;
      }
    }
    const current = await this.lifecycleConfiguration();
    const plan = planLifecycle(current?.xml, rules);
    switch (plan.action) {
      case 'none':
        return { createdBucket, lifecycle: 'unchanged' };
      case 'delete':
        await this.client.removeBucketLifecycle(this.bucket);
        return { createdBucket, lifecycle: 'removed' };
      case 'put':
        // Raw, not setBucketLifecycle: that takes minio-js's parsed form, which would not write
        // others' rules back exactly as they were (see lifecycle-configuration.ts).
        await this.client.makeRequestAsyncOmit(
          {
            method: 'PUT',
            bucketName: this.bucket,
            query: 'lifecycle',
            headers: {
              'Content-MD5': createHash('md5').update(plan.xml).digest('base64'),
              // A bucket-wide setting that travels beside the document, not in it: sent back as
              // read, so a write of the rules does not reset it to S3's default.
              ...(current?.minimumObjectSize === undefined
                ? {}
                : { [MINIMUM_OBJECT_SIZE_HEADER]: current.minimumObjectSize }),
            },
          },
          plan.xml,
        );
        return { createdBucket, lifecycle: 'written' };
    }
  }

  /** HeadBucket: whether the bucket exists (credentials that may not see it throw). */
  async exists(): Promise<boolean> {
    return this.client.bucketExists(this.bucket);
  }

  /** Every rule of the bucket's lifecycle configuration, in the shape of Tamp's own. */
  async lifecycleRules(): Promise<LifecycleRule[]> {
    return summarizeLifecycle((await this.lifecycleConfiguration())?.xml);
  }

  /** The configuration document as S3 returns it; undefined when the bucket has none. */
  private async lifecycleConfiguration(): Promise<
    { xml: string; minimumObjectSize: string | undefined } | undefined
  > {
    try {
      const response = await this.client.makeRequestAsync({
        method: 'GET',
        bucketName: this.bucket,
        query: 'lifecycle',
      });
      const chunks: Buffer[] = [];
      for await (const chunk of response) chunks.push(chunk as Buffer);
      const minimumObjectSize = response.headers[MINIMUM_OBJECT_SIZE_HEADER];
      return {
        xml: Buffer.concat(chunks).toString('utf8'),
        minimumObjectSize: typeof minimumObjectSize === 'string' ? minimumObjectSize : undefined,
      };
    } catch (error) {
      if (isCode(error, 'NoSuchLifecycleConfiguration')) return undefined;
      throw error;
    }
  }

  /**
   * A PUT URL whose signature covers the content type and the length: another `Content-Type`,
   * or a body of another size (or of no declared size, sent chunked), is refused by storage.
   */
  async presignUpload(
    key: string,
    content: { type: string; length: number },
    expiresInSeconds: number,
  ): Promise<string> {
    return this.presign(
      'PUT',
      key,
      expiresInSeconds,
      { 'content-type': content.type, 'content-length': String(content.length) },
      {},
    );
  }

  /** A GET URL that downloads as an attachment named `filename`. */
  async presignDownload(key: string, filename: string, expiresInSeconds: number): Promise<string> {
    return this.presign(
      'GET',
      key,
      expiresInSeconds,
      {},
      {
        'response-content-disposition': `attachment; filename="${filename.replaceAll('"', '')}"`,
      },
    );
  }

  async stat(key: string): Promise<StoredObject | undefined> {
    try {
      const stat = await this.client.statObject(this.bucket, key);
      return {
        size: stat.size,
        contentType: stat.metaData['content-type'] as string | undefined,
        lastModified: stat.lastModified,
      };
    } catch (error) {
      if (isCode(error, 'NotFound') || isCode(error, 'NoSuchKey')) return undefined;
      throw error;
    }
  }

  /** The first `length` bytes of an object (for content signature checks) without reading the rest. */
  async readHead(key: string, length: number): Promise<Buffer> {
    const stream = await this.client.getPartialObject(this.bucket, key, 0, length);
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).subarray(0, length);
  }

  /**
   * Streams an object to a file. A missing object is a MissingObjectError (retryable: it may
   * appear), so no raw storage message ("The specified key does not exist.") reaches a job's
   * public `error`.
   */
  async downloadToFile(key: string, path: string): Promise<void> {
    let stream: NodeJS.ReadableStream;
    try {
      stream = await this.client.getObject(this.bucket, key);
    } catch (error) {
      if (isCode(error, 'NoSuchKey') || isCode(error, 'NotFound'))
        throw new MissingObjectError(key);
      throw error;
    }
    await pipeline(stream, createWriteStream(path));
  }

  async uploadFile(key: string, path: string, contentType: string): Promise<void> {
    await this.client.fPutObject(this.bucket, key, path, { 'Content-Type': contentType });
  }

  async putBuffer(key: string, body: Buffer | string, contentType: string): Promise<void> {
    const buffer = typeof body === 'string' ? Buffer.from(body) : body;
    await this.client.putObject(this.bucket, key, buffer, buffer.length, {
      'Content-Type': contentType,
    });
  }

  async getBuffer(key: string): Promise<Buffer> {
    const stream = await this.client.getObject(this.bucket, key);
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  /** Server-side copy within the bucket; undefined when the source does not exist. */
  async copy(sourceKey: string, targetKey: string): Promise<true | undefined> {
    try {
      await this.client.copyObject(
        new CopySourceOptions({ Bucket: this.bucket, Object: sourceKey }),
        new CopyDestinationOptions({ Bucket: this.bucket, Object: targetKey }),
      );
      return true;
    } catch (error) {
      if (isCode(error, 'NoSuchKey') || isCode(error, 'NotFound')) return undefined;
      throw error;
    }
  }

  async remove(key: string): Promise<void> {
    await this.client.removeObject(this.bucket, key);
  }

  /** Readiness: storage answers and the bucket exists. */
  async ping(): Promise<void> {
    if (!(await this.client.bucketExists(this.bucket)))
      throw new Error(`bucket ${this.bucket} is missing`);
  }

  private async presign(
    method: 'GET' | 'PUT',
    key: string,
    expiresIn: number,
    headers: Record<string, string>,
    query: Record<string, string>,
  ): Promise<string> {
    const signer = await this.loadSigner();
    const signed = await signer.presign(
      {
        method,
        protocol: this.publicUrl.protocol,
        hostname: this.publicUrl.hostname,
        port: this.publicUrl.port === '' ? undefined : Number(this.publicUrl.port),
        path: `${this.publicUrl.pathname.replace(/\/$/, '')}/${this.bucket}/${key}`,
        query,
        // Presigned S3 requests are verified with an unsigned payload; the body is not known here.
        headers: {
          ...headers,
          host: this.publicUrl.host,
          'x-amz-content-sha256': 'UNSIGNED-PAYLOAD',
        },
      },
      { expiresIn, signableHeaders: new Set(Object.keys(headers)) },
    );
    const url = new URL(`${this.publicUrl.protocol}//${this.publicUrl.host}${signed.path}`);
    for (const [name, value] of Object.entries(signed.query ?? {})) {
      if (typeof value === 'string') url.searchParams.set(name, value);
    }
    return url.toString();
  }
}

/** AWS's bucket-wide transition threshold, read and written beside the lifecycle document. */
const MINIMUM_OBJECT_SIZE_HEADER = 'x-amz-transition-default-minimum-object-size';

export class MissingObjectError extends Error {
  constructor(readonly key: string) {
    super('The input file could not be read from storage');
    this.name = 'MissingObjectError';
  }
}

function isCode(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}

/**
 * A request to S3 that gets no byte for this long fails with ETIMEDOUT (and so becomes
 * UNAVAILABLE) instead of hanging on a paused or unreachable store; a slow but moving stream is
 * not cut. minio-js sets no time-out of its own, and Node's `timeout` socket option only emits
 * an event, so the agent's sockets destroy themselves.
 */
export const S3_IDLE_TIMEOUT_MS = 15_000;

function idleTimeoutAgent(https: boolean, idleTimeoutMs: number): HttpAgent {
  // `timeout` makes the agent keep the idle time-out set on every socket, reused ones too.
  const options: AgentOptions = { keepAlive: true, maxSockets: 64, timeout: idleTimeoutMs };
  const agent = (https ? new HttpsAgent(options) : new HttpAgent(options)) as HttpAgent;
  const create = agent.createConnection.bind(agent);
  agent.createConnection = ((...args: Parameters<typeof create>) => {
    const socket = create(...args) as Duplex;
    socket.on('timeout', () =>
      socket.destroy(
        Object.assign(new Error(`S3 sent nothing for ${idleTimeoutMs} ms`), {
          code: 'ETIMEDOUT',
        }),
      ),
    );
    return socket;
  }) as typeof create;
  return agent;
}
