/**
 * Benchmark of the media workers against their engines called directly (issue "Media workers"),
 * in one run on fresh local infrastructure with every service as its own process:
 *
 * (a) image: one upload of a 1600×1200 photo, then N sequential inline `POST /v1/image`
 *     (preset chill: WebP quality 85) timed at the client, vs N runs of sharp on the same bytes
 *     with the same encoder settings (the worker's own `encodeSettingsFor`);
 * (b) audio: N queued jobs with the chain speedup 1.5 + encode opus 24 kbps mono, timed from
 *     the creating POST to the long-poll answering `completed`, vs N runs of the single command
 *     `ffmpeg -i in.wav -af atempo=1.5 -c:a libopus -b:a 24k -ac 1 out.ogg`.
 *
 * Prints medians and ratios. Loopback only.
 *
 *   node --import tsx scripts/bench/media.ts
 *   BENCH_IMAGE_RUNS=10 BENCH_AUDIO_RUNS=5 BENCH_AUDIO_SECONDS=60 (defaults)
 */
import { execFile as execFileCallback } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { encodeSettingsFor } from '../../services/worker-image/src/domain/encode-settings';
import { photo } from '../fixtures/media';
import { generateLongWav } from '../fixtures/speech';
import { toolCommand } from '../infra/provision';
import { type BenchStack, dataOf, startBenchStack, uploadBytes } from './bench-stack';

const execFile = promisify(execFileCallback);

const IMAGE_RUNS = Number(process.env.BENCH_IMAGE_RUNS ?? 10);
const AUDIO_RUNS = Number(process.env.BENCH_AUDIO_RUNS ?? 5);
const AUDIO_SECONDS = Number(process.env.BENCH_AUDIO_SECONDS ?? 60);
const SPEEDUP_RATE = 1.5;

const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);

interface Job {
  id: string;
  status: string;
  error?: string;
  result?: { metrics: Record<string, unknown> };
}

