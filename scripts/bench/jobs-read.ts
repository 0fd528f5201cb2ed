/**
 * Benchmark of `GET /v1/jobs/:id` (issue "Public API"): the whole system on fresh local
 * infrastructure, one account, one completed job, then a fixed number of concurrent
 * connections for a fixed time against the gateway and, in the same run, against a bare
 * fastify route in its own process answering the same JSON. Prints throughput, p50/p99 and the
 * ratio of the two. Loopback only. A third row, `GET /v1/text/presets` (authentication and rate
 * limit but no job read), shows how much of the cost is the gateway's per-request path.
 *
 *   node --import tsx scripts/bench/jobs-read.ts
 *   BENCH_DURATION_SEC=10 BENCH_CONNECTIONS=10 BENCH_WARMUP_SEC=2 (defaults)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';
import { freePort, stopProcess } from '../infra/launcher';
import { PROJECT_ROOT } from '../infra/provision';
import { type BenchStack, dataOf, startBenchStack } from './bench-stack';

const DURATION_SEC = Number(process.env.BENCH_DURATION_SEC ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const WARMUP_SEC = Number(process.env.BENCH_WARMUP_SEC ?? 2);

interface Measurement {
  label: string;
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  non2xx: number;
  errors: number;
}

const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);

async function main(): Promise<void> {
  let stack: BenchStack | undefined;
  let bare: ChildProcess | undefined;
  try {
    stack = await startBenchStack({ name: 'jobs-read', toolsProfile: 'stack', log });
    const { apiKey } = stack;
    const services = stack;
    const job = dataOf(
      await stack.api<{ id: string; status: string }>('POST', '/v1/text', {
        token: apiKey,
        body: { text: 'Benchmarks   measure   the read path.\n\n\n', preset: 'chill' },
      }),
      'POST /v1/text',
    );
    if (job.status !== 'completed') throw new Error(`job not completed: ${JSON.stringify(job)}`);
    const jobUrl = `${services.publicUrl}/v1/jobs/${job.id}`;
    const reference = await fetch(jobUrl, { headers: { authorization: `Bearer ${apiKey}` } });
    const body = await reference.text();
    if (reference.status !== 200) throw new Error(`GET job: ${reference.status} ${body}`);
    log(`job ${job.id}: ${body.length} bytes of JSON`);

    const barePort = await freePort();
    bare = await startBareServer(barePort, body);
    const bareUrl = `http://127.0.0.1:${barePort}/v1/jobs/${job.id}`;
    const check = await fetch(bareUrl);
    if ((await check.text()) !== body) throw new Error('bare route does not answer the same JSON');

    const headers = { authorization: `Bearer ${apiKey}` };
    const gateway = await measure('tamp gateway GET /v1/jobs/:id', jobUrl, headers);
    const baseline = await measure('bare fastify route, same JSON', bareUrl, {});
    // Diagnostic: the gateway's own per-request path (auth, rate limit) without the job read.
    const presets = await measure(
      'tamp gateway GET /v1/text/presets',
      `${services.publicUrl}/v1/text/presets`,
      headers,
    );

    const rows = [gateway, baseline, presets];
    console.log(
      `\nGET /v1/jobs/:id, ${CONNECTIONS} connections, ${DURATION_SEC} s each (after ${WARMUP_SEC} s warm-up), loopback, node ${process.version}`,
    );
    console.table(
      rows.map((row) => ({
        target: row.label,
        'req/s': Math.round(row.requestsPerSec),
        'p50 ms': row.p50Ms,
        'p99 ms': row.p99Ms,
        requests: row.requests,
        non2xx: row.non2xx,
        errors: row.errors,
      })),
    );
    const latencyRatio = (gatewayMs: number, bareMs: number) =>
      bareMs > 0 ? `${(gatewayMs / bareMs).toFixed(1)}×` : `${gatewayMs} ms vs < 1 ms`;
    console.log(
      `ratio: gateway throughput = ${(gateway.requestsPerSec / baseline.requestsPerSec).toFixed(3)}× bare fastify (${(baseline.requestsPerSec / gateway.requestsPerSec).toFixed(0)}× fewer req/s); latency p50 ${latencyRatio(gateway.p50Ms, baseline.p50Ms)}, p99 ${latencyRatio(gateway.p99Ms, baseline.p99Ms)}`,
    );
    if (gateway.non2xx > 0 || gateway.errors > 0) {
      console.log('WARNING: the gateway answered non-2xx or failed some requests');
    }
  } finally {
    if (bare) await stopProcess(bare, 5_000);
    await stack?.stop();
  }
}

/** A fastify server in its own process (as the gateway is), answering `body` on one route. */
async function startBareServer(port: number, body: string): Promise<ChildProcess> {
  const code = `
    import Fastify from 'fastify';
    const body = process.env.BENCH_BODY;
    const app = Fastify({ logger: false });
    app.get('/v1/jobs/:id', async (_request, reply) => {
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

async function measure(
  label: string,
  url: string,
  headers: Record<string, string>,
): Promise<Measurement> {
  if (WARMUP_SEC > 0) {
    await autocannon({ url, headers, connections: CONNECTIONS, duration: WARMUP_SEC });
  }
  log(`measuring ${label} for ${DURATION_SEC} s`);
  const result = await autocannon({
    url,
    headers,
    connections: CONNECTIONS,
    duration: DURATION_SEC,
  });
  return {
    label,
    requestsPerSec: result.requests.total / DURATION_SEC,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  };
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
