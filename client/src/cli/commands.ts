import { readFile } from 'node:fs/promises';
import {
  PIPELINES,
  type Pipeline,
  type PublicJob,
  type PublicJobSummary,
  type PublicOperationCatalogue,
  type PublicPresetCatalogue,
  type PublicUsage,
} from '@tamp/proto';
import type { Tamp } from '../client';
import { verifyWebhook } from '../webhooks';
import { EXIT, UsageError } from './failures';
import { bytes, ratio, table } from './format';

/**
 * The output rule of every command that reads something: `--json` prints the API's answer as it
 * came, otherwise `render` writes it for people. Having printed it, the command has succeeded.
 */
export function show<T>(answer: T, json: boolean, render: (answer: T) => string): typeof EXIT.ok {
  process.stdout.write(`${json ? JSON.stringify(answer, null, 2) : render(answer)}\n`);
  return EXIT.ok;
}

export function pipelineArgument(value: string): Pipeline {
  if ((PIPELINES as readonly string[]).includes(value)) return value as Pipeline;
  throw new UsageError(`unknown pipeline ${value} (use ${PIPELINES.join(', ')})`);
}

/** The account's newest `limit` jobs, over as many pages as that takes. */
export async function listJobs(
  tamp: Tamp,
  flags: { type?: string; status?: string; limit: number },
): Promise<PublicJobSummary[]> {
  const jobs = [];
  for await (const job of tamp.listJobs({
    ...(flags.type !== undefined && { type: flags.type as never }),
    ...(flags.status !== undefined && { status: flags.status as never }),
    limit: Math.min(100, flags.limit),
  })) {
    jobs.push(job);
    if (jobs.length >= flags.limit) break;
  }
  return jobs;
}

export function jobsText(jobs: readonly PublicJobSummary[]): string {
  if (jobs.length === 0) return 'No jobs.';
  const rows = jobs.map((job) => [
    job.id,
    job.type,
    job.status,
    job.name ?? '',
    bytes(job.metrics?.inputSize),
    bytes(job.metrics?.outputSize),
    ratio(job.metrics?.compressionRatio),
    job.createdAt,
  ]);
  return table(
    ['Job', 'Type', 'Status', 'Name', 'Input', 'Output', 'Ratio', 'Created'],
    rows,
    [4, 5, 6],
  );
}

export function jobText(job: PublicJob): string {
  const lines = [`${job.id}  ${job.status}`];
  if (job.error !== undefined) lines.push(`error: ${job.error}`);
  const result = job.result;
  if (result !== undefined) {
    const { metrics } = result;
    lines.push(
      `${bytes(metrics.inputSize)} → ${bytes(metrics.outputSize)}  ${ratio(metrics.compressionRatio)}  ` +
        `${metrics.operationsApplied.join(' → ')}  ${metrics.processingMs} ms`,
    );
    if (result.outputUrl !== undefined) lines.push(`output (valid 1 hour): ${result.outputUrl}`);
    if (result.outputText !== undefined) lines.push('output text:', result.outputText);
    if (result.expired === true) lines.push('the output has expired (kept 7 days)');
  }
  return lines.join('\n');
}

export function usageText(current: PublicUsage): string {
  const rows = [
    [
      'audio',
      String(current.audio.requests),
      bytes(current.audio.inputBytes),
      `${current.audio.minutes} minutes`,
    ],
    [
      'image',
      String(current.image.requests),
      bytes(current.image.inputBytes),
      `${current.image.megapixels} megapixels`,
    ],
    [
      'text',
      String(current.text.requests),
      bytes(current.text.inputBytes),
      `${current.text.characters} characters`,
    ],
  ];
  return (
    `Billing period ${current.period.start} – ${current.period.end}\n` +
    table(['Pipeline', 'Completed jobs', 'Input', 'Measure'], rows, [1, 2])
  );
}

