import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ImageFixtures } from '@tamp/scripts/fixtures/images';
import { buildPdf } from '@tamp/scripts/fixtures/pdf';
import {
  generateSpeechFixture,
  probeDurationSec,
  type SpeechFixture,
} from '@tamp/scripts/fixtures/speech';
import { pixelsOnWhite, scoreEncoded } from '@tamp/scripts/measure/independent-ssim';
import { integratedLoudness } from '@tamp/scripts/measure/loudness';
import { decode } from '@toon-format/toon';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFfmpegRunner } from '../../services/worker-audio/src/adapters/ffmpeg-runner';
import { countTokens } from '../../services/worker-text/src/domain/tokens';
import { startTestStack, type TestAccount, type TestStack, uploadFile } from '../support/stack';

/**
 * Every preset of every pipeline and custom chains, end to end over HTTP, on media made at test
 * time. Every claim is measured on the downloaded output (ffprobe, ebur128, sharp, magic bytes,
 * word sequences, TOON decoding, SSIM by ssim.js for lossy images), never taken from the job's
 * own metrics alone. The SSIM floors sit about 0.03 under what the fixtures score today
 * (2026-11-27): an encoder that breaks colour, geometry or quality falls far below them.
 */

interface Metrics {
  inputSize: number;
  outputSize: number;
  compressionRatio: number;
  operationsApplied: string[];
  processingMs: number;
  [extra: string]: unknown;
}

interface Job {
  id: string;
  status: string;
  error?: string;
  result?: { outputUrl?: string; outputText?: string; metrics: Metrics };
}

let stack: TestStack;
let account: TestAccount;
let dir: string;
let images: ImageFixtures;
const runner = createFfmpegRunner();

/** Inputs of every job this file completes, for the usage check at the end. */
const expectedUsage = {
  audio: { requests: 0, seconds: 0, inputBytes: 0 },
  image: { requests: 0, megapixels: 0, inputBytes: 0 },
  text: { requests: 0, characters: 0, inputBytes: 0 },
};

