import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The admin API refused or failed, or cannot be reached: exit code 1. */
export class AdminApiError extends Error {}

interface Connection {
  url: string;
  token: string;
}

/**
 * Where the admin API is and its token: TAMP_ADMIN_URL and ADMIN_TOKEN, else the local stack's
 * <data>/stack.json and <data>/admin-token (data = TAMP_DATA_DIR or .data).
 */
function connection(): Connection {
  const dataDir = resolve(PROJECT_ROOT, process.env.TAMP_DATA_DIR ?? '.data');
  let url = process.env.TAMP_ADMIN_URL;
  if (url === undefined || url === '') {
    const stackFile = join(dataDir, 'stack.json');
    if (!existsSync(stackFile)) {
      throw new AdminApiError(
        `no admin URL: ${stackFile} is missing (is \`npm start\` running?); or set TAMP_ADMIN_URL`,
      );
    }
    url = (JSON.parse(readFileSync(stackFile, 'utf8')) as { adminUrl?: string }).adminUrl;
    if (url === undefined) throw new AdminApiError(`${stackFile} has no adminUrl`);
  }
  let token = process.env.ADMIN_TOKEN;
  if (token === undefined || token === '') {
    const tokenFile = join(dataDir, 'admin-token');
    if (!existsSync(tokenFile)) {
      throw new AdminApiError(`no admin token: ${tokenFile} is missing; or set ADMIN_TOKEN`);
    }
    token = readFileSync(tokenFile, 'utf8').trim();
  }
  return { url: url.replace(/\/$/, ''), token };
}

/**
 * The public base URL customers reach: TAMP_PUBLIC_URL, else the local stack's (stack.json);
 * null when neither is known.
 */
export function publicBaseUrl(): string | null {
  const fromEnvironment = process.env.TAMP_PUBLIC_URL;
  if (fromEnvironment !== undefined && fromEnvironment !== '')
    return fromEnvironment.replace(/\/$/, '');
  const stackFile = join(resolve(PROJECT_ROOT, process.env.TAMP_DATA_DIR ?? '.data'), 'stack.json');
  if (!existsSync(stackFile)) return null;
  const { publicUrl } = JSON.parse(readFileSync(stackFile, 'utf8')) as { publicUrl?: string };
  return publicUrl?.replace(/\/$/, '') ?? null;
}

/** One admin API call; the envelope's `data`, or an AdminApiError with the error code. */
export async function callAdminApi<Data>(
  method: string,
  path: string,
  body?: unknown,
): Promise<Data> {
  const { url, token } = connection();
  let response: Response;
  try {
    response = await fetch(`${url}/admin${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (error) {
    throw new AdminApiError(
      `cannot reach the admin API at ${url}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const text = await response.text();
  let parsed: {
    success?: boolean;
    data?: unknown;
    error?: { code: string; message: string; details?: unknown };
  };
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new AdminApiError(`admin API answered HTTP ${response.status} with a non-JSON body`);
  }
  if (!response.ok || parsed.success !== true) {
    const error = parsed.error;
    const details =
      error?.details === undefined ? '' : `\n${JSON.stringify(error.details, null, 2)}`;
    throw new AdminApiError(
      `${error?.code ?? `HTTP ${response.status}`}: ${error?.message ?? 'request failed'}${details}`,
    );
  }
  return parsed.data as Data;
}
