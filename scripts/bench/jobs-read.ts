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
import type { ChildProcess } from 'node:child_process';
import { stopProcess } from '../infra/launcher';
import { type BenchStack, startBenchStack } from './bench-stack';
import { completedJobRead, loadReads, type ReadLoad, startBareJobRead } from './read-load';

const DURATION_SEC = Number(process.env.BENCH_DURATION_SEC ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const WARMUP_SEC = Number(process.env.BENCH_WARMUP_SEC ?? 2);

interface Measurement extends ReadLoad {
  label: string;
}

const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);

async function main(): Promise<void> {
  let stack: BenchStack | undefined;
  let bare: ChildProcess | undefined;
  try {
    stack = await startBenchStack({ name: 'jobs-read', log });
    const read = await completedJobRead(stack);
    log(`${read.url}: ${read.body.length} bytes of JSON`);
    const bareRead = await startBareJobRead(read);
    bare = bareRead.server;

    const gateway = await measure('tamp gateway GET /v1/jobs/:id', read.url, read.headers);
    const bareRoute = await measure('bare fastify route, same JSON', bareRead.url, {});
    // Diagnostic: the gateway's own per-request path (auth, rate limit) without the job read.
    const presets = await measure(
      'tamp gateway GET /v1/text/presets',
      `${stack.publicUrl}/v1/text/presets`,
      read.headers,
    );

    const rows = [gateway, bareRoute, presets];
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
      `ratio: gateway throughput = ${(gateway.requestsPerSec / bareRoute.requestsPerSec).toFixed(3)}× bare fastify (${(bareRoute.requestsPerSec / gateway.requestsPerSec).toFixed(0)}× fewer req/s); latency p50 ${latencyRatio(gateway.p50Ms, bareRoute.p50Ms)}, p99 ${latencyRatio(gateway.p99Ms, bareRoute.p99Ms)}`,
    );
    if (gateway.non2xx > 0 || gateway.errors > 0) {
      console.log('WARNING: the gateway answered non-2xx or failed some requests');
    }
  } finally {
    if (bare) await stopProcess(bare, 5_000);
    await stack?.stop();
  }
}

async function measure(
  label: string,
  url: string,
  headers: Record<string, string>,
): Promise<Measurement> {
  if (WARMUP_SEC > 0) {
    await loadReads({ url, headers, connections: CONNECTIONS, seconds: WARMUP_SEC });
  }
  log(`measuring ${label} for ${DURATION_SEC} s`);
  return {
    label,
    ...(await loadReads({ url, headers, connections: CONNECTIONS, seconds: DURATION_SEC })),
  };
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
