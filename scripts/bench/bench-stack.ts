import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, launchInfrastructure, type RunningInfrastructure } from '../infra/launcher';
import { provisionTools } from '../infra/provision';
import { type ProcessModel, type RunningServices, startServices } from '../stack/services';

export interface JsonResponse<Data> {
  status: number;
  body: { data?: Data; error?: { code: string } };
}

/** What the scripts need of a stack's public API: this one, or the test stack's. */
export interface ApiClient {
  api<Data = unknown>(
    method: string,
    path: string,
    init?: { body?: unknown; token?: string },
  ): Promise<JsonResponse<Data>>;
}

/** The response's `data`, or an error naming the request when it did not succeed. */
export function dataOf<Data>(response: JsonResponse<Data>, request: string): Data {
  if (response.status >= 300 || response.body.data === undefined) {
    throw new Error(`${request}: ${response.status} ${JSON.stringify(response.body)}`);
  }
  return response.body.data;
}

/** POST /v1/upload, then PUT the bytes to the presigned URL as a client would; the upload id. */
export async function uploadBytes(
  client: ApiClient,
  apiKey: string,
  filename: string,
  bytes: Buffer,
): Promise<string> {
  const { id, uploadUrl, contentType } = dataOf(
    await client.api<{ id: string; uploadUrl: string; contentType: string }>('POST', '/v1/upload', {
      token: apiKey,
      body: { filename, size: bytes.length },
    }),
    `upload of ${filename}`,
  );
  const put = await fetch(uploadUrl, {
    method: 'PUT',
    headers: { 'content-type': contentType },
    body: bytes,
  });
  if (put.status !== 200) throw new Error(`PUT ${filename}: ${put.status} ${await put.text()}`);
  return id;
}

/**
 * How long a stack is left alone before its idle cost is measured: past the sweepers' first
 * passes, the garbage collections that follow a load, and a seeded store's first reads.
 */
export const IDLE_SETTLE_MS = 30_000;

export interface BenchStack extends ApiClient {
  publicUrl: string;
  adminUrl: string;
  adminToken: string;
  /** A pro account whose rate limit is raised out of the way: benchmarks measure the work. */
  apiKey: string;
  accountId: string;
  services: RunningServices;
  /** A request to the admin API (`/admin<path>`), with the admin token. */
  admin<Data = unknown>(method: string, path: string, body?: unknown): Promise<JsonResponse<Data>>;
  /** The servers, for fault injection (pause, restart, kill by pid). */
  infrastructure: RunningInfrastructure;
  /**
   * The services' recent log lines (warnings and errors, the last few thousand) that contain
   * any of `needles`: what a failed audit prints about the jobs it names.
   */
  logsMentioning(needles: readonly string[]): string[];
  stop(): Promise<void>;
}

/** Service log lines a stack keeps: the warnings and errors of a load run with its faults. */
const KEPT_LOG_LINES = 5_000;

/** An ApiClient of the public API at `baseUrl` (a stack elsewhere: a cluster's gateway Service). */
export function apiClientOf(baseUrl: string): ApiClient {
  return { api: (method, path, init) => requestJson(`${baseUrl}${path}`, method, init) };
}

async function requestJson<Data = unknown>(
  url: string,
  method: string,
  init: { body?: unknown; token?: string } = {},
): Promise<JsonResponse<Data>> {
  const response = await fetch(url, {
    method,
    headers: {
      ...(init.token && { authorization: `Bearer ${init.token}` }),
      ...(init.body !== undefined && { 'content-type': 'application/json' }),
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? {} : JSON.parse(text) };
}

/** Fresh servers in a temp folder and every service, as `npm start` runs them, for one benchmark. */
export async function startBenchStack(options: {
  name: string;
  /**
   * What the script itself runs besides the stack (profiles or tools, see provisionTools): the
   * `stack` profile holds only what the servers and services run, so a script asks for the rest.
   */
  tools?: readonly string[];
  log: (message: string) => void;
  /** How the services run (see startServices); memory is measured on the bundle. */
  runtime?: 'source' | 'bundle';
  /** Extra variables for every service. */
  env?: Record<string, string>;
  /** A NATS cluster of this many nodes instead of one server (launchInfrastructure). */
  natsNodes?: number;
  /** Processes per service (startServices). */
  replicas?: number;
  /** A process per service, or one for all (startServices). */
  processes?: ProcessModel;
}): Promise<BenchStack> {
  const dataDir = await mkdtemp(join(tmpdir(), `tamp-bench-${options.name}-`));
  let infrastructure: RunningInfrastructure | undefined;
  let services: RunningServices | undefined;
  const stop = async () => {
    await services?.stop();
    await infrastructure?.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    await provisionTools(['stack', ...(options.tools ?? [])], options.log);
    infrastructure = await launchInfrastructure({ dataDir, env: {}, natsNodes: options.natsNodes });
    const [publicPort, adminPort] = await Promise.all([freePort(), freePort()]);
    const adminToken = randomBytes(16).toString('hex');
    const serviceLogs: string[] = [];
    services = await startServices({
      infrastructure,
      publicPort,
      adminPort,
      runtime: options.runtime ?? 'source',
      replicas: options.replicas,
      processes: options.processes,
      env: {
        ADMIN_TOKEN: adminToken,
        LOG_LEVEL: 'warn',
        PLANS_JSON: JSON.stringify({ pro: { rateLimitPerMinute: 10_000_000 } }),
        ...options.env,
      },
      onLine: (service, line) => {
        serviceLogs.push(`${service} | ${line}`);
        if (serviceLogs.length > KEPT_LOG_LINES) serviceLogs.shift();
      },
    });
    try {
      await services.waitUntilReady(180_000);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${serviceLogs.slice(-200).join('\n')}`);
    }
    const account = await requestJson<{ apiKey: string; accountId: string }>(
      `${services.adminUrl}/admin/accounts`,
      'POST',
      { body: { plan: 'pro' }, token: adminToken },
    );
    const { apiKey, accountId } = dataOf(account, 'account creation');
    const { publicUrl, adminUrl } = services;
    options.log(`stack ready at ${publicUrl}`);
    return {
      publicUrl,
      adminUrl,
      adminToken,
      apiKey,
      accountId,
      services,
      infrastructure,
      api: <Data>(method: string, path: string, init?: { body?: unknown; token?: string }) =>
        requestJson<Data>(`${publicUrl}${path}`, method, init),
      admin: <Data>(method: string, path: string, body?: unknown) =>
        requestJson<Data>(`${adminUrl}/admin${path}`, method, { body, token: adminToken }),
      logsMentioning: (needles) =>
        serviceLogs.filter((line) => needles.some((needle) => line.includes(needle))),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
