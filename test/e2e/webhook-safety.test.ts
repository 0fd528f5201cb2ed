import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestAccount, type TestStack } from '../support/stack';
import { assertStaysTrue } from '../support/stays-true';

/**
 * Target safety through the whole stack with the production policy (https only, no private or
 * loopback addresses): every unsafe target is refused, when it is given if no DNS is needed to
 * tell (the gateway), else at delivery, recorded once as `refused` and never retried; no
 * connection reaches the loopback receiver. (The redirect vector needs an allowed receiver, so
 * it lives in webhooks.test.ts under the local policy.)
 */
const RETRY_SCHEDULE_MS = [300, 300, 300, 300, 300];

let stack: TestStack;
let account: TestAccount;
let receiver: CountingReceiver;

beforeAll(async () => {
  receiver = await CountingReceiver.start();
  stack = await startTestStack({
    env: {
      WEBHOOK_ALLOW_HTTP: 'false',
      WEBHOOK_ALLOW_CIDRS: '',
      WEBHOOK_RETRY_SCHEDULE_MS: RETRY_SCHEDULE_MS.join(','),
      WEBHOOK_TIMEOUT_MS: '1000',
    },
  });
  account = await stack.createAccount({ plan: 'pro', credits: 1_000 });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await receiver?.close();
});

/** A loopback server that counts every TCP connection it accepts (TLS or not) and request. */
class CountingReceiver {
  connections = 0;
  requests = 0;

  private constructor(
    private readonly servers: Server[],
    readonly port: number,
  ) {}

  static async start(): Promise<CountingReceiver> {
    let receiver: CountingReceiver | undefined;
    const make = () => {
      const server = createServer((_request, response) => {
        receiver!.requests += 1;
        response.writeHead(204).end();
      });
      server.on('connection', () => {
        receiver!.connections += 1;
      });
      return server;
    };
    const v4 = make();
    v4.listen(0, '127.0.0.1');
    await once(v4, 'listening');
    const port = (v4.address() as AddressInfo).port;
    const servers = [v4];
    // The same port on ::1 too where the machine has IPv6 loopback, so [::1] is watched as well.
    const v6 = make();
    try {
      v6.listen(port, '::1');
      await once(v6, 'listening');
      servers.push(v6);
    } catch {
      v6.close();
    }
    receiver = new CountingReceiver(servers, port);
    return receiver;
  }