async function main(): Promise<void> {
  const scratch = await mkdtemp(join(tmpdir(), 'tamp-bench-media-audio-'));
  let stack: BenchStack | undefined;
  try {
    // The audio input is speech made here.
    stack = await startBenchStack({ name: 'media', tools: ['speech'], log });
    const { apiKey } = stack;
    const bench = stack;
    const call = async <Data>(method: string, path: string, body?: unknown) =>
      dataOf(await bench.api<Data>(method, path, { token: apiKey, body }), `${method} ${path}`);

    // (a) image
    const image = await photo(1600, 1200, 'jpeg');
    const imageId = await uploadBytes(stack, apiKey, 'photo.jpg', image);
    const settings = encodeSettingsFor({ format: 'webp', quality: 85, effort: 4 });
    if (settings.format !== 'webp') throw new Error('chill encodes WebP');
    const inlineRequest = async () => {
      const job = await call<Job>('POST', '/v1/image', { imageId, preset: 'chill' });
      if (job.status !== 'completed') throw new Error(`image job: ${JSON.stringify(job)}`);
    };
    const sharpDirect = async () => {
      await sharp(image, { failOn: 'error', autoOrient: true }).webp(settings.options).toBuffer();
    };
    log(`image: ${IMAGE_RUNS} inline requests and ${IMAGE_RUNS} direct sharp runs`);
    await inlineRequest(); // warm-up, not counted
    await sharpDirect();
    const imageStack = await timeRuns(IMAGE_RUNS, inlineRequest);
    const imageSharp = await timeRuns(IMAGE_RUNS, sharpDirect);

    // (b) audio
    const wavPath = join(scratch, 'speech.wav');
    await generateLongWav(wavPath, AUDIO_SECONDS, { channels: 1 });
    const wav = await readFile(wavPath);
    const audioId = await uploadBytes(stack, apiKey, 'speech.wav', wav);
    const operations = [
      { type: 'speedup', params: { rate: SPEEDUP_RATE } },
      { type: 'encode', params: { format: 'opus', bitrate: 24, channels: 1 } },
    ];
    const processingMs: number[] = [];
    const queuedJob = async () => {
      const created = await call<Job>('POST', '/v1/audio', { audioId, operations });
      let job = created;
      const deadline = Date.now() + 120_000;
      while (job.status !== 'completed' && job.status !== 'failed') {
        if (Date.now() > deadline) throw new Error(`audio job ${created.id} did not finish`);
        job = await call<Job>('GET', `/v1/jobs/${created.id}?wait=30`);
      }
      if (job.status !== 'completed') throw new Error(`audio job: ${JSON.stringify(job)}`);
      processingMs.push(Number(job.result?.metrics.processingMs));
    };
    const ffmpeg = toolCommand('ffmpeg');
    const outPath = join(scratch, 'out.ogg');
    const ffmpegDirect = async () => {
      await execFile(ffmpeg, [
        ...['-nostdin', '-y', '-v', 'error', '-i', wavPath],
        ...['-af', `atempo=${SPEEDUP_RATE}`, '-c:a', 'libopus', '-b:a', '24k', '-ac', '1', outPath],
      ]);
    };
    log(`audio: ${AUDIO_RUNS} queued jobs and ${AUDIO_RUNS} direct ffmpeg runs`);
    await queuedJob(); // warm-up, not counted
    processingMs.length = 0;
    await ffmpegDirect();
    const audioStack = await timeRuns(AUDIO_RUNS, queuedJob);
    const audioFfmpeg = await timeRuns(AUDIO_RUNS, ffmpegDirect);
    const oggBytes = (await stat(outPath)).size;

    console.log(`\nmedia benchmark, node ${process.version}, medians of the runs (ms)`);
    console.table([
      {
        case: `image inline POST /v1/image chill, 1600×1200 JPEG (${kb(image.length)})`,
        runs: IMAGE_RUNS,
        'median ms': round(median(imageStack)),
        'min ms': round(Math.min(...imageStack)),
      },
      {
        case: 'image sharp direct, webp q85 effort 4',
        runs: IMAGE_RUNS,
        'median ms': round(median(imageSharp)),
        'min ms': round(Math.min(...imageSharp)),
      },
      {
        case: `audio queued job speedup ${SPEEDUP_RATE} + opus 24k, ${AUDIO_SECONDS} s WAV (${kb(wav.length)})`,
        runs: AUDIO_RUNS,
        'median ms': round(median(audioStack)),
        'min ms': round(Math.min(...audioStack)),
      },
      {
        case: '  of which worker processingMs',
        runs: AUDIO_RUNS,
        'median ms': round(median(processingMs)),
        'min ms': round(Math.min(...processingMs)),
      },
      {
        case: `audio ffmpeg direct, atempo=${SPEEDUP_RATE} libopus 24k (${kb(oggBytes)})`,
        runs: AUDIO_RUNS,
        'median ms': round(median(audioFfmpeg)),
        'min ms': round(Math.min(...audioFfmpeg)),
      },
    ]);
    console.log(
      `ratio image: inline request / sharp direct = ${(median(imageStack) / median(imageSharp)).toFixed(2)}× (overhead ${round(median(imageStack) - median(imageSharp))} ms)`,
    );
    console.log(
      `ratio audio: queued job / ffmpeg direct = ${(median(audioStack) / median(audioFfmpeg)).toFixed(2)}× (overhead ${round(median(audioStack) - median(audioFfmpeg))} ms); worker processingMs / ffmpeg = ${(median(processingMs) / median(audioFfmpeg)).toFixed(2)}×`,
    );
  } finally {
    await stack?.stop();
    await rm(scratch, { recursive: true, force: true });
  }
}

async function timeRuns(runs: number, run: () => Promise<void>): Promise<number[]> {
  const times: number[] = [];
  for (let index = 0; index < runs; index++) {
    const startedAt = performance.now();
    await run();
    times.push(performance.now() - startedAt);
  }
  return times;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? sorted[middle]!
    : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

const round = (value: number) => Math.round(value * 10) / 10;
const kb = (bytes: number) => `${Math.round(bytes / 1024)} KB`;

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
