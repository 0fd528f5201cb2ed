/**
 * What pdf.js' polyfills cost the thread that loads it: the CPU of a job's bookkeeping
 * operations (a BSON round trip of a job document, as the MongoDB driver makes per command; a
 * JSON.parse of a message payload; array pushes) in a fresh process, alone and after
 * loading the text worker's PDF thread entry (which imports pdf-parse), alternated. Why the text worker keeps pdf.js in threads of its own
 * (services/worker-text/README.md).
 *
 *   node --import tsx scripts/measure/pdfjs-builtins.ts [--rounds 3] [--iterations 60000]
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BSON } from 'mongodb';
import { percentile, table } from '../load/report';

const OPERATIONS = ['bson', 'json', 'push'] as const;
type Operation = (typeof OPERATIONS)[number];

/** A completed text job as the job collection holds it, about 4 KB. */
const JOB = {
  _id: 'job_01JDZ8K2Q6X1T9V3B7N4M5C2RF',
  accountId: 'acc_01JDZ8K2Q6X1T9V3B7N4M5C2RG',
  status: 'completed',
  pipeline: 'text',
  operations: [{ type: 'trim', intensity: 50 }, { type: 'json-to-toon' }],
  input: { kind: 'text', text: 'x'.repeat(2000) },
  result: { outputText: 'y'.repeat(1500), metrics: { inputSize: 2000, outputSize: 1500 } },
  createdAt: new Date(0),
  attempts: [{ attempt: 1, startedAt: new Date(0), endedAt: new Date(0) }],
};

/** CPU ms of `iterations` runs of one operation in this process. */
function timeOperation(operation: Operation, iterations: number): number {
  const json = JSON.stringify(JOB);
  const started = process.cpuUsage();
  let sink = 0;
  for (let i = 0; i < iterations; i++) {
    if (operation === 'bson') sink += BSON.deserialize(BSON.serialize(JOB)).operations.length;
    if (operation === 'json') sink += JSON.parse(json).operations.length;
    if (operation === 'push') {
      const items: number[] = [];
      for (let k = 0; k < 50; k++) items.push(k);
      sink += items.length;
    }
  }
  const used = process.cpuUsage(started);
  if (sink === 0) throw new Error('nothing ran');
  return (used.user + used.system) / 1000;
}

async function measureInThisProcess(operation: Operation, iterations: number, withPdfjs: boolean) {
  if (withPdfjs) await import('../../services/worker-text/src/adapters/pdf-thread');
  process.stdout.write(String(timeOperation(operation, iterations)));
}

function measureInChild(operation: Operation, iterations: number, withPdfjs: boolean): number {
  const args = ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', operation];
  args.push('--iterations', String(iterations), ...(withPdfjs ? ['--with-pdfjs'] : []));
  return Number(execFileSync(process.execPath, args, { encoding: 'utf8' }));
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      iterations: { type: 'string', default: '60000' },
      child: { type: 'string' },
      'with-pdfjs': { type: 'boolean', default: false },
    },
  });
  const iterations = Number(values.iterations);
  if (values.child !== undefined) {
    return measureInThisProcess(values.child as Operation, iterations, values['with-pdfjs']);
  }
  const rows = OPERATIONS.map((operation) => {
    const alone: number[] = [];
    const withPdfjs: number[] = [];
    for (let round = 0; round < Number(values.rounds); round++) {
      alone.push(measureInChild(operation, iterations, false));
      withPdfjs.push(measureInChild(operation, iterations, true));
    }
    const [a, b] = [percentile(alone, 0.5), percentile(withPdfjs, 0.5)];
    return {
      operation,
      'µs each, alone': ((a * 1000) / iterations).toFixed(2),
      'µs each, pdf.js loaded': ((b * 1000) / iterations).toFixed(2),
      ratio: (b / a).toFixed(2),
    };
  });
  console.log(
    `${iterations} runs each, medians of ${values.rounds} alternated processes (${process.version})`,
  );
  console.log(table(rows));
}

await main();
