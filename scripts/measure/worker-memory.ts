/**
 * Worker memory under real jobs, through the whole stack over HTTP:
 *
 * 1. a ~100 MB WAV (just under the pro plan's 100 MiB upload limit, ~9.8 min 44.1 kHz stereo)
 *    through an audio preset, with worker-audio's RSS (its Node process, and the process tree
 *    with the ffmpeg it spawns) sampled from /proc every 100 ms;
 * 2. a ~25 MB JPEG (8000×6000 seeded photo at q98) through an image preset, worker-image's
 *    RSS sampled the same way;
 * 3. worker-image's RSS after 500 consecutive mixed jobs (sizes, input and output formats,
 *    inline and queued) compared with its RSS after the first 50.
 *
 * Run: node --import tsx scripts/measure/worker-memory.ts [--image-jobs 500] [--wav-seconds 590]
 * The services run from the bundle a container runs (scripts/build/bundle.ts, built first);
 * `--source` runs them through tsx instead, which adds ~60 MiB to every process.
 * It launches its own NATS, MongoDB-wire server and MinIO (as `npm start` does, in a temp folder)
 * and prints the figures as a table. `test/e2e/worker-memory.test.ts` runs the same measurement
 * against the test stack and asserts the bounds.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import sharp from 'sharp';
import { type ApiClient, uploadBytes } from '../bench/bench-stack';
import { ImageFixtures } from '../fixtures/images';
import { generateLongWav } from '../fixtures/speech';

// ---------------------------------------------------------------------------------------------
// /proc sampling

export interface ProcessMemory {
  /** Resident set size now, bytes. */
  rss: number;
  /** Peak resident set size since the process started (VmHWM), bytes. */
  hwm: number;
}

export function readProcessMemory(pid: number): ProcessMemory | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name: string) => {
      const match = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status);
      return match ? Number(match[1]) * 1024 : 0;
    };
    return { rss: field('VmRSS'), hwm: field('VmHWM') };
  } catch {
    return undefined; // the process is gone
  }
}

/** Every process below `pid` (ffmpeg spawned by the audio worker, for example). */
export function descendants(pid: number): number[] {
  const found: number[] = [];
  const visit = (parent: number) => {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${parent}/task`);
    } catch {
      return;
    }
    for (const task of tasks) {
      let children = '';
      try {
        children = readFileSync(`/proc/${parent}/task/${task}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const child of children.split(/\s+/).filter(Boolean).map(Number)) {
        found.push(child);
        visit(child);
      }
    }
  };
  visit(pid);
  return found;
}

export interface RssSummary {
  samples: number;
  /** VmRSS of the worker's Node process at the first sample, before the job, bytes. */
  startRss: number;
  /** Largest VmRSS of the worker's Node process seen in any sample, bytes. */
  peakRss: number;
  /** The worker's VmHWM at the end (peak since it started), bytes. */
  hwm: number;
  /** Largest sum of VmRSS over the worker and all its descendants in any sample, bytes. */
  peakTreeRss: number;
  /** Largest VmHWM of any descendant (each child's own peak, between samples too), bytes. */
  peakChildHwm: number;
  /** VmRSS of the worker's Node process at the end, bytes. */
  endRss: number;
}

