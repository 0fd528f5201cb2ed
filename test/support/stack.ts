import { randomBytes } from 'node:crypto';
import { freePort } from '@tamp/scripts/infra/launcher';
import {
  type ProcessName,
  type RunningServices,
  type ServicesOptions,
  startServices,
} from '@tamp/scripts/stack/services';
import { isolatedInfrastructure } from './infrastructure';

export interface ApiResponse<Data = unknown> {
  status: number;
  headers: Headers;
  body: {
    success: boolean;
    data?: Data;
    error?: { code: string; message: string; details?: unknown };
  };
}

export interface TestAccount {
  accountId: string;
  apiKey: string;
  webhookSecret: string;
}

/**
 * Every Tamp service as its own process (or all in one, `processes: 'single'`), against this
 * test file's private database, bucket and NATS namespace on the shared servers: the system as
 * an API client meets it.
 */
export async function startTestStack(
  options: Pick<ServicesOptions, 'runtime' | 'processes'> & { env?: Record<string, string> } = {},
) {
  const infrastructure = isolatedInfrastructure();
  const [publicPort, adminPort] = await Promise.all([freePort(), freePort()]);
  const adminToken = randomBytes(16).toString('hex');
  const logs = new Map<ProcessName, string[]>();
  const services: RunningServices = await startServices({
    infrastructure,
    publicPort,
    adminPort,
    runtime: options.runtime ?? 'source',
    processes: options.processes,
    env: {
      ...infrastructure.serviceEnv,
      ADMIN_TOKEN: adminToken,
      LOG_LEVEL: 'warn',
      JOB_RETRY_BASE_MS: '200',
      ...options.env,
    },
    onLine: (service, line) => {
      const lines = logs.get(service) ?? [];
      lines.push(line);
      if (lines.length > 200) lines.shift();
      logs.set(service, lines);
    },
  });
  try {
    await services.waitUntilReady(120_000);
  } catch (error) {
    await services.stop();
    throw new Error(`${(error as Error).message}\n${dumpLogs(logs)}`);
  }

  return {
    infrastructure,
    services,
    publicUrl: services.publicUrl,
    adminUrl: services.adminUrl,
    adminToken,
    logs: () => dumpLogs(logs),
    api: <Data = unknown>(method: string, path: string, init?: ApiRequestInit) =>
      apiRequest<Data>(services.publicUrl, method, path, init),
    admin: <Data = unknown>(method: string, path: string, body?: unknown) =>
      apiRequest<Data>(services.adminUrl, method, path, { body, token: adminToken }),
    async createAccount(
      body: { plan?: 'free' | 'pro'; credits?: number; webhookUrl?: string } = {},
    ): Promise<TestAccount> {
      const response = await apiRequest<TestAccount>(services.adminUrl, 'POST', '/admin/accounts', {
        body,
        token: adminToken,
      });
      if (response.status !== 201 && response.status !== 200) {
        throw new Error(
          `account creation failed: ${response.status} ${JSON.stringify(response.body)}`,
        );
      }
      return response.body.data!;
    },
    stop: () => services.stop(),
  };
}

/** A request's JSON body, bearer token and further headers. */
interface ApiRequestInit {
  body?: unknown;
  token?: string;
  headers?: Record<string, string>;
}

/** One call to a Tamp API (public or admin) as a client makes it, its JSON answer parsed. */
export async function apiRequest<Data>(
  baseUrl: string,
  method: string,
  path: string,
  init: ApiRequestInit = {},
): Promise<ApiResponse<Data>> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.token !== undefined) headers.authorization = `Bearer ${init.token}`;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    body: text === '' ? {} : JSON.parse(text),
  };
}

/**
 * What the helpers below need of a running Tamp: its public API, and its logs for a failure's
 * message. A TestStack is one; so is a Tamp in containers (test/containers).
 */
export interface PublicApi {
  api: TestStack['api'];
  logs(): string;
}

export type TestStack = Awaited<ReturnType<typeof startTestStack>>;

function dumpLogs(logs: Map<ProcessName, string[]>): string {
  return [...logs]
    .map(([service, lines]) =>
      lines
        .slice(-30)
        .map((line) => `${service} | ${line}`)
        .join('\n'),
    )
    .join('\n');
}

/** Long-polls a job until it is completed or failed (at most ten 20-second polls). */
export async function finishedJob<Job extends { status: string }>(
  stack: PublicApi,
  apiKey: string,
  id: string,
): Promise<Job> {
  for (let round = 0; round < 10; round++) {
    const read = await stack.api<Job>('GET', `/v1/jobs/${id}?wait=20`, { token: apiKey });
    const job = read.body.data;
    if (job?.status === 'completed' || job?.status === 'failed') return job;
  }
  throw new Error(`job ${id} did not finish\n${stack.logs()}`);
}

/** POST /v1/upload then PUT the bytes exactly as a client would; returns the upload id. */
export async function uploadFile(
  stack: PublicApi,
  apiKey: string,
  filename: string,
  bytes: Buffer,
): Promise<string> {
  const created = await stack.api<{ id: string; uploadUrl: string; contentType: string }>(
    'POST',
    '/v1/upload',
    {
      token: apiKey,
      body: { filename, size: bytes.length },
    },
  );
  if (created.status !== 200)
    throw new Error(`upload failed: ${created.status} ${JSON.stringify(created.body)}`);
  const { id, uploadUrl, contentType } = created.body.data!;
  const put = await fetch(uploadUrl, {
    method: 'PUT',
    headers: { 'content-type': contentType },
    body: bytes,
  });
  if (put.status !== 200) throw new Error(`PUT failed: ${put.status} ${await put.text()}`);
  return id;
}
