import { STORAGE_LIFECYCLE_RULES } from '@tamp/proto';
import { Client } from 'minio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import { loadConfig, s3Env, serviceEnv } from '../src/config';
import { createLogger } from '../src/logger';
import { createMetricsRegistry } from '../src/metrics';
import { ObjectStore } from '../src/object-store';
import { OpsServer } from '../src/ops-server';
import { ServiceContext } from '../src/service';
import { Shutdown } from '../src/shutdown';
import { bucketCreations, lifecycleWrites, startRecordingProxy } from './support/recording-proxy';

const infrastructure = isolatedInfrastructure();
const endpoint = new URL(infrastructure.s3.endpoint);
/** Stands for the operator's own tools: writes rules the way any S3 client would. */
const operator = new Client({
  endPoint: endpoint.hostname,
  port: Number(endpoint.port),
  useSSL: false,
  accessKey: infrastructure.s3.accessKey,
  secretKey: infrastructure.s3.secretKey,
  region: infrastructure.s3.region,
  pathStyle: true,
});

/** Every store in this file talks to MinIO through the proxy, which records what was sent. */
let proxy: Awaited<ReturnType<typeof startRecordingProxy>>;
beforeAll(async () => {
  proxy = await startRecordingProxy(infrastructure.s3.endpoint);
});
afterAll(() => proxy?.close());

let buckets = 0;
function newBucket(): string {
  buckets += 1;
  return `${infrastructure.bucket}-${buckets}`;
}

function storeFor(bucket: string): ObjectStore {
  return new ObjectStore({ ...infrastructure.s3, endpoint: proxy.endpoint, bucket });
}

/** The requests sent for one bucket while `action` ran. */
async function sentFor(bucket: string, action: () => Promise<unknown>) {
  const from = proxy.requests.length;
  await action();
  return proxy.requests
    .slice(from)
    .filter(
      (each) =>
        each.url === `/${bucket}` ||
        each.url.startsWith(`/${bucket}/`) ||
        each.url.startsWith(`/${bucket}?`),
    );
}

/** What an operator's tool writes. (minio-js's types require a Prefix beside Filter.And.) */
function setRules(bucket: string, configuration: { Rule: object[] }): Promise<void> {
  return operator.setBucketLifecycle(bucket, configuration as never);
}

/** An operator's rule with more in it than Tamp's rules have, and a prefix that looks numeric. */
const OPERATOR_RULE = {
  ID: 'archive-exports',
  Status: 'Enabled',
  Filter: { And: { Prefix: '0010', Tag: [{ Key: 'kind', Value: 'export' }] } },
  Expiration: { Days: 30 },
};

async function operatorRules(bucket: string): Promise<unknown[]> {
  const configuration = await operator.getBucketLifecycle(bucket);
  const rules = configuration?.Rule ?? [];
  return (Array.isArray(rules) ? rules : [rules]).filter(
    (rule: { ID?: string }) => !rule.ID?.startsWith('tamp-'),
  );
}

const byId = <Rule extends { id: string }>(rules: readonly Rule[]) =>
  [...rules].sort((a, b) => a.id.localeCompare(b.id));
const TAMP_RULES = byId([...STORAGE_LIFECYCLE_RULES]);