  async close(): Promise<void> {
    for (const server of this.servers) {
      server.closeAllConnections();
      server.close();
    }
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface DeliveryRecord {
  attempt: number;
  target: string;
  statusCode: number | null;
  latencyMs: number | null;
  outcome: string;
  error: string | null;
}

async function deliveries(jobId: string): Promise<DeliveryRecord[]> {
  const response = await stack.admin<{ deliveries: DeliveryRecord[] }>(
    'GET',
    `/admin/jobs/${jobId}/deliveries`,
  );
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data!.deliveries;
}

/** Waits until the job has a recorded delivery attempt; returns the attempts. */
async function firstRecord(jobId: string): Promise<DeliveryRecord[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const records = await deliveries(jobId);
    if (records.length > 0) return records;
    if (Date.now() > deadline)
      throw new Error(`no delivery recorded for ${jobId}\n${stack.logs()}`);
    await sleep(100);
  }
}

/** Another name /etc/hosts maps to loopback (besides `localhost`), if this machine has one. */
function loopbackAlias(): string | undefined {
  let hosts = '';
  try {
    hosts = readFileSync('/etc/hosts', 'utf8');
  } catch {
    return undefined;
  }
  for (const line of hosts.split('\n')) {
    const [address, ...names] = line.replace(/#.*/, '').trim().split(/\s+/);
    if (address === undefined || !(address.startsWith('127.') || address === '::1')) continue;
    const alias = names.find(
      (name) => name !== 'localhost' && /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/i.test(name),
    );
    if (alias !== undefined) return alias;
  }
  return undefined;
}

/**
 * Creates a queued job for `webhookUrl`, waits for its one recorded attempt, and checks it is
 * `refused` and stays the only one (refusals are not retried).
 */
async function expectRefused(webhookUrl: string): Promise<DeliveryRecord> {
  const created = await stack.api<{ id: string }>('POST', '/v1/text', {
    token: account.apiKey,
    body: { text: `Safety   check ${Math.random()}`, preset: 'chill', webhookUrl },
  });
  expect(created.status, `job creation for ${webhookUrl}: ${JSON.stringify(created.body)}`).toBe(
    202,
  );
  const jobId = created.body.data!.id;
  await firstRecord(jobId);
  // A refusal is not retried: the attempt stays the only one, watched for longer than every
  // retry delay together, in which a retry would show.
  await assertStaysTrue(async () => expect(await deliveries(jobId)).toHaveLength(1), {
    forMs: RETRY_SCHEDULE_MS.reduce((sum, delay) => sum + delay, 0) + 1_000,
    intervalMs: 250,
    what: 'no retry of a refusal',
  });
  const records = await deliveries(jobId);
  expect(records).toHaveLength(1);
  const [record] = records;
  expect(record).toMatchObject({ attempt: 1, target: webhookUrl, outcome: 'refused' });
  expect(record!.statusCode).toBeNull();
  expect(record!.error).toEqual(expect.any(String));
  // The job is untouched by the refusal.
  const job = await stack.api<{ status: string }>('GET', `/v1/jobs/${jobId}`, {
    token: account.apiKey,
  });
  expect(job.body.data!.status).toBe('completed');
  return record!;
}

/** Creating a job for `webhookUrl` is refused (400 on body.webhookUrl); returns the reason. */
async function expectRefusedWhenGiven(webhookUrl: string): Promise<string> {
  const created = await stack.api('POST', '/v1/text', {
    token: account.apiKey,
    body: { text: `Safety   check ${Math.random()}`, preset: 'chill', webhookUrl },
  });
  expect(created.status, `job creation for ${webhookUrl}: ${JSON.stringify(created.body)}`).toBe(
    400,
  );
  expect(created.body.error?.code).toBe('VALIDATION_ERROR');
  const details = created.body.error!.details as { path: string; message: string }[];
  expect(details).toEqual([{ path: 'body.webhookUrl', message: expect.any(String) }]);
  return details[0]!.message;
}

describe('Target safety under the production policy', () => {
  const withPort = (template: string) => () => template.replace('<port>', String(receiver.port));

  // What needs no DNS is refused when the URL is given (docs/decisions.md#webhooks).
  it.each([
    ['loopback IPv4 literal', withPort('https://127.0.0.1:<port>/hook'), /loopback/],
    ['loopback IPv6 literal', withPort('https://[::1]:<port>/hook'), /loopback/],
    ['plain http to loopback', withPort('http://127.0.0.1:<port>/hook'), /http/],
    ['a private address (10.0.0.1)', () => 'https://10.0.0.1/hook', /private/],
    ['the cloud metadata address', () => 'https://169.254.169.254/latest/meta-data/', /metadata/],
    ['a unique-local IPv6 address', () => 'https://[fd00::1]/hook', /unique-local/],
    ['plain http (disallowed scheme)', () => 'http://example.com/hook', /http/],
  ])('refuses %s when it is given, creating no job', async (_name, url, reason) => {
    expect(await expectRefusedWhenGiven(url())).toMatch(reason);
    // And as an account default, set through the admin API.
    const accountDefault = await stack.admin('POST', '/admin/accounts', { webhookUrl: url() });
    expect(accountDefault.status).toBe(400);
    expect(receiver.connections).toBe(0);
  });

  // A host name is judged at delivery, on what it resolves to then.
  it('refuses localhost (resolves to loopback) at delivery, without connecting', async () => {
    const record = await expectRefused(`https://localhost:${receiver.port}/hook`);
    expect(record.error).toMatch(/loopback/);
    expect(receiver.connections).toBe(0);
    expect(receiver.requests).toBe(0);
  });

  const alias = loopbackAlias();
  it.skipIf(alias === undefined)(
    `refuses another name that resolves to loopback (${alias ?? 'none in /etc/hosts'})`,
    async () => {
      const record = await expectRefused(`https://${alias}:${receiver.port}/hook`);
      expect(record.error).toMatch(/loopback/);
      expect(receiver.connections).toBe(0);
      expect(receiver.requests).toBe(0);
    },
  );

  it('refuses an account default URL that points inward, too', async () => {
    const url = `https://localhost:${receiver.port}/default`;
    const holder = await stack.createAccount({ plan: 'pro', webhookUrl: url });
    const created = await stack.api<{ id: string }>('POST', '/v1/text', {
      token: holder.apiKey,
      body: { text: 'Lorem ipsum   dolor sit amet.  '.repeat(2_000), preset: 'chill' },
    });
    expect(created.status).toBe(202);
    const jobId = created.body.data!.id;
    const records = await firstRecord(jobId);
    expect(records).toEqual([expect.objectContaining({ target: url, outcome: 'refused' })]);
    expect(receiver.connections).toBe(0);
  });
});
