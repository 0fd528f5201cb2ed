// The operators' CLI over the admin API (docs/decisions.md#accounts-and-keys):
//   npm run --silent admin -- account create [--plan free|pro] [--credits N] [--webhook-url URL] --json
//   npm run --silent admin -- account update <accountId> [--plan …] [--webhook-url URL|--no-webhook-url]
//       [--billing-cycle-anchor <ISO instant>|--no-billing-cycle-anchor]
//   npm run --silent admin -- account rotate-webhook-secret <accountId> [--grace-period-seconds N] --json
//   npm run --silent admin -- credits add <accountId> <N>
//   npm run --silent admin -- key create <accountId> --json | key revoke <keyId> | key list <accountId>
//   npm run --silent admin -- deliveries <jobId> | redeliver <jobId> [--event job.completed|job.failed]
// Against the local stack it needs nothing: the admin URL comes from <data>/stack.json and the
// token from <data>/admin-token (data = TAMP_DATA_DIR or .data); TAMP_ADMIN_URL and
// ADMIN_TOKEN override both. Exit codes: 0 ok, 1 the API refused or failed, 2 usage errors.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

const USAGE = `usage: npm run --silent admin -- <command>
  account create [--plan free|pro] [--credits N] [--webhook-url URL]
                 [--billing-cycle-anchor ISO] [--json]
  account update <accountId> [--plan free|pro] [--webhook-url URL | --no-webhook-url]
                 [--billing-cycle-anchor ISO | --no-billing-cycle-anchor] [--json]
  account show <accountId> [--json]
  account rotate-webhook-secret <accountId> [--grace-period-seconds N] [--json]
  credits add <accountId> <N> [--json]
  key create <accountId> [--json]
  key revoke <keyId> [--json]
  key list <accountId> [--json]
  deliveries <jobId> [--json]
  redeliver <jobId> [--event job.completed|job.failed] [--json]
--billing-cycle-anchor: an ISO-8601 instant, not in the future (e.g. 2025-01-15T00:00:00Z);
  periods are then 30-day cycles from it instead of calendar months.
rotate-webhook-secret: the previous secret keeps signing for --grace-period-seconds
  (default: billing's WEBHOOK_SECRET_GRACE_MS, 24 h; 0 retires it at once).
environment: TAMP_ADMIN_URL, ADMIN_TOKEN, TAMP_DATA_DIR (default .data)`;

class UsageError extends Error {}
class ApiError extends Error {}

interface Connection {
  url: string;
  token: string;
}

function connection(): Connection {
  const dataDir = resolve(PROJECT_ROOT, process.env.TAMP_DATA_DIR ?? '.data');
  let url = process.env.TAMP_ADMIN_URL;
  if (url === undefined || url === '') {
    const stackFile = join(dataDir, 'stack.json');
    if (!existsSync(stackFile)) {
      throw new ApiError(
        `no admin URL: ${stackFile} is missing (is \`npm start\` running?); or set TAMP_ADMIN_URL`,
      );
    }
    url = (JSON.parse(readFileSync(stackFile, 'utf8')) as { adminUrl?: string }).adminUrl;
    if (url === undefined) throw new ApiError(`${stackFile} has no adminUrl`);
  }
  let token = process.env.ADMIN_TOKEN;
  if (token === undefined || token === '') {
    const tokenFile = join(dataDir, 'admin-token');
    if (!existsSync(tokenFile)) {
      throw new ApiError(`no admin token: ${tokenFile} is missing; or set ADMIN_TOKEN`);
    }
    token = readFileSync(tokenFile, 'utf8').trim();
  }
  return { url: url.replace(/\/$/, ''), token };
}

async function call(method: string, path: string, body?: unknown): Promise<unknown> {
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
    throw new ApiError(
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
    throw new ApiError(`admin API answered HTTP ${response.status} with a non-JSON body`);
  }
  if (!response.ok || parsed.success !== true) {
    const error = parsed.error;
    const details =
      error?.details === undefined ? '' : `\n${JSON.stringify(error.details, null, 2)}`;
    throw new ApiError(
      `${error?.code ?? `HTTP ${response.status}`}: ${error?.message ?? 'request failed'}${details}`,
    );
  }
  return parsed.data;
}

function positiveInteger(value: string | undefined, name: string, allowZero = false): number {
  if (value === undefined || !/^\d+$/.test(value)) {
    throw new UsageError(`${name} must be a ${allowZero ? 'non-negative' : 'positive'} integer`);
  }
  const number = Number(value);
  if (!Number.isSafeInteger(number) || (!allowZero && number === 0)) {
    throw new UsageError(`${name} must be a ${allowZero ? 'non-negative' : 'positive'} integer`);
  }
  return number;
}