describe('provisioning the bucket (against MinIO)', () => {
  it("keeps an operator's own rule and adds Tamp's", async () => {
    const bucket = newBucket();
    await operator.makeBucket(bucket);
    await setRules(bucket, { Rule: [OPERATOR_RULE] });
    const before = await operatorRules(bucket);
    expect(before).toHaveLength(1);

    const store = storeFor(bucket);
    expect(await store.provision(STORAGE_LIFECYCLE_RULES)).toEqual({
      createdBucket: false,
      lifecycle: 'written',
    });

    expect(await operatorRules(bucket)).toEqual(before);
    const rules = await store.lifecycleRules();
    expect(byId(rules.filter((rule) => rule.id.startsWith('tamp-')))).toEqual(TAMP_RULES);
    expect(rules.find((rule) => rule.id === 'archive-exports')).toEqual({
      id: 'archive-exports',
      prefix: '0010',
      days: 30,
    });
  });

  it('sends no write at all on a second start', async () => {
    const bucket = newBucket();
    const first = storeFor(bucket);
    const created = await sentFor(bucket, () => first.provision(STORAGE_LIFECYCLE_RULES));
    expect(bucketCreations(created)).toHaveLength(1);
    expect(lifecycleWrites(created)).toHaveLength(1);
    await setRules(bucket, {
      Rule: [
        OPERATOR_RULE,
        // Tamp's rules as they were written, in another order.
        ...[...STORAGE_LIFECYCLE_RULES].reverse().map((rule) => ({
          ID: rule.id,
          Status: 'Enabled',
          Filter: { Prefix: rule.prefix },
          Expiration: { Days: rule.days },
        })),
      ],
    });
    const rulesBefore = await first.lifecycleRules();

    const second = storeFor(bucket);
    let outcome: unknown;
    const sent = await sentFor(bucket, async () => {
      outcome = await second.provision(STORAGE_LIFECYCLE_RULES);
    });
    expect(outcome).toEqual({ createdBucket: false, lifecycle: 'unchanged' });
    // Observed on the wire: a HeadBucket and a GetBucketLifecycleConfiguration, nothing else.
    expect(sent.map((each) => each.method).sort()).toEqual(['GET', 'HEAD']);
    expect(lifecycleWrites(sent)).toEqual([]);
    expect(await second.lifecycleRules()).toEqual(rulesBefore);
  });

  it("replaces Tamp's outdated and pre-prefix rules, and no one else's", async () => {
    const bucket = newBucket();
    await operator.makeBucket(bucket);
    const expiry = (ID: string, Prefix: string, Days: number) => ({
      ID,
      Status: 'Enabled',
      Filter: { Prefix },
      Expiration: { Days },
    });
    await setRules(bucket, {
      Rule: [
        // Tamp's rules as every start wrote them before they had the prefix.
        expiry('expire-uploads', 'uploads/', 2),
        expiry('expire-inputs', 'inputs/', 2),
        expiry('expire-results', 'results/', 8),
        // One of Tamp's with another expiry (an older version's), and the operator's own.
        expiry('tamp-expire-results', 'results/', 30),
        expiry('expire-logs', 'logs/', 5),
      ],
    });
    const store = storeFor(bucket);
    expect((await store.provision(STORAGE_LIFECYCLE_RULES)).lifecycle).toBe('written');
    expect(byId(await store.lifecycleRules())).toEqual(
      byId([...TAMP_RULES, { id: 'expire-logs', prefix: 'logs/', days: 5 }]),
    );
  });

  it('removes only its own rules when it wants none, and the configuration once it is empty', async () => {
    const bucket = newBucket();
    const store = storeFor(bucket);
    await store.provision(STORAGE_LIFECYCLE_RULES);
    expect(await store.provision([])).toEqual({ createdBucket: false, lifecycle: 'removed' });
    expect(await store.lifecycleRules()).toEqual([]);
    expect((await store.provision([])).lifecycle).toBe('unchanged');

    await setRules(bucket, { Rule: [OPERATOR_RULE] });
    await store.provision(STORAGE_LIFECYCLE_RULES);
    expect((await store.provision([])).lifecycle).toBe('written');
    expect((await store.lifecycleRules()).map((rule) => rule.id)).toEqual(['archive-exports']);
  });

  it('ends with every rule when several replicas start at once', async () => {
    const bucket = newBucket();
    await operator.makeBucket(bucket);
    await setRules(bucket, { Rule: [OPERATOR_RULE] });
    const before = await operatorRules(bucket);
    const outcomes = await Promise.all(
      [1, 2, 3, 4].map(() => storeFor(bucket).provision(STORAGE_LIFECYCLE_RULES)),
    );
    expect(outcomes.some((outcome) => outcome.lifecycle === 'written')).toBe(true);
    expect(await operatorRules(bucket)).toEqual(before);
    const rules = await storeFor(bucket).lifecycleRules();
    expect(byId(rules.filter((rule) => rule.id.startsWith('tamp-')))).toEqual(TAMP_RULES);
    // And a bucket created by the race: every replica succeeds, one made it.
    const fresh = newBucket();
    const created = await Promise.all(
      [1, 2, 3].map(() => storeFor(fresh).provision(STORAGE_LIFECYCLE_RULES)),
    );
    expect(created.filter((outcome) => outcome.createdBucket).length).toBeGreaterThanOrEqual(1);
    expect(byId(await storeFor(fresh).lifecycleRules())).toEqual(TAMP_RULES);
  });
});

