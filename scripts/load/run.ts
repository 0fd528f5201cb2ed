/**
 * The long form of the load-and-fault suite: a report, nothing asserted.
 *
 *   node --import tsx scripts/load/run.ts [--rate 2] [--minutes 5] [--faults all|none|<list>]
 *                                         [--kinds text-queued,image-avif,…] [--keys 200]
 *
 * Starts its own servers and services (loopback only, a temporary folder, gone afterwards),
 * sends a burst of duplicated keyed creations, then a mixed stream at `--rate` creations per
 * second for `--minutes` with the faults injected one after another, drains, and audits the
 * books (see scenario.ts). Exit code 1 when an invariant does not hold.
 */
import { parseArgs } from 'node:util';
import { startBenchStack } from '../bench/bench-stack';
import { FAULTS, type FaultName } from './faults';
import { formatReport, runScenario } from './scenario';
import { JOB_KIND_NAMES, type JobKindName, workloadTools } from './workload';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '2' },
    minutes: { type: 'string', default: '5' },
    faults: { type: 'string', default: 'all' },
    kinds: { type: 'string', default: JOB_KIND_NAMES.join(',') },
    keys: { type: 'string', default: '200' },
  },
});
const faults: FaultName[] =
  values.faults === 'all'
    ? [...FAULTS]
    : values.faults === 'none'
      ? []
      : (values.faults.split(',') as FaultName[]);
const kinds = values.kinds.split(',') as JobKindName[];
const log = (message: string) => process.stderr.write(`${new Date().toISOString()} ${message}\n`);
const stack = await startBenchStack({ name: 'load', tools: workloadTools(kinds), log });
try {
  const report = await runScenario(stack, {
    burst: { keys: Number(values.keys), duplicates: 5 },
    stream: {
      ratePerSecond: Number(values.rate),
      durationMs: Number(values.minutes) * 60_000,
      kinds,
    },
    faults,
    drainMs: 20 * 60_000,
    log,
  });
  process.stdout.write(`${formatReport(report)}\n`);
  process.exitCode = report.problems.length === 0 ? 0 : 1;
} finally {
  await stack.stop();
}
