import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { STORAGE_LIFECYCLE_RULES } from '@tamp/proto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import { ObjectStore } from '../src/object-store';

/**
 * Stores without static keys take their credentials from the AWS SDK's standard chain. Against
 * MinIO the chain's first link is what can be exercised: AWS_ACCESS_KEY_ID /
 * AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN) in the environment. The other links (IRSA's token
 * file, Pod Identity, instance metadata) are the SDK's own and need AWS.
 */
const infrastructure = isolatedInfrastructure();
const { accessKey, secretKey, ...s3 } = infrastructure.s3;
const bucket = infrastructure.bucket;
/** Provisions the bucket and writes fixtures with the root keys, as before. */
const withKeys = new ObjectStore({ ...infrastructure.s3, bucket });

/** Variables the chain reads; each test sets its own and they are put back after it. */
const CHAIN_VARIABLES = [
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_CREDENTIAL_EXPIRATION',
  // Set, it makes the chain skip the environment's keys for a profile.
  'AWS_PROFILE',
  // Where a profile would be read from (not a developer's ~/.aws), and no instance metadata.
  'AWS_CONFIG_FILE',
  'AWS_SHARED_CREDENTIALS_FILE',
  'AWS_EC2_METADATA_DISABLED',
] as const;
const saved = Object.fromEntries(CHAIN_VARIABLES.map((name) => [name, process.env[name]]));

function useChainEnvironment(variables: Partial<Record<(typeof CHAIN_VARIABLES)[number], string>>) {
  for (const name of CHAIN_VARIABLES) delete process.env[name];
  Object.assign(process.env, {
    AWS_CONFIG_FILE: '/nonexistent/aws-config',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/aws-credentials',
    AWS_EC2_METADATA_DISABLED: 'true',
    ...variables,
  });
}

