/**
 * The same folder of mixed files compressed two ways against one stack: `tamp compress` (the
 * CLI as a user runs it, concurrency 4) and each file sent one by one with curl, the five steps
 * of the README's quick start (upload URL, PUT, create the job, long-poll it, download).
 * Then `tamp compress` again, which should do nothing.
 *
 *   node --import tsx scripts/bench/cli-vs-curl.ts [--files 20]
 *
 * Against a running stack (npm start) set TAMP_BASE_URL and TAMP_API_KEY (an account from
 * `npm run --silent admin -- account create --plan pro --json`); without them the script starts
 * its own stack from fresh servers.
 */
import { execFile as execFileCallback } from 'node:child_process';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { type Pipeline, TERMINAL_STATUSES, UPLOAD_FIELD_BY_PIPELINE } from '@tamp/proto';
import { pipelineFor } from '../../client/src/client';
import { writeMixedFolder } from '../fixtures/mixed-folder';
import { PROJECT_ROOT, provisionTools, toolPath } from '../infra/provision';
import { type BenchStack, startBenchStack } from './bench-stack';

const execFile = promisify(execFileCallback);
const { values } = parseArgs({ options: { files: { type: 'string', default: '20' } } });
const count = Number(values.files);
const log = (message: string) => console.error(`[cli-vs-curl] ${message}`);

// The mixed folder's speech (and its MP3s), and curl: needed whoever runs the stack.
const tools = ['speech', 'curl'];
let stack: BenchStack | undefined;
let baseUrl = process.env.TAMP_BASE_URL;
let apiKey = process.env.TAMP_API_KEY;
if (baseUrl === undefined || apiKey === undefined) {
  stack = await startBenchStack({ name: 'cli-vs-curl', tools, log });
  baseUrl = stack.publicUrl;
  apiKey = stack.apiKey;
} else {
  await provisionTools(tools, log);
}
const curlBinary = toolPath('curl');
const scratch = await mkdtemp(join(tmpdir(), 'tamp-cli-vs-curl-'));
try {
  const folder = join(scratch, 'media');
  const files = await writeMixedFolder(folder, count);
  const inputBytes = files.reduce((sum, file) => sum + file.bytes, 0);
  log(`${count} files, ${(inputBytes / 1e6).toFixed(1)} MB, against ${baseUrl}`);
  const env = { ...process.env, TAMP_BASE_URL: baseUrl, TAMP_API_KEY: apiKey };
  const bin = join(PROJECT_ROOT, 'client', 'bin', 'tamp.mjs');
  // Build the bundle first so that its one-time build is not timed.
  await execFile(process.execPath, [bin, '--version'], { env });

  const compress = () =>
    execFile(process.execPath, [bin, 'compress', folder, '--out', join(scratch, 'cli')], { env });
  const cli = await timed(compress);
  const again = await timed(compress);
  const curl = await timed(async () => {
    for (const file of files) {
      await compressWithCurl(file.path, join(scratch, 'curl'), baseUrl!, apiKey!);
    }
  });
  const outputs = async (name: string) =>
    (await readdir(join(scratch, name), { recursive: true, withFileTypes: true })).filter(
      (entry) => entry.isFile() && !entry.name.startsWith('.'),
    ).length;
  console.log(
    [
      `files                     ${count} (${(inputBytes / 1e6).toFixed(1)} MB: images, speech, text, PDF)`,
      `tamp compress (4 at once) ${seconds(cli.ms)}  (${await outputs('cli')} outputs)`,
      `curl, one by one          ${seconds(curl.ms)}  (${await outputs('curl')} outputs; ${(curl.ms / cli.ms).toFixed(2)}× the CLI's time)`,
      `tamp compress again       ${seconds(again.ms)}  (${again.value.stdout.trim().split('\n').at(-1)})`,
    ].join('\n'),
  );
} finally {
  await rm(scratch, { recursive: true, force: true });
  await stack?.stop();
}

async function timed<Value>(work: () => Promise<Value>): Promise<{ ms: number; value: Value }> {
  const started = performance.now();
  const value = await work();
  return { ms: performance.now() - started, value };
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** The README's curl quick start for one file: every HTTP request is one curl process. */
async function compressWithCurl(path: string, out: string, base: string, key: string) {
  const auth = ['-H', `Authorization: Bearer ${key}`];
  const json = async (args: string[]) => {
    const { stdout } = await execFile(curlBinary, ['-sS', ...auth, ...args]);
    const parsed = JSON.parse(stdout) as { success: boolean; data: Record<string, unknown> };
    if (!parsed.success) throw new Error(`${args.join(' ')}: ${stdout}`);
    return parsed.data;
  };
  const pipeline: Pipeline = pipelineFor(path);
  const upload = await json([
    '-X',
    'POST',
    `${base}/v1/upload`,
    '-H',
    'content-type: application/json',
    '-d',
    JSON.stringify({ filename: basename(path), size: (await stat(path)).size }),
  ]);
  await execFile(curlBinary, [
    '-sS',
    '--fail',
    '-X',
    'PUT',
    String(upload.uploadUrl),
    '-H',
    `content-type: ${String(upload.contentType)}`,
    '--data-binary',
    `@${path}`,
  ]);
  let job = await json([
    '-X',
    'POST',
    `${base}/v1/${pipeline}`,
    '-H',
    'content-type: application/json',
    '-d',
    JSON.stringify({ [UPLOAD_FIELD_BY_PIPELINE[pipeline]]: upload.id, preset: 'medium' }),
  ]);
  for (let poll = 0; poll < 40 && !TERMINAL_STATUSES.includes(job.status as never); poll++) {
    job = await json([`${base}/v1/jobs/${String(job.id)}?wait=30`]);
  }
  const result = job.result as { outputUrl?: string } | undefined;
  if (job.status !== 'completed' || result?.outputUrl === undefined) {
    throw new Error(`${path}: job ${String(job.id)} ended ${String(job.status)}`);
  }
  const name = basename(new URL(result.outputUrl).pathname);
  await execFile(curlBinary, [
    '-sS',
    '--fail',
    '--create-dirs',
    '-o',
    join(out, `${basename(path)}.${name}`),
    result.outputUrl,
  ]);
}