/** Samples `pid()` every `intervalMs` until `stop()`; follows a restarted worker's new pid. */
export function sampleRss(pid: () => number | undefined, intervalMs = 100) {
  const summary: RssSummary = {
    samples: 0,
    startRss: 0,
    peakRss: 0,
    hwm: 0,
    peakTreeRss: 0,
    peakChildHwm: 0,
    endRss: 0,
  };
  const sample = () => {
    const worker = pid();
    if (worker === undefined) return;
    const own = readProcessMemory(worker);
    if (!own) return;
    let tree = own.rss;
    for (const child of descendants(worker)) {
      const memory = readProcessMemory(child);
      if (!memory) continue;
      tree += memory.rss;
      summary.peakChildHwm = Math.max(summary.peakChildHwm, memory.hwm);
    }
    if (summary.samples === 0) summary.startRss = own.rss;
    summary.samples += 1;
    summary.peakRss = Math.max(summary.peakRss, own.rss);
    summary.hwm = own.hwm;
    summary.peakTreeRss = Math.max(summary.peakTreeRss, tree);
    summary.endRss = own.rss;
  };
  sample();
  const timer = setInterval(sample, intervalMs);
  return {
    stop(): RssSummary {
      clearInterval(timer);
      sample();
      return { ...summary };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// the measurement, against any running stack

interface JobBody {
  id: string;
  status: string;
  error?: string;
  result?: { metrics: Record<string, unknown> };
}

export interface MeasuredStack extends ApiClient {
  services: { services: Array<{ name: string; pid(): number | undefined; restarts: number }> };
}

export interface MemoryOptions {
  apiKey: string;
  /** Length of the WAV, seconds; 590 s at 44.1 kHz stereo is 104,076,044 bytes < 100 MiB. */
  wavSeconds?: number;
  audioPreset?: string;
  /** The large JPEG; 8000×6000 at q98 is about 25 MB (7000×5000 q98 is only 18.8 MB). */
  jpeg?: { width: number; height: number; quality: number };
  imagePreset?: string;
  imageJobs?: number;
  warmupJobs?: number;
  /** Parallel clients for the mixed image jobs. */
  clients?: number;
  log?: (line: string) => void;
}

export interface BigJobFigures {
  inputBytes: number;
  status: string;
  error?: string;
  durationMs: number;
  memory: RssSummary;
  metrics?: Record<string, unknown>;
}

export interface ImageSeriesFigures {
  jobs: number;
  completed: number;
  inline: number;
  queued: number;
  failed: string[];
  rssAfterWarmup: number;
  rssAfterAll: number;
  hwmAfterAll: number;
  ratio: number;
  restarts: number;
}

export interface MemoryFigures {
  audio: BigJobFigures;
  image: BigJobFigures;
  series: ImageSeriesFigures;
}

async function finish(stack: MeasuredStack, apiKey: string, id: string): Promise<JobBody> {
  for (let round = 0; round < 40; round++) {
    const response = await stack.api<JobBody>('GET', `/v1/jobs/${id}?wait=30`, { token: apiKey });
    const job = response.body.data;
    if (job && (job.status === 'completed' || job.status === 'failed')) return job;
  }
  throw new Error(`job ${id} did not finish within 20 minutes`);
}

async function create(
  stack: MeasuredStack,
  apiKey: string,
  path: string,
  body: Record<string, unknown>,
): Promise<{ job: JobBody; queued: boolean }> {
  for (let attempt = 0; ; attempt++) {
    const created = await stack.api<JobBody>('POST', path, { token: apiKey, body });
    if (created.status === 200) return { job: created.body.data!, queued: false };
    if (created.status === 202) {
      return { job: await finish(stack, apiKey, created.body.data!.id), queued: true };
    }
    if (created.status === 429 && attempt < 20) {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      continue;
    }
    throw new Error(`${path}: ${created.status} ${JSON.stringify(created.body)}`);
  }
}

function workerPid(stack: MeasuredStack, name: string): () => number | undefined {
  const service = stack.services.services.find((candidate) => candidate.name === name);
  if (!service) throw new Error(`no ${name} in the stack`);
  return () => service.pid();
}

async function bigJob(
  stack: MeasuredStack,
  apiKey: string,
  worker: string,
  path: string,
  body: Record<string, unknown>,
  inputBytes: number,
): Promise<BigJobFigures> {
  const sampler = sampleRss(workerPid(stack, worker));
  const started = performance.now();
  let job: JobBody;
  try {
    job = (await create(stack, apiKey, path, body)).job;
  } finally {
    sampler.stop();
  }
  const memory = sampler.stop();
  return {
    inputBytes,
    status: job.status,
    ...(job.error !== undefined && { error: job.error }),
    durationMs: Math.round(performance.now() - started),
    memory,
    ...(job.result && { metrics: job.result.metrics }),
  };
}

export interface ImageJobFigures extends BigJobFigures {
  /** The JPEG as the worker's memory model reads it from the header. */
  input: { width: number; height: number; progressive: boolean };
}

/**
 * The image part of the measurement alone, for one seeded photo JPEG of `jpeg`'s shape and the
 * request's `chain` (a preset or operations): upload it, run the job, sample worker-image's RSS
 * meanwhile. `test/e2e/worker-memory.test.ts` runs it on every `npm test` at a size whose memory
 * need the model in services/worker-image predicts, to compare the two.
 */
export async function measureImageJob(
  stack: MeasuredStack,
  options: {
    apiKey: string;
    jpeg: { width: number; height: number; quality: number };
    chain: Record<string, unknown>;
    log?: (line: string) => void;
  },
): Promise<ImageJobFigures> {
  const fixtures = await ImageFixtures.create('tamp-memory-jpeg-');
  try {
    const path = await fixtures.photo({ ...options.jpeg, format: 'jpeg', seed: 42 });
    const jpeg = await readFile(path);
    const metadata = await sharp(jpeg).metadata();
    const imageId = await uploadBytes(stack, options.apiKey, 'photo.jpg', jpeg);
    const figures = await bigJob(
      stack,
      options.apiKey,
      'worker-image',
      '/v1/image',
      { imageId, ...options.chain },
      jpeg.length,
    );
    options.log?.(
      `image: ${figures.status} in ${figures.durationMs} ms, worker ${mb(figures.memory.startRss)} before, peak ${mb(figures.memory.peakRss)} (VmHWM ${mb(figures.memory.hwm)})`,
    );
    return {
      ...figures,
      input: {
        width: metadata.width ?? 0,
        height: metadata.height ?? 0,
        progressive: metadata.isProgressive === true,
      },
    };
  } finally {
    await fixtures.cleanup();
  }
}

/** The mixed series: sizes, input formats, output formats, inline and queued (AVIF). */
const MIXED_CHAINS: Array<Record<string, unknown>> = [
  { preset: 'chill' },
  { preset: 'medium' },
  { preset: 'thumbnail' },
  {
    operations: [
      { type: 'resize', params: { width: 640 } },
      { type: 'encode', params: { format: 'jpeg', quality: 75 } },
    ],
  },
  {
    operations: [
      { type: 'resize', params: { width: 300, height: 300, fit: 'contain' } },
      { type: 'encode', params: { format: 'png', quality: 70 } },
    ],
  },
  {
    operations: [
      { type: 'resize', params: { width: 256, height: 256, fit: 'cover', position: 'entropy' } },
      { type: 'encode', params: { format: 'avif', quality: 50, effort: 0 } },
    ],
  },
  {
    operations: [
      { type: 'resize', params: { width: 1200, height: 900, fit: 'cover' } },
      { type: 'encode', params: { format: 'webp', quality: 60, effort: 1 } },
    ],
  },
];

async function imageSeries(
  stack: MeasuredStack,
  options: Required<Pick<MemoryOptions, 'apiKey' | 'imageJobs' | 'warmupJobs' | 'clients'>> & {
    log: (line: string) => void;
  },
): Promise<ImageSeriesFigures> {
  const { apiKey, imageJobs, warmupJobs, clients, log } = options;
  const fixtures = await ImageFixtures.create('tamp-memory-series-');
  try {
    const shapes: Array<{
      width: number;
      height: number;
      format: 'jpeg' | 'png' | 'webp';
      alpha?: boolean;
    }> = [
      { width: 320, height: 240, format: 'jpeg' },
      { width: 800, height: 600, format: 'png', alpha: true },
      { width: 1024, height: 768, format: 'webp' },
      { width: 1600, height: 1200, format: 'jpeg' },
      { width: 2400, height: 1600, format: 'jpeg' },
      { width: 1200, height: 1800, format: 'webp' },
      { width: 640, height: 480, format: 'png' },
    ];
    const inputs: string[] = [];
    for (const [index, shape] of shapes.entries()) {
      const path = await fixtures.photo({ ...shape, seed: 100 + index });
      inputs.push(
        await uploadBytes(
          stack,
          apiKey,
          `series-${index}.${shape.format === 'jpeg' ? 'jpg' : shape.format}`,
          await readFile(path),
        ),
      );
    }
    const pid = workerPid(stack, 'worker-image');
    const service = stack.services.services.find((candidate) => candidate.name === 'worker-image')!;
    const restartsBefore = service.restarts;
    let next = 0;
    let completed = 0;
    let inline = 0;
    let queued = 0;
    const failed: string[] = [];
    const runUpTo = async (end: number) => {
      await Promise.all(
        Array.from({ length: clients }, async () => {
          while (next < end) {
            const index = next++;
            const imageId = inputs[index % inputs.length]!;
            // Co-prime strides so every input meets every chain.
            const chain = MIXED_CHAINS[Math.floor(index / inputs.length) % MIXED_CHAINS.length]!;
            const { job, queued: wasQueued } = await create(stack, apiKey, '/v1/image', {
              imageId,
              ...chain,
            });
            if (wasQueued) queued += 1;
            else inline += 1;
            if (job.status === 'completed') completed += 1;
            else failed.push(`${job.id}: ${job.error}`);
          }
        }),
      );
    };
    await runUpTo(warmupJobs);
    const rssAfterWarmup = readProcessMemory(pid()!)!.rss;
    log(`after ${warmupJobs} image jobs: RSS ${mb(rssAfterWarmup)}`);
    await runUpTo(imageJobs);
    const end = readProcessMemory(pid()!)!;
    log(`after ${imageJobs} image jobs: RSS ${mb(end.rss)} (peak ${mb(end.hwm)})`);
    return {
      jobs: imageJobs,
      completed,
      inline,
      queued,
      failed,
      rssAfterWarmup,
      rssAfterAll: end.rss,
      hwmAfterAll: end.hwm,
      ratio: Math.round((end.rss / rssAfterWarmup) * 1000) / 1000,
      restarts: service.restarts - restartsBefore,
    };
  } finally {
    await fixtures.cleanup();
  }
}

export async function measureWorkerMemory(
  stack: MeasuredStack,
  options: MemoryOptions,
): Promise<MemoryFigures> {
  const log = options.log ?? (() => {});
  const dir = await mkdtemp(join(tmpdir(), 'tamp-worker-memory-'));
  const fixtures = await ImageFixtures.create('tamp-memory-jpeg-');
  try {
    // Inputs first, so the sampled windows hold only the workers' own work.
    const wavPath = join(dir, 'long.wav');
    await generateLongWav(wavPath, options.wavSeconds ?? 590);
    const wav = await readFile(wavPath);
    const jpegShape = options.jpeg ?? { width: 8000, height: 6000, quality: 98 };
    const jpegPath = await fixtures.photo({ ...jpegShape, format: 'jpeg', seed: 42 });
    const jpeg = await readFile(jpegPath);
    log(
      `inputs: WAV ${wav.length} bytes, JPEG ${jpegShape.width}×${jpegShape.height} q${jpegShape.quality} ${jpeg.length} bytes`,
    );
    const [audioId, imageId] = await Promise.all([
      uploadBytes(stack, options.apiKey, 'long.wav', wav),
      uploadBytes(stack, options.apiKey, 'large.jpg', jpeg),
    ]);
    await rm(wavPath, { force: true });

    const audio = await bigJob(
      stack,
      options.apiKey,
      'worker-audio',
      '/v1/audio',
      { audioId, preset: options.audioPreset ?? 'podcast' },
      wav.length,
    );
    log(
      `audio: ${audio.status} in ${audio.durationMs} ms, worker peak ${mb(audio.memory.peakRss)}, tree ${mb(audio.memory.peakTreeRss)}`,
    );
    const image = await bigJob(
      stack,
      options.apiKey,
      'worker-image',
      '/v1/image',
      { imageId, preset: options.imagePreset ?? 'chill' },
      jpeg.length,
    );
    log(
      `image: ${image.status} in ${image.durationMs} ms, worker peak ${mb(image.memory.peakRss)}`,
    );
    const series = await imageSeries(stack, {
      apiKey: options.apiKey,
      imageJobs: options.imageJobs ?? 500,
      warmupJobs: options.warmupJobs ?? 50,
      clients: options.clients ?? 3,
      log,
    });
    return { audio, image, series };
  } finally {
    await fixtures.cleanup();
    await rm(dir, { recursive: true, force: true });
  }
}

export function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

export function formatTable(figures: MemoryFigures): string {
  const rows: Array<[string, string]> = [];
  const big = (label: string, job: BigJobFigures, withTree: boolean) => {
    rows.push([`${label}: input`, `${job.inputBytes} bytes (${mb(job.inputBytes)})`]);
    rows.push([
      `${label}: job`,
      `${job.status}${job.error ? ` (${job.error})` : ''}, ${job.durationMs} ms, ${job.memory.samples} samples`,
    ]);
    rows.push([`${label}: worker VmRSS before the job`, mb(job.memory.startRss)]);
    rows.push([`${label}: worker VmRSS peak (sampled)`, mb(job.memory.peakRss)]);
    rows.push([`${label}: worker VmHWM`, mb(job.memory.hwm)]);
    if (withTree) {
      rows.push([`${label}: worker + ffmpeg VmRSS peak (sampled)`, mb(job.memory.peakTreeRss)]);
      rows.push([`${label}: ffmpeg VmHWM (largest pass)`, mb(job.memory.peakChildHwm)]);
    }
  };
  big('audio 100 MB WAV', figures.audio, true);
  big('image 25 MB JPEG', figures.image, false);
  const s = figures.series;
  rows.push([
    'image series: jobs',
    `${s.jobs} (${s.completed} completed, ${s.inline} inline, ${s.queued} queued, ${s.failed.length} failed, ${s.restarts} restarts)`,
  ]);
  rows.push(['image series: VmRSS after warm-up', mb(s.rssAfterWarmup)]);
  rows.push([`image series: VmRSS after ${s.jobs}`, mb(s.rssAfterAll)]);
  rows.push(['image series: ratio', `${s.ratio}×`]);
  rows.push(['image series: VmHWM at the end', mb(s.hwmAfterAll)]);
  const width = Math.max(...rows.map(([label]) => label.length));
  return [
    `| ${'Measure'.padEnd(width)} | Value |`,
    `| ${'-'.repeat(width)} | ----- |`,
    ...rows.map(([label, value]) => `| ${label.padEnd(width)} | ${value} |`),
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// standalone run: own servers, own services

async function main() {
  const { startBenchStack } = await import('../bench/bench-stack');
  const argument = (name: string) => {
    const index = process.argv.indexOf(`--${name}`);
    return index === -1 ? undefined : Number(process.argv[index + 1]);
  };
  const stack = await startBenchStack({
    name: 'memory',
    // The long WAV is speech made here.
    tools: ['speech'],
    // Measured as deployed: plain node on the built bundle, not the sources through tsx.
    runtime: process.argv.includes('--source') ? 'source' : 'bundle',
    log: (line) => console.log(line),
  });
  try {
    const figures = await measureWorkerMemory(stack, {
      apiKey: stack.apiKey,
      imageJobs: argument('image-jobs') ?? 500,
      warmupJobs: argument('warmup-jobs') ?? 50,
      wavSeconds: argument('wav-seconds') ?? 590,
      log: (line) => console.log(line),
    });
    console.log(`\n${formatTable(figures)}`);
    if (figures.series.failed.length > 0)
      console.log(`failed: ${figures.series.failed.slice(0, 5).join('\n')}`);
    const verdict = [
      figures.audio.memory.peakTreeRss < 400 * 1024 * 1024,
      figures.image.memory.hwm < 400 * 1024 * 1024,
      figures.series.ratio <= 1.5,
    ];
    console.log(
      `\nbounds (audio tree < 400 MiB, image peak < 400 MiB, series ≤ 1.5×): ${verdict.map((ok) => (ok ? 'ok' : 'EXCEEDED')).join(', ')}`,
    );
  } finally {
    await stack.stop();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main();
}