afterEach(() => {
  for (const name of CHAIN_VARIABLES) {
    const value = saved[name];
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

beforeAll(async () => {
  await withKeys.provision(STORAGE_LIFECYCLE_RULES);
});

interface TemporaryCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
  expiration: string;
}

/** MinIO's STS AssumeRole with the root keys: temporary keys and their session token. */
async function assumeRole(): Promise<TemporaryCredentials> {
  const endpoint = new URL(s3.endpoint);
  const body = new URLSearchParams({
    Action: 'AssumeRole',
    Version: '2011-06-15',
    DurationSeconds: '900',
  }).toString();
  const signer = new SignatureV4({
    service: 'sts',
    region: s3.region,
    credentials: { accessKeyId: accessKey, secretAccessKey: secretKey },
    sha256: Hash.bind(null, 'sha256'),
  });
  const signed = await signer.sign({
    method: 'POST',
    protocol: endpoint.protocol,
    hostname: endpoint.hostname,
    port: Number(endpoint.port),
    path: '/',
    query: {},
    headers: {
      host: endpoint.host,
      'content-type': 'application/x-www-form-urlencoded; charset=utf-8',
    },
    body,
  });
  const response = await fetch(new URL('/', endpoint), {
    method: 'POST',
    headers: signed.headers,
    body,
  });
  const xml = await response.text();
  expect(response.status, xml).toBe(200);
  const field = (name: string) => {
    const value = new RegExp(`<${name}>([^<]+)</${name}>`).exec(xml)?.[1];
    expect(value, `${name} in ${xml}`).toBeDefined();
    return value!;
  };
  return {
    accessKeyId: field('AccessKeyId'),
    secretAccessKey: field('SecretAccessKey'),
    sessionToken: field('SessionToken'),
    expiration: field('Expiration'),
  };
}

describe('an object store without static keys (the AWS credential chain, against MinIO)', () => {
  it('reads and writes, and signs uploads, with the keys of AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY', async () => {
    useChainEnvironment({ AWS_ACCESS_KEY_ID: accessKey, AWS_SECRET_ACCESS_KEY: secretKey });
    const store = new ObjectStore({ ...s3, bucket });

    await store.ping();
    await store.putBuffer('inputs/acct_1/chain.txt', 'from the chain', 'text/plain');
    expect((await store.getBuffer('inputs/acct_1/chain.txt')).toString()).toBe('from the chain');

    const url = await store.presignUpload(
      'uploads/acct_1/upl_chain',
      { type: 'image/png', length: 'png bytes'.length },
      900,
    );
    const params = new URL(url).searchParams;
    expect(params.get('X-Amz-Credential')).toMatch(new RegExp(`^${accessKey}/`));
    // Long-lived keys have no session token to carry.
    expect(params.has('X-Amz-Security-Token')).toBe(false);
    const put = await fetch(url, {
      method: 'PUT',
      headers: { 'content-type': 'image/png' },
      body: 'png bytes',
    });
    expect(put.status, await put.text()).toBe(200);
    expect((await withKeys.stat('uploads/acct_1/upl_chain'))?.contentType).toBe('image/png');
  });

  it('carries the session token of temporary credentials: presigned URLs and requests (MinIO STS)', async () => {
    const temporary = await assumeRole();
    useChainEnvironment({
      AWS_ACCESS_KEY_ID: temporary.accessKeyId,
      AWS_SECRET_ACCESS_KEY: temporary.secretAccessKey,
      AWS_SESSION_TOKEN: temporary.sessionToken,
    });
    await withKeys.putBuffer('results/acct_1/job_1/result.txt', 'temporary', 'text/plain');
    const store = new ObjectStore({ ...s3, bucket });

    const url = new URL(
      await store.presignDownload('results/acct_1/job_1/result.txt', 'result.txt', 600),
    );
    expect(url.searchParams.get('X-Amz-Credential')).toMatch(
      new RegExp(`^${temporary.accessKeyId}/`),
    );
    expect(url.searchParams.get('X-Amz-Security-Token')).toBe(temporary.sessionToken);
    const download = await fetch(url);
    expect(download.status).toBe(200);
    expect(await download.text()).toBe('temporary');

    // The token is what makes the temporary keys valid: the same URL without it is refused.
    const withoutToken = new URL(url);
    withoutToken.searchParams.delete('X-Amz-Security-Token');
    const refused = await fetch(withoutToken);
    expect(refused.status).toBe(403);

    // minio-js sends it too (x-amz-security-token) on the store's own requests.
    await store.putBuffer('results/acct_1/job_1/again.txt', 'by the store', 'text/plain');
    expect((await store.getBuffer('results/acct_1/job_1/again.txt')).toString()).toBe(
      'by the store',
    );
  });

  it('moves to refreshed credentials once those it holds are about to expire', async () => {
    const first = await assumeRole();
    // Within five minutes of expiring: the chain hands them out while it fetches new ones.
    const expiresSoon = new Date(Date.now() + 120_000).toISOString();
    useChainEnvironment({
      AWS_ACCESS_KEY_ID: first.accessKeyId,
      AWS_SECRET_ACCESS_KEY: first.secretAccessKey,
      AWS_SESSION_TOKEN: first.sessionToken,
      AWS_CREDENTIAL_EXPIRATION: expiresSoon,
    });
    await withKeys.putBuffer('results/acct_1/job_2/result.txt', 'refreshed', 'text/plain');
    const store = new ObjectStore({ ...s3, bucket });
    const tokenOf = async () =>
      new URL(
        await store.presignDownload('results/acct_1/job_2/result.txt', 'result.txt', 60),
      ).searchParams.get('X-Amz-Security-Token');
    expect(await tokenOf()).toBe(first.sessionToken);

    // What a refresh finds now (as a web identity token file would give a new role session).
    const second = await assumeRole();
    useChainEnvironment({
      AWS_ACCESS_KEY_ID: second.accessKeyId,
      AWS_SECRET_ACCESS_KEY: second.secretAccessKey,
      AWS_SESSION_TOKEN: second.sessionToken,
      AWS_CREDENTIAL_EXPIRATION: new Date(Date.now() + 900_000).toISOString(),
    });
    await expect.poll(tokenOf, { timeout: 5_000, interval: 50 }).toBe(second.sessionToken);
    const url = await store.presignDownload('results/acct_1/job_2/result.txt', 'result.txt', 60);
    expect(await (await fetch(url)).text()).toBe('refreshed');
    // The data-plane client reads the same provider before each request.
    expect((await store.getBuffer('results/acct_1/job_2/result.txt')).toString()).toBe('refreshed');
  });

  it('says where it looked when the chain finds no credentials', async () => {
    useChainEnvironment({ AWS_PROFILE: 'tamp-test-profile-that-does-not-exist' });
    const store = new ObjectStore({ ...s3, bucket });
    await expect(store.presignDownload('results/acct_1/none.txt', 'none.txt', 60)).rejects.toThrow(
      /S3_ACCESS_KEY and S3_SECRET_KEY are not set, and the AWS credential chain/,
    );
  });

  it('refuses one static key without the other', () => {
    expect(() => new ObjectStore({ ...s3, bucket, accessKey })).toThrow(
      /both the access key and the secret key/,
    );
  });
});

describe('a process with static keys', () => {
  it('never loads the AWS SDK credential providers', async () => {
    // A process of its own: the module cache of this one is shared with the tests above.
    const script = `
      import { createRequire } from 'node:module';
      import { ObjectStore } from './services/kit/src/object-store.ts';
      const store = new ObjectStore(${JSON.stringify({ ...infrastructure.s3, bucket })});
      await store.putBuffer('inputs/acct_1/static.txt', 'static', 'text/plain');
      await store.getBuffer('inputs/acct_1/static.txt');
      await fetch(await store.presignDownload('inputs/acct_1/static.txt', 'static.txt', 60));
      const loaded = Object.keys(createRequire(import.meta.url).cache)
        .filter((path) => path.includes('@aws-sdk'));
      const chain = new ObjectStore(${JSON.stringify({ ...s3, bucket })});
      process.env.AWS_ACCESS_KEY_ID = ${JSON.stringify(accessKey)};
      process.env.AWS_SECRET_ACCESS_KEY = ${JSON.stringify(secretKey)};
      delete process.env.AWS_PROFILE;
      await chain.getBuffer('inputs/acct_1/static.txt');
      const afterChain = Object.keys(createRequire(import.meta.url).cache)
        .filter((path) => path.includes('@aws-sdk/credential-provider'));
      console.log(JSON.stringify({ loaded, afterChain: afterChain.length }));
    `;
    const root = join(import.meta.dirname, '..', '..', '..');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '--eval', script],
      { cwd: root },
    );
    const result = JSON.parse(stdout.trim().split('\n').pop()!) as {
      loaded: string[];
      afterChain: number;
    };
    expect(result.loaded).toEqual([]);
    // The check can see the SDK when it is loaded.
    expect(result.afterChain).toBeGreaterThan(0);
  });
});