export function presetsText(catalogue: PublicPresetCatalogue, pipeline: Pipeline): string {
  const rows = catalogue.presets.map((preset) => [
    preset.name,
    preset.description,
    preset.operations.map((operation) => operation.type).join(' → '),
    Object.entries(preset.output)
      .filter(([name]) => name !== 'extension')
      .map(([name, value]) => `${name} ${String(value)}`)
      .join(', '),
    preset.queued ? 'always' : 'when large',
  ]);
  return (
    `${table(['Preset', 'What it does', 'Operations', 'Output', 'Queued'], rows)}\n` +
    `Use: tamp compress FILES --preset NAME, or --ops '[{"type":…,"params":{…}}]' (tamp operations ${pipeline}).`
  );
}

export function operationsText(catalogue: PublicOperationCatalogue): string {
  const rows = catalogue.operations.flatMap((operation) => {
    const params = Object.entries(operation.params);
    if (params.length === 0) return [[operation.type, '(none)', '', operation.description]];
    return params.map(([name, param], index) => [
      index === 0 ? operation.type : '',
      name,
      param.enum !== undefined
        ? param.enum.map(String).join(' | ')
        : `${param.type}${param.min !== undefined ? ` ${param.min}–${param.max}` : ''}`,
      `${param.default !== undefined ? `default ${JSON.stringify(param.default)}. ` : ''}${param.description ?? ''}`,
    ]);
  });
  return table(['Operation', 'Parameter', 'Values', 'Notes'], rows);
}

/**
 * `tamp webhook verify FILE`: a saved delivery, either the raw HTTP request as received
 * (request line, headers, blank line, body) or JSON `{ "headers": {…}, "body": "…" }`.
 */
export async function webhookVerify(
  file: string,
  flags: { secret: string[]; tolerance: number; json: boolean },
): Promise<number> {
  const secrets = flags.secret.length > 0 ? flags.secret : [process.env.TAMP_WEBHOOK_SECRET ?? ''];
  if (secrets.every((secret) => secret === '')) {
    throw new UsageError('no secret: pass --secret whsec_… or set TAMP_WEBHOOK_SECRET');
  }
  const raw = file === '-' ? await readStdin() : await readFile(file);
  const delivery = parseDelivery(raw);
  const verified = await verifyWebhook(delivery.body, delivery.headers, secrets, {
    toleranceSeconds: flags.tolerance,
  });
  return show(
    verified,
    flags.json,
    ({ format, timestamp, event }) =>
      `verified (${format}, signed ${new Date(timestamp * 1000).toISOString()}): ` +
      `${event.event} for job ${event.job?.id} (${event.job?.status})`,
  );
}

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export function parseDelivery(raw: Buffer): { headers: Record<string, string>; body: Uint8Array } {
  const text = raw.toString('utf8');
  if (text.trimStart().startsWith('{')) {
    try {
      const saved = JSON.parse(text) as { headers?: Record<string, string>; body?: string };
      if (typeof saved.body === 'string' && typeof saved.headers === 'object') {
        return { headers: saved.headers, body: new TextEncoder().encode(saved.body) };
      }
    } catch {
      // Not the JSON form: read it as a raw request.
    }
  }
  const crlf = raw.indexOf('\r\n\r\n');
  const lf = raw.indexOf('\n\n');
  const [end, gap] = crlf !== -1 && (lf === -1 || crlf < lf) ? [crlf, 4] : [lf, 2];
  if (end === -1) throw new UsageError('the delivery has no blank line between headers and body');
  const headers: Record<string, string> = {};
  for (const line of raw.subarray(0, end).toString('utf8').split(/\r?\n/)) {
    const colon = line.indexOf(':');
    // The request line (POST /path HTTP/1.1) has no header name before a colon.
    if (colon <= 0 || /\s/.test(line.slice(0, colon))) continue;
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { headers, body: new Uint8Array(raw.subarray(end + gap)) };
}
