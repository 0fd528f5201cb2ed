/**
 * One process of the bare-work baseline (bare-work.ts starts one per core): the worker's own
 * code for one kind of job, called in a loop on the same input with nothing around it (no NATS,
 * no S3, no job service, no database). After one untimed run (the text worker's token tables,
 * libvips and ffmpeg loaded), it runs for a fixed time and sends its parent how many jobs it did
 * and the CPU seconds they took, its own and those of the ffmpeg processes it started.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { audioJobBody, imageJobBody, type Pipeline, textJobBody } from '@tamp/proto';
import { resolveChain } from '../../services/gateway/src/domain/job-requests';
import { createFfmpegRunner } from '../../services/worker-audio/src/adapters/ffmpeg-runner';
import { processImage } from '../../services/worker-image/src/adapters/sharp-pipeline';
import { configureSharp } from '../../services/worker-image/src/adapters/sharp-runtime';
import { configSchema as imageWorkerConfig } from '../../services/worker-image/src/config';
import { MemoryBudget } from '../../services/worker-image/src/domain/memory-budget';
import { runTextPipeline } from '../../services/worker-text/src/domain/pipeline';
import { audioWorkerToolEnv } from '../stack/services';
import { cpuSecondsOf } from './process-cpu';

export interface BareWorkTask {
  pipeline: Pipeline;
  /** The job's request body: its chain is resolved as the gateway resolves it. */
  body: Record<string, unknown>;
  /** The job's input (upload or text), as the worker has it on disk. */
  inputPath: string;
  /** This process's own folder for outputs. */
  scratchDir: string;
  seconds: number;
}

export interface BareWorkReport {
  jobs: number;
  cpuSeconds: number;
  elapsedSec: number;
}

/** A bound on the loop besides its time: no kind of job is this fast. */
const MAX_JOBS = 100_000;

type RunJob = () => Promise<void>;

/** The text worker's pipeline (trim, token counts) on the text, in this thread. */
async function textJob(task: BareWorkTask): Promise<RunJob> {
  const operations = resolveChain('text', textJobBody.parse(task.body));
  const text = new TextDecoder('utf-8').decode(await readFile(task.inputPath));
  return async () => {
    runTextPipeline(text, operations);
  };
}

/** The image worker's sharp pipeline, file to file, with the worker's default settings. */
async function imageJob(task: BareWorkTask): Promise<RunJob> {
  const operations = resolveChain('image', imageJobBody.parse(task.body));
  const settings = imageWorkerConfig
    .pick({
      IMAGE_MAX_PIXELS: true,
      IMAGE_MEMORY_BUDGET_MB: true,
      SHARP_CACHE_MB: true,
      SHARP_CONCURRENCY: true,
    })
    .parse({});
  configureSharp({
    cacheMemoryMb: settings.SHARP_CACHE_MB,
    concurrency: settings.SHARP_CONCURRENCY,
  });
  const memory = new MemoryBudget(settings.IMAGE_MEMORY_BUDGET_MB * 1024 * 1024);
  return async () => {
    await processImage({
      inputPath: task.inputPath,
      outputPath: join(task.scratchDir, 'output'),
      operations,
      limitInputPixels: settings.IMAGE_MAX_PIXELS,
      memory,
    });
  };
}

/** The audio worker's ffmpeg runner: probe, measuring passes, encode, output loudness. */
async function audioJob(task: BareWorkTask): Promise<RunJob> {
  const operations = resolveChain('audio', audioJobBody.parse(task.body));
  // The ffmpeg and ffprobe the stack's worker is given.
  const tools = audioWorkerToolEnv();
  const runner = createFfmpegRunner({
    ffmpegPath: tools.FFMPEG_PATH,
    ffprobePath: tools.FFPROBE_PATH,
  });
  return async () => {
    await runner.processAudio({
      inputPath: task.inputPath,
      outputPath: join(task.scratchDir, 'output'),
      workDir: join(task.scratchDir, 'ffmpeg'),
      operations,
    });
  };
}

const JOBS: Record<Pipeline, (task: BareWorkTask) => Promise<RunJob>> = {
  text: textJob,
  image: imageJob,
  audio: audioJob,
};

/** CPU seconds of this process so far, with the children it has reaped (ffmpeg). */
function ownCpuSeconds(): number {
  return cpuSecondsOf([{ name: 'self', pid: process.pid }]).get('self') ?? 0;
}

async function runTask(task: BareWorkTask): Promise<BareWorkReport> {
  await mkdir(task.scratchDir, { recursive: true });
  const runJob = await JOBS[task.pipeline](task);
  await runJob();
  const cpuBefore = ownCpuSeconds();
  const started = performance.now();
  const endAt = started + task.seconds * 1000;
  let jobs = 0;
  while (performance.now() < endAt && jobs < MAX_JOBS) {
    await runJob();
    jobs++;
  }
  return {
    jobs,
    cpuSeconds: ownCpuSeconds() - cpuBefore,
    elapsedSec: (performance.now() - started) / 1000,
  };
}

const report = await runTask(JSON.parse(process.argv[2]!) as BareWorkTask);
process.send!(report, () => process.exit(0));
