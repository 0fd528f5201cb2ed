import { execFile as execFileCallback } from 'node:child_process';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { toolPath } from '../provision';
import type { CertificateFiles } from './pki';

const execFile = promisify(execFileCallback);

/** How a client reaches and authenticates to an API server: its CA and a client certificate. */
export interface ApiCredentials {
  server: string;
  caFile: string;
  client: CertificateFiles;
}

/** A kubeconfig with everything embedded, so it can be copied elsewhere and still work. */
export async function writeKubeconfig(
  path: string,
  credentials: ApiCredentials,
  user: string,
): Promise<void> {
  const [ca, cert, key] = await Promise.all([
    readFile(credentials.caFile),
    readFile(credentials.client.cert),
    readFile(credentials.client.key),
  ]);
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'tamp-local',
        cluster: {
          server: credentials.server,
          'certificate-authority-data': ca.toString('base64'),
        },
      },
    ],
    users: [
      {
        name: user,
        user: {
          'client-certificate-data': cert.toString('base64'),
          'client-key-data': key.toString('base64'),
        },
      },
    ],
    contexts: [{ name: 'tamp-local', context: { cluster: 'tamp-local', user } }],
    'current-context': 'tamp-local',
  };
  await writeFile(`${path}.${process.pid}.tmp`, stringify(config), { mode: 0o600 });
  await rename(`${path}.${process.pid}.tmp`, path);
}

export interface ApiResponse {
  status: number;
  body: string;
}

/** One HTTPS request to the API server, bounded in time; never throws for an HTTP status. */
export async function apiRequest(
  credentials: ApiCredentials,
  method: string,
  path: string,
  options: { body?: unknown; timeoutMs?: number; contentType?: string } = {},
): Promise<ApiResponse> {
  const [ca, cert, key] = await Promise.all([
    readFile(credentials.caFile),
    readFile(credentials.client.cert),
    readFile(credentials.client.key),
  ]);
  const url = new URL(path, credentials.server);
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const outgoing = request(
      url,
      {
        method,
        ca,
        cert,
        key,
        headers: {
          accept: 'application/json',
          ...(payload === undefined
            ? {}
            : { 'content-type': options.contentType ?? 'application/json' }),
        },
        timeout: options.timeoutMs ?? 10_000,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() }),
        );
        response.on('error', reject);
      },
    );
    outgoing.on('timeout', () => outgoing.destroy(new Error(`${method} ${url} timed out`)));
    outgoing.on('error', reject);
    outgoing.end(payload);
  });
}

/** True once the API server answers /readyz with 200 (false on any error, for polling). */
export async function apiReady(credentials: ApiCredentials): Promise<boolean> {
  try {
    return (await apiRequest(credentials, 'GET', '/readyz', { timeoutMs: 2_000 })).status === 200;
  } catch {
    return false;
  }
}

/**
 * Runs the project's kubectl against a kubeconfig and returns its standard output; throws with
 * kubectl's own message when it fails. Nothing from the developer's ~/.kube is read.
 */
export async function kubectl(
  kubeconfigPath: string,
  args: string[],
  options: { input?: string; timeoutMs?: number } = {},
): Promise<string> {
  const child = execFile(toolPath('kubectl'), args, {
    env: { PATH: process.env.PATH ?? '', HOME: '/nonexistent', KUBECONFIG: kubeconfigPath },
    maxBuffer: 64 * 1024 * 1024,
    timeout: options.timeoutMs ?? 120_000,
  });
  if (options.input !== undefined) child.child.stdin?.end(options.input);
  try {
    return (await child).stdout;
  } catch (error) {
    const failure = error as { stderr?: string; message: string };
    throw new Error(`kubectl ${args.join(' ')} failed: ${failure.stderr || failure.message}`);
  }
}
