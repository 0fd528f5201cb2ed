import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';
import { freePort } from '../infra/launcher';
import { PROJECT_ROOT } from '../infra/provision';
import { type BenchStack, dataOf } from './bench-stack';

/**
 * Read load for the job-read benchmarks: a fixed number of keep-alive connections sending GETs
 * back to back for a fixed time (autocannon, in this process), and the bare baseline they are
 * compared with, a fastify route in a process of its own answering the same JSON.
 */

/** A read of the API: its URL, the headers that read it, and the JSON it answers. */
export interface JobRead {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** Creates an inline text job on the stack's account and reads it once. */
export async function completedJobRead(stack: BenchStack): Promise<JobRead> {
  const job = dataOf(
    await stack.api<{ id: string; status: string }>('POST', '/v1/text', {
      token: stack.apiKey,
      body: { text: 'Benchmarks   measure   the read path.\n\n\n', preset: 'chill' },
    }),
    'POST /v1/text',
  );
  if (job.status !== 'completed') throw new Error(`job not completed: ${JSON.stringify(job)}`);
  return apiRead(stack, `/v1/jobs/${job.id}`);
}

/** The first page of the stack's account's job list, newest first (the dashboard's read too). */
export function jobListRead(stack: BenchStack): Promise<JobRead> {
  return apiRead(stack, '/v1/jobs?limit=20');
}

async function apiRead(stack: BenchStack, path: string): Promise<JobRead> {
  const url = `${stack.publicUrl}${path}`;
  const headers = { authorization: `Bearer ${stack.apiKey}` };
  const reference = await fetch(url, { headers });
  const body = await reference.text();
  if (reference.status !== 200) throw new Error(`GET ${path}: ${reference.status} ${body}`);
  return { url, headers, body };
}

/** The bare baseline of `read`: a fastify process answering the same JSON, checked once. */
export async function startBareJobRead(
  read: JobRead,
): Promise<{ server: ChildProcess; url: string }> {
  const port = await freePort();
  const server = await startBareJsonServer(port, read.body);
  const { pathname, search } = new URL(read.url);
  const url = `http://127.0.0.1:${port}${pathname}${search}`;
  const check = await fetch(url);
  if ((await check.text()) !== read.body) {
    server.kill('SIGKILL');
    throw new Error('bare route does not answer the same JSON');
  }
  return { server, url };
}

/** Keep-alive connections of a read load: enough to keep the gateway busy on 2 cores. */
export const READ_CONNECTIONS = 8;

export interface ReadLoad {
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  /** Answers with a 2xx status: the reads that did what was asked. */
  answered2xx: number;
  non2xx: number;
  errors: number;
}

/** GETs `url` over `connections` connections for `seconds`. */
export async function loadReads(options: {
  url: string;
  headers: Record<string, string>;
  connections: number;
  seconds: number;
}): Promise<ReadLoad> {
  const result = await autocannon({
    url: options.url,
    headers: options.headers,
    connections: options.connections,
    duration: options.seconds,
  });
  return {
    requestsPerSec: result.requests.total / options.seconds,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    requests: result.requests.total,
    answered2xx: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  };
}

/** A fastify server in its own process (as the gateway is), answering `body` on the job routes. */
async function startBareJsonServer(port: number, body: string): Promise<ChildProcess> {
  const code = `
    import Fastify from 'fastify';
    const body = process.env.BENCH_BODY;
    const app = Fastify({ logger: false });
    app.get('/v1/jobs/*', async (_request, reply) => {
      reply.header('content-type', 'application/json; charset=utf-8');
      return body;
    });
    app.get('/v1/jobs', async (_request, reply) => {
      reply.header('content-type', 'application/json; charset=utf-8');
      return body;
    });
    await app.listen({ host: '127.0.0.1', port: Number(process.env.BENCH_PORT) });
    console.log('listening');
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, BENCH_BODY: body, BENCH_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.once('line', () => resolve());
    child.once('exit', (exitCode) => reject(new Error(`bare server exited: ${exitCode}`)));
  });
  return child;
}