function plan(value: string | undefined): 'free' | 'pro' | undefined {
  if (value === undefined) return undefined;
  if (value !== 'free' && value !== 'pro') throw new UsageError('--plan must be free or pro');
  return value;
}

function webhookUrl(value: string): string {
  try {
    const url = new URL(value);
    if (url.protocol === 'http:' || url.protocol === 'https:') return value;
  } catch {}
  throw new UsageError('--webhook-url must be an absolute http(s) URL');
}

function one(positionals: string[], count: number, names: string): string[] {
  if (positionals.length !== count) throw new UsageError(`expected ${names}`);
  return positionals;
}

type Output = { json: unknown; text: string };

async function run(argv: string[]): Promise<Output> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      plan: { type: 'string' },
      credits: { type: 'string' },
      'webhook-url': { type: 'string' },
      'no-webhook-url': { type: 'boolean' },
      'billing-cycle-anchor': { type: 'string' },
      'no-billing-cycle-anchor': { type: 'boolean' },
      'grace-period-seconds': { type: 'string' },
      event: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) return { json: undefined, text: USAGE };
  const [group, action, ...rest] = positionals;
  const command = [group, action].join(' ');
  const enc = encodeURIComponent;

  if (group === 'account' && action === 'create') {
    one(rest, 0, 'no arguments');
    const data = (await call('POST', '/accounts', {
      plan: plan(values.plan) ?? 'free',
      ...(values.credits !== undefined && {
        credits: positiveInteger(values.credits, '--credits', true),
      }),
      ...(values['webhook-url'] !== undefined && { webhookUrl: webhookUrl(values['webhook-url']) }),
      // Validated by the API (format, and not in the future): one rule, in one place.
      ...(values['billing-cycle-anchor'] !== undefined && {
        billingCycleAnchor: values['billing-cycle-anchor'],
      }),
    })) as { accountId: string; apiKey: string; webhookSecret: string };
    const result = {
      accountId: data.accountId,
      apiKey: data.apiKey,
      webhookSecret: data.webhookSecret,
    };
    return {
      json: result,
      text: `account ${result.accountId}\napi key ${result.apiKey}\nwebhook secret ${result.webhookSecret}\n(the API key is shown once)`,
    };
  }
  if (group === 'account' && action === 'update') {
    const [accountId] = one(rest, 1, '<accountId>');
    if (values['webhook-url'] !== undefined && values['no-webhook-url'] === true) {
      throw new UsageError('use either --webhook-url or --no-webhook-url');
    }
    if (
      values['billing-cycle-anchor'] !== undefined &&
      values['no-billing-cycle-anchor'] === true
    ) {
      throw new UsageError('use either --billing-cycle-anchor or --no-billing-cycle-anchor');
    }
    const body = {
      ...(values.plan !== undefined && { plan: plan(values.plan) }),
      ...(values['webhook-url'] !== undefined && { webhookUrl: webhookUrl(values['webhook-url']) }),
      ...(values['no-webhook-url'] === true && { webhookUrl: null }),
      ...(values['billing-cycle-anchor'] !== undefined && {
        billingCycleAnchor: values['billing-cycle-anchor'],
      }),
      ...(values['no-billing-cycle-anchor'] === true && { billingCycleAnchor: null }),
    };
    if (Object.keys(body).length === 0) {
      throw new UsageError(
        'nothing to update: give --plan, --webhook-url, --no-webhook-url, --billing-cycle-anchor or --no-billing-cycle-anchor',
      );
    }
    const data = (await call('PATCH', `/accounts/${enc(accountId!)}`, body)) as {
      accountId: string;
      plan: string;
      webhookUrl: string | null;
      billingCycleAnchor: string | null;
    };
    const cycle =
      data.billingCycleAnchor === null ? '' : `, 30-day cycles from ${data.billingCycleAnchor}`;
    return {
      json: data,
      text: `account ${data.accountId}: plan ${data.plan}, webhook ${data.webhookUrl ?? '(none)'}${cycle}`,
    };
  }
  if (group === 'account' && action === 'show') {
    const [accountId] = one(rest, 1, '<accountId>');
    const data = await call('GET', `/accounts/${enc(accountId!)}`);
    return { json: data, text: JSON.stringify(data, null, 2) };
  }
  if (group === 'account' && action === 'rotate-webhook-secret') {
    const [accountId] = one(rest, 1, '<accountId>');
    const graceSeconds = values['grace-period-seconds'];
    const data = (await call(
      'POST',
      `/accounts/${enc(accountId!)}/webhook-secret/rotate`,
      graceSeconds === undefined
        ? {}
        : { gracePeriodSeconds: positiveInteger(graceSeconds, '--grace-period-seconds', true) },
    )) as { webhookSecret: string; previousValidUntil: string };
    const result = {
      webhookSecret: data.webhookSecret,
      previousValidUntil: data.previousValidUntil,
    };
    return {
      json: result,
      text: `webhook secret ${result.webhookSecret}\n(the previous secret also signs deliveries until ${result.previousValidUntil})`,
    };
  }
  if (group === 'credits' && action === 'add') {
    const [accountId, amount] = one(rest, 2, '<accountId> <N>');
    const data = (await call('POST', `/accounts/${enc(accountId!)}/credits`, {
      credits: positiveInteger(amount, 'N'),
    })) as { accountId: string; grantedCredits: number };
    return {
      json: data,
      text: `account ${data.accountId}: ${data.grantedCredits} granted credits`,
    };
  }
  if (group === 'key' && action === 'create') {
    const [accountId] = one(rest, 1, '<accountId>');
    const data = (await call('POST', `/accounts/${enc(accountId!)}/keys`)) as {
      keyId: string;
      apiKey: string;
    };
    const result = { keyId: data.keyId, apiKey: data.apiKey };
    return { json: result, text: `key ${result.keyId}\napi key ${result.apiKey}\n(shown once)` };
  }
  if (group === 'key' && action === 'revoke') {
    const [keyId] = one(rest, 1, '<keyId>');
    const data = (await call('DELETE', `/keys/${enc(keyId!)}`)) as {
      keyId: string;
      revokedAt: string | null;
    };
    return { json: data, text: `key ${data.keyId} revoked at ${data.revokedAt}` };
  }
  if (group === 'key' && action === 'list') {
    const [accountId] = one(rest, 1, '<accountId>');
    const data = (await call('GET', `/accounts/${enc(accountId!)}/keys`)) as {
      keys: { keyId: string; displayPrefix: string; createdAt: string; revokedAt: string | null }[];
    };
    const lines = data.keys.map(
      (key) =>
        `${key.keyId}  ${key.displayPrefix}…  created ${key.createdAt}  ${key.revokedAt === null ? 'active' : `revoked ${key.revokedAt}`}`,
    );
    return { json: data, text: lines.length === 0 ? '(no keys)' : lines.join('\n') };
  }
  if (group === 'deliveries') {
    const [jobId] = one(
      [action, ...rest].filter((value) => value !== undefined),
      1,
      '<jobId>',
    );
    const data = (await call('GET', `/jobs/${enc(jobId!)}/deliveries`)) as {
      deliveries: {
        attempt: number;
        event: string;
        attemptedAt: string;
        target: string;
        statusCode: number | null;
        outcome: string;
        error: string | null;
      }[];
    };
    const lines = data.deliveries.map(
      (delivery) =>
        `#${delivery.attempt} ${delivery.event} ${delivery.attemptedAt} ${delivery.target} → ${delivery.outcome}${delivery.statusCode === null ? '' : ` ${delivery.statusCode}`}${delivery.error === null ? '' : ` (${delivery.error})`}`,
    );
    return { json: data, text: lines.length === 0 ? '(no deliveries)' : lines.join('\n') };
  }
  if (group === 'redeliver') {
    const [jobId] = one(
      [action, ...rest].filter((value) => value !== undefined),
      1,
      '<jobId>',
    );
    if (
      values.event !== undefined &&
      values.event !== 'job.completed' &&
      values.event !== 'job.failed'
    ) {
      throw new UsageError('--event must be job.completed or job.failed');
    }
    const data = (await call(
      'POST',
      `/jobs/${enc(jobId!)}/redeliver`,
      values.event === undefined ? {} : { event: values.event },
    )) as { scheduled: boolean };
    return {
      json: data,
      text: data.scheduled ? `redelivery of ${jobId} scheduled` : 'nothing to redeliver',
    };
  }
  throw new UsageError(group === undefined ? 'missing command' : `unknown command: ${command}`);
}

try {
  const json = process.argv.includes('--json');
  const output = await run(process.argv.slice(2));
  process.stdout.write(
    `${json && output.json !== undefined ? JSON.stringify(output.json) : output.text}\n`,
  );
} catch (error) {
  if (
    error instanceof UsageError ||
    (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
  ) {
    process.stderr.write(`error: ${(error as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
  process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