describe('a service opening the bucket', () => {
  const logger = createLogger('object-store-test', 'silent');
  const metrics = createMetricsRegistry('object-store-test');
  const schema = z.object({ ...serviceEnv, ...s3Env });
  function context(bucket: string, manage: 'true' | 'false') {
    const config = loadConfig('object-store-test', schema, {
      ...infrastructure.serviceEnv,
      S3_ENDPOINT: proxy.endpoint,
      S3_BUCKET: bucket,
      S3_MANAGE_BUCKET: manage,
    });
    const shutdown = new Shutdown(logger, 1_000);
    return {
      config,
      context: new ServiceContext(
        'object-store-test',
        config,
        logger,
        metrics,
        new OpsServer(metrics),
        shutdown,
      ),
    };
  }

  it('provisions it by default', async () => {
    const bucket = newBucket();
    const { config, context: service } = context(bucket, 'true');
    expect(loadConfig('x', schema, { ...infrastructure.serviceEnv }).S3_MANAGE_BUCKET).toBe(true);
    await service.openObjectStore(config);
    expect(await operator.bucketExists(bucket)).toBe(true);
    expect(byId(await storeFor(bucket).lifecycleRules())).toEqual(TAMP_RULES);
  });

  it('with S3_MANAGE_BUCKET=false, creates nothing and refuses to start without the bucket', async () => {
    const bucket = newBucket();
    const { config, context: service } = context(bucket, 'false');
    expect(config.S3_MANAGE_BUCKET).toBe(false);
    let error: unknown;
    const sent = await sentFor(bucket, async () => {
      error = await service.openObjectStore(config).then(
        () => undefined,
        (caught: unknown) => caught,
      );
    });
    expect((error as Error).message).toBe(
      `S3 bucket "${bucket}" does not exist at ${proxy.endpoint}. With S3_MANAGE_BUCKET=false ` +
        'the services do not create it: create the bucket (and its lifecycle rules) first, or ' +
        'set S3_MANAGE_BUCKET=true',
    );
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.every((each) => each.method === 'HEAD')).toBe(true);
    expect(await operator.bucketExists(bucket)).toBe(false);
  });

  it('with S3_MANAGE_BUCKET=false, opens an existing bucket without touching its rules', async () => {
    const bucket = newBucket();
    await operator.makeBucket(bucket);
    await setRules(bucket, { Rule: [OPERATOR_RULE] });
    const before = await operatorRules(bucket);
    const { config, context: service } = context(bucket, 'false');
    let store: ObjectStore | undefined;
    const sent = await sentFor(bucket, async () => {
      store = await service.openObjectStore(config);
    });
    expect(sent.map((each) => each.method)).toEqual(['HEAD']);
    expect(await operatorRules(bucket)).toEqual(before);
    await store?.putBuffer('uploads/acct_1/upl_1', 'bytes', 'text/plain');
    expect((await store?.getBuffer('uploads/acct_1/upl_1'))?.toString()).toBe('bytes');
  });
});