let paused: SpeechFixture; // 8 sentences with 2 s pauses of digital silence
let plain: SpeechFixture; // the same sentences without inserted pauses
let pausedId: string;
let plainId: string;
let pausedBytes: number;
let plainBytes: number;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tamp-pipelines-'));
  images = await ImageFixtures.create();
  const [started, pausedFixture, plainFixture] = await Promise.all([
    startTestStack(),
    generateSpeechFixture(dir, 'paused', { pauseSec: 2, sentenceGainsDb: [0, -8] }),
    generateSpeechFixture(dir, 'plain'),
  ]);
  stack = started;
  paused = pausedFixture;
  plain = plainFixture;
  account = await stack.createAccount({ plan: 'pro' });
  const pausedWav = await readFile(paused.wavPath);
  const plainWav = await readFile(plain.wavPath);
  pausedBytes = pausedWav.length;
  plainBytes = plainWav.length;
  pausedId = await uploadFile(stack, account.apiKey, 'paused.wav', pausedWav);
  plainId = await uploadFile(stack, account.apiKey, 'plain.wav', plainWav);
  await submitAudioJobs();
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  await images?.cleanup();
  if (dir) await rm(dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// helpers

async function waitForJob(id: string): Promise<Job> {
  for (let round = 0; round < 8; round++) {
    const response = await stack.api<Job>('GET', `/v1/jobs/${id}?wait=30`, {
      token: account.apiKey,
    });
    expect(response.status).toBe(200);
    const job = response.body.data!;
    if (job.status === 'completed' || job.status === 'failed') return job;
  }
  throw new Error(`job ${id} did not finish\n${stack.logs()}`);
}

/** Creates a job and returns it completed (inline or after the queue); fails on a failed job. */
async function runJob(path: string, body: Record<string, unknown>): Promise<Job> {
  const created = await stack.api<Job>('POST', path, { token: account.apiKey, body });
  if (created.status !== 200 && created.status !== 202) {
    throw new Error(`${path} answered ${created.status}: ${JSON.stringify(created.body)}`);
  }
  const job = created.status === 200 ? created.body.data! : await waitForJob(created.body.data!.id);
  if (job.status !== 'completed') {
    throw new Error(`job ${job.id} ${job.status}: ${job.error}\n${stack.logs()}`);
  }
  return job;
}

async function download(job: Job): Promise<{ bytes: Buffer; fileName: string }> {
  const url = job.result?.outputUrl;
  expect(url, 'outputUrl').toBeTypeOf('string');
  const response = await fetch(url!);
  expect(response.status).toBe(200);
  const fileName = new URL(url!).pathname.split('/').pop()!;
  return { bytes: Buffer.from(await response.arrayBuffer()), fileName };
}

/** The metrics of docs/decisions.md#what-a-job-holds, checked against the bytes actually uploaded and downloaded. */
function expectMetrics(
  metrics: Metrics,
  inputSize: number,
  outputSize: number,
  operations: string[],
) {
  expect(metrics.inputSize).toBe(inputSize);
  expect(metrics.outputSize).toBe(outputSize);
  expect(metrics.compressionRatio).toBe(Math.round((inputSize / outputSize) * 1000) / 1000);
  expect(metrics.operationsApplied).toEqual(operations);
  expect(metrics.processingMs).toBeTypeOf('number');
  expect(metrics.processingMs).toBeGreaterThanOrEqual(0);
}

// ---------------------------------------------------------------------------------------------
// audio

interface AudioOutput {
  job: Job;
  path: string;
  fileName: string;
  size: number;
  durationSec: number;
  channels: number;
  codec: string;
  formatName: string;
}

/**
 * Every audio job of this file, created up front (audio is always queued and the worker takes one
 * at a time), so the worker runs them while the image and text tests go on.
 */
const AUDIO_JOBS: Record<string, { input: 'paused' | 'plain'; body: Record<string, unknown> }> = {
  'preset-chill': { input: 'paused', body: { preset: 'chill' } },
  'preset-medium': { input: 'paused', body: { preset: 'medium' } },
  'preset-aggressive': { input: 'paused', body: { preset: 'aggressive' } },
  'preset-podcast': { input: 'paused', body: { preset: 'podcast' } },
  'preset-lecture': { input: 'paused', body: { preset: 'lecture' } },
  speedup: {
    input: 'plain',
    body: { operations: [{ type: 'speedup', params: { rate: 1.5 } }, { type: 'encode' }] },
  },
  normalize: {
    input: 'paused',
    body: { operations: [{ type: 'normalize', params: { targetLevel: -16 } }] },
  },
  trim: {
    input: 'paused',
    body: { operations: [{ type: 'trim-silence', params: { aggressiveness: 0.5 } }] },
  },
  stereo: {
    input: 'plain',
    body: {
      operations: [{ type: 'encode', params: { format: 'opus', bitrate: 48, channels: 2 } }],
    },
  },
  mono: {
    input: 'plain',
    body: {
      operations: [
        { type: 'encode', params: { format: 'mp3', channels: 2 } },
        { type: 'compress', params: { ratio: 3 } },
        { type: 'encode', params: { format: 'opus', bitrate: 32, channels: 1 } },
      ],
    },
  },
  mp3: {
    input: 'plain',
    body: { operations: [{ type: 'encode', params: { format: 'mp3', bitrate: 64, channels: 2 } }] },
  },
};
const audioJobs = new Map<string, Promise<Job>>();

async function submitAudioJobs() {
  for (const [name, { input, body }] of Object.entries(AUDIO_JOBS)) {
    const audioId = input === 'paused' ? pausedId : plainId;
    const created = await stack.api<Job>('POST', '/v1/audio', {
      token: account.apiKey,
      body: { audioId, ...body },
    });
    if (created.status !== 202) {
      throw new Error(`audio ${name}: ${created.status} ${JSON.stringify(created.body)}`);
    }
    const finished = waitForJob(created.body.data!.id);
    finished.catch(() => {}); // reported by the test that awaits it
    audioJobs.set(name, finished);
  }
}

async function runAudio(name: string, operations: string[]): Promise<AudioOutput> {
  const audio = AUDIO_JOBS[name]!.input === 'paused' ? pausedInput() : plainInput();
  const job = await audioJobs.get(name)!;
  expect(job.status, job.error).toBe('completed');
  const { bytes, fileName } = await download(job);
  const path = join(dir, `${name}-${fileName}`);
  await writeFile(path, bytes);
  expectMetrics(job.result!.metrics, audio.bytes, bytes.length, operations);
  expectedUsage.audio.requests += 1;
  expectedUsage.audio.seconds += audio.durationSec;
  expectedUsage.audio.inputBytes += audio.bytes;
  const probe = await runner.probeAudio(path, { allowedFormats: ['ogg', 'mp3'] });
  return {
    job,
    path,
    fileName,
    size: bytes.length,
    // The container's duration, measured independently of the worker's metrics.
    durationSec: await probeDurationSec(path),
    channels: probe.channels,
    codec: probe.codec,
    formatName: probe.formatName,
  };
}

function measuredKbps(output: AudioOutput): number {
  return (output.size * 8) / output.durationSec / 1000;
}

const pausedInput = () => ({ id: pausedId, bytes: pausedBytes, durationSec: paused.durationSec });
const plainInput = () => ({ id: plainId, bytes: plainBytes, durationSec: plain.durationSec });

// ---------------------------------------------------------------------------------------------
// image

const MAGIC: Record<string, (bytes: Buffer) => boolean> = {
  webp: (b) =>
    b.subarray(0, 4).toString('latin1') === 'RIFF' &&
    b.subarray(8, 12).toString('latin1') === 'WEBP',
  avif: (b) =>
    b.subarray(4, 8).toString('latin1') === 'ftyp' &&
    /avi[fs]/.test(b.subarray(8, 12).toString('latin1')),
  jpeg: (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff,
  png: (b) =>
    b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
};
const EXTENSION: Record<string, string> = { webp: 'webp', avif: 'avif', jpeg: 'jpg', png: 'png' };

interface ImageInput {
  id: string;
  /** The uploaded file, for the independent quality score of outputs. */
  path: string;
  bytes: number;
  /** As displayed (after EXIF orientation). */
  width: number;
  height: number;
}

async function uploadImage(
  name: string,
  path: string,
  displayed: { width: number; height: number },
): Promise<ImageInput> {
  const bytes = await readFile(path);
  const id = await uploadFile(stack, account.apiKey, name, bytes);
  return { id, path, bytes: bytes.length, ...displayed };
}

/** ssim.js's score of `output` against `input` upright and scaled to the output's size. */
async function independentScore(input: ImageInput, output: Buffer): Promise<number> {
  const { width, height } = await sharp(output).metadata();
  const reference = await pixelsOnWhite(
    sharp(input.path).rotate().resize(width, height, { fit: 'fill' }),
  );
  return scoreEncoded(reference, output);
}

async function runImage(
  input: ImageInput,
  body: Record<string, unknown>,
  expected: {
    format: 'webp' | 'avif' | 'jpeg' | 'png';
    operations: string[];
    inline: boolean;
    /**
     * The least SSIM of the output against the input scaled to the output's size, computed by
     * ssim.js (not the worker's own measure): for chains that keep the aspect ratio.
     */
    ssimFloor?: number;
  },
) {
  const created = await stack.api<Job>('POST', '/v1/image', {
    token: account.apiKey,
    body: { imageId: input.id, ...body },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(expected.inline ? 200 : 202);
  const job = created.status === 200 ? created.body.data! : await waitForJob(created.body.data!.id);
  expect(job.status, job.error).toBe('completed');
  const { bytes, fileName } = await download(job);
  expect(fileName).toBe(`result.${EXTENSION[expected.format]}`);
  expect(MAGIC[expected.format]!(bytes), `${expected.format} magic bytes`).toBe(true);
  const metadata = await sharp(bytes).metadata();
  expectMetrics(job.result!.metrics, input.bytes, bytes.length, expected.operations);
  expect(job.result!.metrics).toMatchObject({ width: metadata.width, height: metadata.height });
  if (expected.ssimFloor !== undefined) {
    const score = await independentScore(input, bytes);
    expect(score, `${expected.format} SSIM by ssim.js`).toBeGreaterThanOrEqual(expected.ssimFloor);
  }
  expectedUsage.image.requests += 1;
  expectedUsage.image.megapixels += (input.width * input.height) / 1e6;
  expectedUsage.image.inputBytes += input.bytes;
  return { job, bytes, metadata };
}

describe('Image presets and operations', () => {
  let landscape: ImageInput; // 1600×1200 JPEG
  let large: ImageInput; // 3000×2000 JPEG
  let pngAlpha: ImageInput; // 900×600 PNG with transparency
  let webpInput: ImageInput; // 1200×800 WebP
  let rotatedPath: string;
  let rotated: ImageInput; // stored 600×400, EXIF orientation 6: displayed 400×600

  beforeAll(async () => {
    const [a, b, c, d, e] = await Promise.all([
      images.photo({ width: 1600, height: 1200, seed: 11 }),
      images.photo({ width: 3000, height: 2000, seed: 12 }),
      images.photo({ width: 900, height: 600, format: 'png', alpha: true, seed: 13 }),
      images.photo({ width: 1200, height: 800, format: 'webp', seed: 14 }),
      images.photo({ width: 600, height: 400, orientation: 6, seed: 15 }),
    ]);
    rotatedPath = e;
    [landscape, large, pngAlpha, webpInput, rotated] = await Promise.all([
      uploadImage('landscape.jpg', a, { width: 1600, height: 1200 }),
      uploadImage('large.jpeg', b, { width: 3000, height: 2000 }),
      uploadImage('alpha.png', c, { width: 900, height: 600 }),
      uploadImage('photo.webp', d, { width: 1200, height: 800 }),
      uploadImage('rotated.jpg', e, { width: 400, height: 600 }),
    ]);
  }, 120_000);

  it('chill: WebP at the original dimensions', async () => {
    const { metadata } = await runImage(
      landscape,
      { preset: 'chill' },
      { format: 'webp', operations: ['encode'], inline: true, ssimFloor: 0.9 },
    );
    expect([metadata.width, metadata.height]).toEqual([1600, 1200]);
  });

  it('medium: a small image stays as it is; a large one fits inside 2560 px', async () => {
    const small = await runImage(
      landscape,
      { preset: 'medium' },
      { format: 'webp', operations: ['resize', 'encode'], inline: true, ssimFloor: 0.87 },
    );
    expect([small.metadata.width, small.metadata.height]).toEqual([1600, 1200]);
    const big = await runImage(
      large,
      { preset: 'medium' },
      {
        format: 'webp',
        operations: ['resize', 'encode'],
        inline: large.bytes <= 5 * 1024 * 1024,
        ssimFloor: 0.87,
      },
    );
    expect(big.metadata.width).toBe(2560);
    expect(Math.abs(big.metadata.height! - Math.round((2560 * 2000) / 3000))).toBeLessThanOrEqual(
      1,
    );
  });

  it('aggressive: AVIF fitted inside 2048 px, always queued', async () => {
    const { metadata } = await runImage(
      large,
      { preset: 'aggressive' },
      { format: 'avif', operations: ['resize', 'encode'], inline: false, ssimFloor: 0.89 },
    );
    expect(metadata.width).toBe(2048);
    expect(Math.abs(metadata.height! - Math.round((2048 * 2000) / 3000))).toBeLessThanOrEqual(1);
  });

  it('thumbnail: exactly 512×512 WebP', async () => {
    for (const input of [landscape, pngAlpha]) {
      const { metadata } = await runImage(
        input,
        { preset: 'thumbnail' },
        { format: 'webp', operations: ['resize', 'encode'], inline: true },
      );
      expect([metadata.width, metadata.height]).toEqual([512, 512]);
    }
  });

  it('resize fits: inside never enlarges, cover and contain give exactly the box', async () => {
    const cases: Array<{
      input: ImageInput;
      params: Record<string, unknown>;
      width: number;
      height: number;
      tolerance?: number;
    }> = [
      {
        input: landscape,
        params: { width: 800, height: 800, fit: 'inside' },
        width: 800,
        height: 600,
      },
      {
        input: landscape,
        params: { width: 4000, height: 4000, fit: 'inside' },
        width: 1600,
        height: 1200,
      },
      { input: landscape, params: { width: 640 }, width: 640, height: 480, tolerance: 1 },
      { input: landscape, params: { height: 300 }, width: 400, height: 300, tolerance: 1 },
      {
        input: landscape,
        params: { width: 300, height: 500, fit: 'cover' },
        width: 300,
        height: 500,
      },
      {
        input: webpInput,
        params: { width: 2000, height: 1500, fit: 'cover', position: 'entropy' },
        width: 2000,
        height: 1500,
      },
      {
        input: webpInput,
        params: { width: 500, height: 300, fit: 'contain' },
        width: 500,
        height: 300,
      },
      {
        input: pngAlpha,
        params: { width: 1000, height: 1000, fit: 'contain' },
        width: 1000,
        height: 1000,
      },
    ];
    for (const { input, params, width, height, tolerance = 0 } of cases) {
      const { metadata } = await runImage(
        input,
        { operations: [{ type: 'resize', params }] },
        { format: 'webp', operations: ['resize', 'encode'], inline: true },
      );
      expect(metadata.width, JSON.stringify(params)).toBeGreaterThanOrEqual(width - tolerance);
      expect(metadata.width, JSON.stringify(params)).toBeLessThanOrEqual(width + tolerance);
      expect(metadata.height, JSON.stringify(params)).toBeGreaterThanOrEqual(height - tolerance);
      expect(metadata.height, JSON.stringify(params)).toBeLessThanOrEqual(height + tolerance);
    }
  });

  it('encodes webp, avif, jpeg and png (by magic bytes), from JPEG, PNG and WebP inputs', async () => {
    const cases = [
      { input: pngAlpha, format: 'jpeg' as const },
      { input: webpInput, format: 'png' as const },
      { input: landscape, format: 'webp' as const },
      { input: pngAlpha, format: 'avif' as const },
    ];
    for (const { input, format } of cases) {
      const { metadata } = await runImage(
        input,
        {
          operations: [
            { type: 'encode', params: { format, quality: 60, effort: 1 } },
            { type: 'resize', params: { width: 320 } },
          ],
        },
        { format, operations: ['resize', 'encode'], inline: format !== 'avif', ssimFloor: 0.93 },
      );
      expect(metadata.width).toBe(320);
      expect(metadata.format).toBe(format === 'avif' ? 'heif' : format);
    }
  });

  it('auto: the smallest format reaching the SSIM target, stored under its extension, with the candidates', async () => {
    // Without accept the output may be AVIF, so the job is queued; without AVIF it may run inline.
    for (const accept of [undefined, ['webp', 'jpeg']]) {
      const created = await stack.api<Job>('POST', '/v1/image', {
        token: account.apiKey,
        body: {
          imageId: landscape.id,
          operations: [
            { type: 'resize', params: { width: 400 } },
            { type: 'encode', params: { format: 'auto', ssim: 0.9, ...(accept && { accept }) } },
          ],
        },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(accept ? 200 : 202);
      const job =
        created.status === 200 ? created.body.data! : await waitForJob(created.body.data!.id);
      expect(job.status, job.error).toBe('completed');
      const metrics = job.result!.metrics as Metrics & {
        format: string;
        ssim: number;
        ssimTarget: number;
        candidates: { format: string; bytes?: number; meetsTarget?: boolean }[];
      };
      const { bytes, fileName } = await download(job);
      expect(fileName).toBe(`result.${EXTENSION[metrics.format]}`);
      expect(MAGIC[metrics.format]!(bytes), `${metrics.format} magic bytes`).toBe(true);
      expectMetrics(metrics, landscape.bytes, bytes.length, ['resize', 'encode']);
      expect(metrics.ssimTarget).toBe(0.9);
      expect(metrics.ssim).toBeGreaterThanOrEqual(0.9);
      // The target holds by an independent measure too, which agrees with the worker's.
      const score = await independentScore(landscape, bytes);
      expect(score).toBeGreaterThanOrEqual(0.9);
      expect(Math.abs(score - metrics.ssim)).toBeLessThan(0.005);
      expect(metrics.candidates.map((candidate) => candidate.format).sort()).toEqual(
        accept ? ['jpeg', 'webp'] : ['avif', 'jpeg', 'webp'],
      );
      const meeting = metrics.candidates.filter((candidate) => candidate.meetsTarget);
      expect(bytes.length).toBe(Math.min(...meeting.map((candidate) => candidate.bytes!)));
      expectedUsage.image.requests += 1;
      expectedUsage.image.megapixels += (landscape.width * landscape.height) / 1e6;
      expectedUsage.image.inputBytes += landscape.bytes;
    }
  });

  it('applies EXIF orientation before resizing and strips the tag', async () => {
    const { bytes, metadata } = await runImage(
      rotated,
      { operations: [{ type: 'encode', params: { format: 'png', quality: 100 } }] },
      { format: 'png', operations: ['encode'], inline: true },
    );
    expect([metadata.width, metadata.height]).toEqual([400, 600]);
    expect(metadata.orientation ?? 1).toBe(1);
    // The pixels are the upright picture: compare with sharp's own auto-orientation.
    const reference = await sharp(rotatedPath).rotate().resize(40, 60).raw().toBuffer();
    const actual = await sharp(bytes).removeAlpha().resize(40, 60).raw().toBuffer();
    let difference = 0;
    for (let index = 0; index < reference.length; index++) {
      difference += Math.abs(reference[index]! - actual[index]!);
    }
    expect(difference / reference.length).toBeLessThan(6);

    const resized = await runImage(
      rotated,
      { operations: [{ type: 'resize', params: { width: 200 } }] },
      { format: 'webp', operations: ['resize', 'encode'], inline: true },
    );
    expect([resized.metadata.width, resized.metadata.height]).toEqual([200, 300]);
  });
});

// ---------------------------------------------------------------------------------------------
// text

/** Words, numbers and emoji in order; compatibility forms folded the way Unicode defines them. */
function wordSequence(text: string): string[] {
  return text.normalize('NFKC').match(/[\p{L}\p{M}\p{N}]+|\p{Extended_Pictographic}/gu) ?? [];
}

function codePoints(text: string): number {
  return [...text].length;
}

function countText(input: string) {
  expectedUsage.text.requests += 1;
  expectedUsage.text.characters += codePoints(input);
  expectedUsage.text.inputBytes += Buffer.byteLength(input, 'utf8');
}

async function runText(text: string, body: Record<string, unknown>, operations: string[]) {
  const job = await runJob('/v1/text', { text, ...body });
  const outputText = job.result?.outputText;
  expect(outputText).toBeTypeOf('string');
  const metrics = job.result!.metrics as Metrics & { tokensIn: number; tokensOut: number };
  expectMetrics(
    metrics,
    Buffer.byteLength(text, 'utf8'),
    Buffer.byteLength(outputText!, 'utf8'),
    operations,
  );
  expect(metrics.tokensIn).toBe(countTokens(text));
  expect(metrics.tokensOut).toBe(countTokens(outputText!));
  countText(text);
  return { outputText: outputText!, metrics };
}

const PROSE = [
  '#  Release notes  —  Tamp 0.1  ',
  '',
  '',
  '',
  'Tamp   compresses audio,\u00a0images and text.   It was built in 2025 by a small team…  ',
  'The “fast path” answers in well under a second ​for small inputs; larger inputs are queued.\t\t',
  '',
  '',
  'Highlights ............................ 3',
  '* Loudness normalisation to −16 LUFS (EBU R128) 🎧',
  '* Smart crops for thumbnails 📸 and the ﬁnest AVIF encoding',
  '* JSON  →  TOON for LLM prompts: fewer tokens, same data!!!!',
  '',
  '',
  '```ts',
  'const   kept =  "code is left   alone";',
  '```',
  '',
  'Thanks to everyone who tested it — especially Zoë, José and 李雷 — 100 % appreciated.   ',
  '',
].join('\n');

/** A realistic API response: 80 orders with the same fields. */
function ordersJson() {
  const statuses = ['paid', 'shipped', 'refunded', 'pending'];
  return Array.from({ length: 80 }, (_, index) => ({
    id: `ord_${String(100_000 + index * 37)}`,
    customer: `customer${(index * 7) % 23}@example.com`,
    status: statuses[index % statuses.length],
    items: (index % 5) + 1,
    totalCents: 1999 + ((index * 1237) % 50_000),
    currency: 'EUR',
    createdAt: new Date(Date.UTC(2025, 0, 1 + (index % 28), index % 24, 0, 0)).toISOString(),
  }));
}

describe('Text presets and operations', () => {
  it('chill, medium, aggressive and trim 0/100 keep every word, number and emoji in order', async () => {
    const expectedWords = wordSequence(PROSE);
    let previousLength = Number.POSITIVE_INFINITY;
    for (const [body, operations] of [
      [{ preset: 'chill' }, ['trim']],
      [{ preset: 'medium' }, ['trim']],
      [{ preset: 'aggressive' }, ['trim', 'json-to-toon']],
      [{ operations: [{ type: 'trim', params: { intensity: 0 } }] }, ['trim']],
      [{ operations: [{ type: 'trim', params: { intensity: 100 } }] }, ['trim']],
    ] as const) {
      const { outputText, metrics } = await runText(PROSE, body, [...operations]);
      expect(wordSequence(outputText), JSON.stringify(body)).toEqual(expectedWords);
      expect(outputText.length).toBeLessThanOrEqual(PROSE.length);
      expect(metrics.tokensOut).toBeLessThanOrEqual(metrics.tokensIn);
      if ('preset' in body) {
        // chill ≤ … higher intensity never gives longer output
        expect(outputText.length).toBeLessThanOrEqual(previousLength);
        previousLength = outputText.length;
      }
    }
  });

  it('json-to-toon on a uniform array: decodes back to the same JSON with ≥ 30 % fewer tokens', async () => {
    const orders = ordersJson();
    const pretty = JSON.stringify(orders, null, 2);
    const { outputText, metrics } = await runText(
      pretty,
      { operations: [{ type: 'json-to-toon' }] },
      ['json-to-toon'],
    );
    expect(decode(outputText)).toEqual(orders);
    expect(metrics.tokensOut).toBeLessThanOrEqual(metrics.tokensIn * 0.7);
    // Even against compact JSON the saving holds.
    const compact = JSON.stringify(orders);
    const fromCompact = await runText(compact, { preset: 'aggressive' }, ['trim', 'json-to-toon']);
    expect(decode(fromCompact.outputText)).toEqual(orders);
    expect(fromCompact.metrics.tokensOut).toBeLessThanOrEqual(fromCompact.metrics.tokensIn * 0.7);
    console.info(
      `json-to-toon: pretty ${metrics.tokensIn}→${metrics.tokensOut} tokens, compact ${fromCompact.metrics.tokensIn}→${fromCompact.metrics.tokensOut}`,
    );
  });

  it('json-to-toon inside prose: the ```toon block decodes to the fenced JSON, prose untouched', async () => {
    const orders = ordersJson().slice(0, 40);
    const text = `Here are the latest orders:\n\n\`\`\`json\n${JSON.stringify(orders, null, 2)}\n\`\`\`\n\nPlease summarise them.\n`;
    const { outputText } = await runText(text, { preset: 'aggressive' }, ['trim', 'json-to-toon']);
    const block = /```toon\n([\s\S]*?)\n```/.exec(outputText);
    expect(block, outputText.slice(0, 300)).not.toBeNull();
    expect(decode(block![1]!)).toEqual(orders);
    expect(outputText.startsWith('Here are the latest orders:')).toBe(true);
    expect(outputText).toContain('Please summarise them.');
  });

  it('json-to-toon never increases tokens on deeply nested JSON', async () => {
    // Real, irregular nested JSON: part of this repository's own lockfile.
    const lock = JSON.parse(await readFile(join(process.cwd(), 'package-lock.json'), 'utf8')) as {
      packages: Record<string, unknown>;
    };
    const nested = {
      name: 'tamp',
      lockfileVersion: 3,
      packages: Object.fromEntries(Object.entries(lock.packages).slice(0, 25)),
      deep: { a: { b: { c: { d: { e: { f: [{ g: 1, h: [1, { i: 'x' }] }, { j: null }] } } } } } },
    };
    for (const text of [JSON.stringify(nested), JSON.stringify(nested, null, 2)]) {
      const { outputText, metrics } = await runText(
        text,
        { operations: [{ type: 'json-to-toon' }] },
        ['json-to-toon'],
      );
      expect(metrics.tokensOut).toBeLessThanOrEqual(metrics.tokensIn);
      // Converted or not, the data is the same.
      const value = outputText === text ? JSON.parse(outputText) : decode(outputText);
      expect(value).toEqual(nested);
    }
  });

  it('fileId with a PDF: queued, outputUrl to a .txt file with the extracted text', async () => {
    const pages = [
      ['Quarterly report (draft)', 'Revenue grew by 12 percent in the third quarter.'],
      ['Second page: costs', 'Costs fell by 3 percent; hiring continued.'],
      ['Third page: outlook', 'We expect steady growth next year.'],
    ];
    const pdf = buildPdf(pages);
    const fileId = await uploadFile(stack, account.apiKey, 'report.pdf', pdf);
    const created = await stack.api<Job>('POST', '/v1/text', {
      token: account.apiKey,
      body: { fileId, preset: 'chill' },
    });
    expect(created.status).toBe(202);
    const job = await waitForJob(created.body.data!.id);
    expect(job.status).toBe('completed');
    expect(job.result?.outputText).toBeUndefined();
    const { bytes, fileName } = await download(job);
    expect(fileName).toBe('result.txt');
    const text = bytes.toString('utf8');
    expect(wordSequence(text)).toEqual(wordSequence(pages.flat().join('\n')));
    expectMetrics(job.result!.metrics, pdf.length, bytes.length, ['trim']);
    expectedUsage.text.requests += 1;
    // Usage counts the extracted text: lines joined by newlines, pages by a blank line.
    expectedUsage.text.characters += codePoints(
      pages.map((lines) => lines.join('\n')).join('\n\n'),
    );
    expectedUsage.text.inputBytes += pdf.length;
  });

  it('fileId with a .txt: queued, outputUrl to a trimmed .txt file', async () => {
    const bytes = Buffer.from(PROSE, 'utf8');
    const fileId = await uploadFile(stack, account.apiKey, 'notes.txt', bytes);
    const created = await stack.api<Job>('POST', '/v1/text', {
      token: account.apiKey,
      body: { fileId, preset: 'medium' },
    });
    expect(created.status).toBe(202);
    const job = await waitForJob(created.body.data!.id);
    expect(job.status).toBe('completed');
    const output = await download(job);
    expect(output.fileName).toBe('result.txt');
    expect(wordSequence(output.bytes.toString('utf8'))).toEqual(wordSequence(PROSE));
    expectMetrics(job.result!.metrics, bytes.length, output.bytes.length, ['trim']);
    countText(PROSE);
  });
});

// Audio tests last: their jobs were created in beforeAll and ran during the tests above.

describe('Audio presets', () => {
  const presets = [
    { preset: 'chill', kbps: 32, ops: ['trim-silence', 'normalize', 'encode'] },
    { preset: 'medium', kbps: 24, ops: ['trim-silence', 'normalize', 'compress', 'encode'] },
    {
      preset: 'aggressive',
      kbps: 12,
      ops: ['trim-silence', 'speedup', 'normalize', 'compress', 'encode'],
    },
    { preset: 'podcast', kbps: 24, ops: ['trim-silence', 'normalize', 'compress', 'encode'] },
    { preset: 'lecture', kbps: 16, ops: ['trim-silence', 'speedup', 'normalize', 'encode'] },
  ];
  for (const { preset, kbps, ops } of presets) {
    it(`${preset}: mono Ogg/Opus at ${kbps} kbit/s (±25 %), shorter than the paused input`, async () => {
      const output = await runAudio(`preset-${preset}`, ops);
      expect(output.fileName).toBe('result.ogg');
      expect((await readFile(output.path)).subarray(0, 4).toString('latin1')).toBe('OggS');
      expect(output.formatName).toBe('ogg');
      expect(output.codec).toBe('opus');
      expect(output.channels).toBe(1);
      expect(output.durationSec).toBeLessThan(paused.durationSec);
      const rate = measuredKbps(output);
      console.info(`audio preset ${preset}: ${rate.toFixed(1)} kbit/s, ${output.durationSec}s`);
      expect(rate).toBeGreaterThan(kbps * 0.75);
      expect(rate).toBeLessThan(kbps * 1.25);
    });
  }
});

describe('Audio operations', () => {
  it('speedup 1.5 divides the duration of a pause-free recording by 1.5 (±3 %)', async () => {
    const output = await runAudio('speedup', ['speedup', 'encode']);
    const expected = plain.durationSec / 1.5;
    console.info(`speedup: ${plain.durationSec}s → ${output.durationSec}s (ideal ${expected})`);
    expect(Math.abs(output.durationSec - expected) / expected).toBeLessThanOrEqual(0.03);
  });

  it('normalize -16 lands within ±1.5 LU of -16 LUFS, measured on the download', async () => {
    const output = await runAudio('normalize', ['normalize', 'encode']);
    // By ffmpeg's own loudnorm analysis, not the worker's parser of its ebur128 log.
    const integrated = await integratedLoudness(output.path);
    console.info(`normalize -16: ${integrated} LUFS`);
    expect(Math.abs(integrated + 16)).toBeLessThanOrEqual(1.5);
  });

  it('trim-silence removes at least 80 % of the inserted silence and keeps the speech', async () => {
    const output = await runAudio('trim', ['trim-silence', 'encode']);
    const removed = paused.durationSec - output.durationSec;
    console.info(
      `trim-silence: inserted ${paused.insertedSilenceSec}s, removed ${removed.toFixed(2)}s, speech ${paused.speechSec.toFixed(2)}s → out ${output.durationSec}s`,
    );
    expect(removed).toBeGreaterThanOrEqual(0.8 * paused.insertedSilenceSec);
    // The spoken sentences (with espeak's own short gaps) survive: at most a few per cent go.
    expect(output.durationSec).toBeGreaterThanOrEqual(0.9 * paused.speechSec);
    // The speech is still there at a sensible level, not cut to near silence.
    expect(await integratedLoudness(output.path)).toBeGreaterThan(-40);
  });

  it('Opus bitrate within ±25 % of the target, stereo when asked (≥ 20 s input)', async () => {
    expect(plain.durationSec).toBeGreaterThanOrEqual(20);
    const output = await runAudio('stereo', ['encode']);
    expect(output.channels).toBe(2);
    expect(output.codec).toBe('opus');
    const rate = measuredKbps(output);
    console.info(`opus 48k stereo: ${rate.toFixed(1)} kbit/s over ${output.durationSec}s`);
    expect(rate).toBeGreaterThan(48 * 0.75);
    expect(rate).toBeLessThan(48 * 1.25);
  });

  it('channels 1 gives mono, and the last encode wins wherever it is placed', async () => {
    const output = await runAudio('mono', ['compress', 'encode']);
    expect(output.fileName).toBe('result.ogg');
    expect(output.channels).toBe(1);
    const rate = measuredKbps(output);
    expect(rate).toBeGreaterThan(32 * 0.75);
    expect(rate).toBeLessThan(32 * 1.25);
  });

  it('encode mp3 gives an .mp3 file (MPEG audio, CBR at the asked bitrate)', async () => {
    const output = await runAudio('mp3', ['encode']);
    expect(output.fileName).toBe('result.mp3');
    const head = (await readFile(output.path)).subarray(0, 3);
    const isId3 = head.toString('latin1') === 'ID3';
    const isFrameSync = head[0] === 0xff && (head[1]! & 0xe0) === 0xe0;
    expect(isId3 || isFrameSync).toBe(true);
    expect(output.formatName).toBe('mp3');
    expect(output.codec).toBe('mp3');
    expect(output.channels).toBe(2);
    const rate = measuredKbps(output);
    expect(rate).toBeGreaterThan(64 * 0.9);
    expect(rate).toBeLessThan(64 * 1.1);
  });
});

// ---------------------------------------------------------------------------------------------
// usage

describe('Usage after completion', () => {
  it('counts audio minutes, image megapixels and text characters of every completed job', async () => {
    type Usage = Record<'audio' | 'image' | 'text', Record<string, number>>;
    let usage: Usage | undefined;
    for (let attempt = 0; attempt < 50; attempt++) {
      usage = (await stack.api<Usage>('GET', '/v1/usage/current', { token: account.apiKey })).body
        .data;
      if (
        usage?.audio.requests === expectedUsage.audio.requests &&
        usage.image.requests === expectedUsage.image.requests &&
        usage.text.requests === expectedUsage.text.requests
      )
        break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    console.info(`usage: ${JSON.stringify(usage)} expected ${JSON.stringify(expectedUsage)}`);
    expect(usage!.audio.requests).toBe(expectedUsage.audio.requests);
    expect(usage!.audio.inputBytes).toBe(expectedUsage.audio.inputBytes);
    expect(usage!.audio.minutes).toBeCloseTo(expectedUsage.audio.seconds / 60, 2);
    expect(usage!.image).toEqual({
      requests: expectedUsage.image.requests,
      inputBytes: expectedUsage.image.inputBytes,
      megapixels: Math.round(expectedUsage.image.megapixels * 1000) / 1000,
    });
    expect(usage!.text).toEqual({
      requests: expectedUsage.text.requests,
      inputBytes: expectedUsage.text.inputBytes,
      characters: expectedUsage.text.characters,
    });
  });
});
