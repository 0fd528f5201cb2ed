import { execFile as execFileCallback } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import type { ImageEncodeParams, ImageOperation } from '@tamp/proto';
import { imageOperationSchema } from '@tamp/proto';
import { ImageFixtures } from '@tamp/scripts/fixtures/images';
import { toolCommand } from '@tamp/scripts/infra/provision';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryBudget } from '../domain/memory-budget';
import { type ImageResult, processImage } from './sharp-pipeline';

const execFile = promisify(execFileCallback);
const MEMORY = new MemoryBudget(320 * 1024 * 1024);
const FFMPEG = toolCommand('ffmpeg');
/**
 * How far ffmpeg's SSIM may fall below the target: ffmpeg scores 8×8 blocks on a 4-pixel grid,
 * the worker 11×11 windows at every pixel, and smaller windows judge the sensor noise these
 * fixtures carry (and lossy codecs smooth away) more harshly. Measured on the 640×480 photo:
 * ffmpeg reads 0.012–0.017 below the worker around 0.90, 0.003 below around 0.98, for JPEG,
 * WebP and AVIF alike.
 */
const INDEPENDENT_TOLERANCE = 0.02;

let fixtures: ImageFixtures;
let count = 0;
let photo: string; // 640 × 480 photo-like JPEG, q92
let largePhoto: string; // 1600 × 1200: searched on a mosaic of tiles
let graphic: string; // 320 × 240 flat colours with hard edges on a transparent background
let optimisedPng: string; // the graphic as the smallest palette PNG libvips writes
let smallJpeg: string; // 200 × 150 photo at JPEG q50

/** A flat-colour graphic: a checkerboard, a striped disc and a line comb, the rest transparent. */
async function writeGraphic(path: string): Promise<string> {
  const width = 320;
  const height = 240;
  const colours = [
    [230, 60, 50],
    [40, 110, 200],
    [250, 200, 40],
    [30, 30, 30],
  ] as const;
  const pixels = Buffer.alloc(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      let colour: readonly number[] | undefined;
      if (x >= 16 && x < 150 && y >= 16 && y < 120) {
        colour = ((x >> 2) + (y >> 2)) % 2 ? colours[0] : colours[3];
      } else if ((x - 230) ** 2 + (y - 150) ** 2 < 70 ** 2) {
        colour = x % 6 < 3 ? colours[1] : colours[2];
      } else if (y > 200 && x % 10 < 2) {
        colour = colours[3];
      }
      if (colour) pixels.set([...colour, 255], (y * width + x) * 4);
    }
  }
  await sharp(pixels, { raw: { width, height, channels: 4 } })
    .png({ compressionLevel: 1 })
    .toFile(path);
  return path;
}

beforeAll(async () => {
  fixtures = await ImageFixtures.create('tamp-auto-test-');
  [photo, largePhoto, graphic, smallJpeg] = await Promise.all([
    fixtures.photo({ width: 640, height: 480, seed: 11 }),
    fixtures.photo({ width: 1600, height: 1200, seed: 5, quality: 95 }),
    writeGraphic(fixtures.path('graphic.png')),
    fixtures.photo({ width: 200, height: 150, seed: 12, quality: 50 }),
  ]);
  optimisedPng = fixtures.path('optimised.png');
  await sharp(graphic).png({ palette: true, effort: 10, compressionLevel: 9 }).toFile(optimisedPng);
});

afterAll(async () => {
  await fixtures.cleanup();
});

function encode(params: Partial<ImageEncodeParams>): ImageOperation {
  return imageOperationSchema.parse({ type: 'encode', params });
}

async function run(
  inputPath: string,
  operations: ImageOperation[],
  options: { searchBudgetMs?: number; now?: () => number } = {},
): Promise<{ result: ImageResult; outputPath: string }> {
  count += 1;
  const outputPath = fixtures.path(`auto-${count}.out`);
  const result = await processImage({
    inputPath,
    outputPath,
    operations,
    limitInputPixels: 100_000_000,
    memory: MEMORY,
    // Generous unless a test is about the budget: on a loaded machine the default 20 s of wall
    // time could drop AVIF, and these tests are about what the search finds.
    searchBudgetMs: 600_000,
    ...options,
  });
  return { result, outputPath };
}

/**
 * SSIM of `outputPath` against the reference pixels, by ffmpeg's `ssim` filter on luma (a
 * separate implementation from the worker's): both decoded by sharp to PNG, put on white.
 */
async function ffmpegSsim(
  referencePath: string,
  outputPath: string,
  resize?: { width: number },
): Promise<number> {
  count += 1;
  const referencePng = fixtures.path(`reference-${count}.png`);
  const outputPng = fixtures.path(`output-${count}.png`);
  const reference = sharp(referencePath).flatten({ background: '#ffffff' });
  await (resize ? reference.resize(resize) : reference).png().toFile(referencePng);
  await sharp(outputPath).flatten({ background: '#ffffff' }).png().toFile(outputPng);
  const { stderr } = await execFile(FFMPEG, [
    '-hide_banner',
    '-i',
    referencePng,
    '-i',
    outputPng,
    '-lavfi',
    '[0:v]format=gray[a];[1:v]format=gray[b];[a][b]ssim',
    '-f',
    'null',
    '-',
  ]);
  const match = /SSIM Y:([0-9.]+)/.exec(stderr);
  if (!match) throw new Error(`ffmpeg printed no SSIM:\n${stderr}`);
  return Number(match[1]);
}

describe('auto', () => {
  it('picks the smallest candidate that meets the target on a photo, met per ffmpeg', async () => {
    const { result, outputPath } = await run(photo, [encode({ format: 'auto', ssim: 0.9 })]);
    const candidates = result.candidates ?? [];
    expect(candidates.map((candidate) => candidate.format).sort()).toEqual([
      'avif',
      'jpeg',
      'webp',
    ]);
    const meeting = candidates.filter((candidate) => candidate.meetsTarget);
    const smallest = Math.min(...meeting.map((candidate) => candidate.bytes ?? Infinity));
    expect(result.outputSize).toBe(smallest);
    expect((await readFile(outputPath)).length).toBe(smallest);
    expect((await sharp(outputPath).metadata()).format).toBe(
      result.format === 'avif' ? 'heif' : result.format,
    );
    expect(result.extension).toBe(
      { webp: 'webp', avif: 'avif', jpeg: 'jpg', png: 'png' }[result.format],
    );
    expect(result.ssimTarget).toBe(0.9);
    expect(result.ssim).toBeGreaterThanOrEqual(0.9);
    expect(result.keptInput).toBeUndefined();
    expect(await ffmpegSsim(photo, outputPath)).toBeGreaterThanOrEqual(0.9 - INDEPENDENT_TOLERANCE);
  });

  it('without ssim, targets what a JPEG at the job quality scores, and meets it', async () => {
    const { result, outputPath } = await run(photo, [
      encode({ format: 'auto', quality: 80, accept: ['webp', 'jpeg'] }),
    ]);
    const jpeg = result.candidates?.find((candidate) => candidate.format === 'jpeg');
    expect(jpeg).toMatchObject({ quality: 80, ssim: result.ssimTarget, meetsTarget: true });
    expect(result.outputSize).toBeLessThanOrEqual(jpeg?.bytes ?? 0);
    expect(await ffmpegSsim(photo, outputPath)).toBeGreaterThanOrEqual(
      (result.ssimTarget ?? 1) - INDEPENDENT_TOLERANCE,
    );
  });

  it('chooses lossless for a flat graphic with transparency, and never JPEG', async () => {
    const { result, outputPath } = await run(graphic, [encode({ format: 'auto', ssim: 0.95 })]);
    const formats = (result.candidates ?? []).map(
      (candidate) => `${candidate.format}${candidate.lossless ? ' lossless' : ''}`,
    );
    expect(formats).toEqual(['webp', 'png lossless', 'webp lossless', 'avif']);
    const chosen = result.candidates?.find((candidate) => candidate.bytes === result.outputSize);
    expect(chosen?.lossless).toBe(true);
    expect(result.ssim).toBe(1);
    // Lossless: every pixel, alpha included, as it was.
    const [original, written] = await Promise.all(
      [graphic, outputPath].map((path) => sharp(path).ensureAlpha().raw().toBuffer()),
    );
    expect(written?.equals(original!)).toBe(true);
  });

  it('weighs only the formats in accept', async () => {
    const { result } = await run(photo, [
      encode({ format: 'auto', ssim: 0.9, accept: ['jpeg', 'png'] }),
    ]);
    expect(result.format).toBe('jpeg');
    // A photo is no graphic: no lossless PNG, and PNG has no lossy candidate in auto.
    expect(result.candidates?.map((candidate) => candidate.format)).toEqual(['jpeg']);
  });

  it('searches a large image on a mosaic and checks the full-size output on it', async () => {
    const { result, outputPath } = await run(largePhoto, [
      encode({ format: 'auto', ssim: 0.9, accept: ['webp', 'jpeg'] }),
    ]);
    const losers = result.candidates?.filter((candidate) => candidate.format !== result.format);
    expect(losers?.every((candidate) => candidate.estimated)).toBe(true);
    expect(result.ssim, JSON.stringify(result.candidates)).toBeGreaterThanOrEqual(0.9);
    expect(await ffmpegSsim(largePhoto, outputPath)).toBeGreaterThanOrEqual(
      0.9 - INDEPENDENT_TOLERANCE,
    );
  });

  it('drops later candidates when the time budget is spent, keeping the first', async () => {
    let clock = 0;
    // Every reading of the clock is a second later: the first encode of each later
    // candidate projects far past a 2 s budget.
    const now = () => (clock += 1_000);
    const { result } = await run(photo, [encode({ format: 'auto', ssim: 0.9 })], {
      searchBudgetMs: 2_000,
      now,
    });
    expect(result.candidates?.map((candidate) => [candidate.format, candidate.skipped])).toEqual([
      ['jpeg', undefined],
      ['webp', 'time-budget'],
      ['avif', 'time-budget'],
    ]);
    expect(result.format).toBe('jpeg');
  });
});

describe('ssim target with a fixed format', () => {
  it.each([0.85, 0.95])(
    'WebP meets %s per ffmpeg at the lowest quality that does',
    async (target) => {
      const { result, outputPath } = await run(photo, [encode({ format: 'webp', ssim: target })]);
      expect(result.format).toBe('webp');
      expect(result.candidates).toHaveLength(1);
      expect(result.ssim).toBeGreaterThanOrEqual(target);
      expect(await ffmpegSsim(photo, outputPath)).toBeGreaterThanOrEqual(
        target - INDEPENDENT_TOLERANCE,
      );
    },
  );

  it('a higher target gives a larger file', async () => {
    const low = await run(photo, [encode({ format: 'jpeg', ssim: 0.85 })]);
    const high = await run(photo, [encode({ format: 'jpeg', ssim: 0.95 })]);
    expect(high.result.outputSize).toBeGreaterThan(low.result.outputSize);
  });
});

describe('never larger than the input', () => {
  it.each([
    ['an optimised PNG as PNG', () => optimisedPng, encode({ format: 'png', quality: 100 })],
    [
      'an optimised PNG, auto accepting PNG only',
      () => optimisedPng,
      encode({ format: 'auto', accept: ['png'] }),
    ],
    ['a small q50 JPEG as JPEG q90', () => smallJpeg, encode({ format: 'jpeg', quality: 90 })],
    [
      'a small q50 JPEG, auto at ssim 0.99 accepting JPEG',
      () => smallJpeg,
      encode({ format: 'auto', ssim: 0.99, accept: ['jpeg'] }),
    ],
  ])('%s comes back as the input itself, flagged', async (_name, input, operation) => {
    const { result, outputPath } = await run(input(), [operation]);
    expect(result.keptInput).toBe(true);
    expect(result.outputSize).toBe(result.inputSize);
    expect((await readFile(outputPath)).equals(await readFile(input()))).toBe(true);
    expect(result.extension).toBe(input().endsWith('.png') ? 'png' : 'jpg');
  });

  it('is not kept when the format differs, the size changes or metadata must go', async () => {
    const asWebp = await run(smallJpeg, [encode({ format: 'webp', quality: 100 })]);
    expect(asWebp.result.keptInput).toBeUndefined();
    expect(asWebp.result.format).toBe('webp');
    const resized = await run(smallJpeg, [
      { type: 'resize', params: { width: 100, fit: 'inside', position: 'centre' } },
      encode({ format: 'jpeg', quality: 100 }),
    ]);
    expect(resized.result.keptInput).toBeUndefined();
    const withExif = await fixtures.photo({
      width: 200,
      height: 150,
      seed: 12,
      quality: 50,
      withExifAndXmp: true,
      name: 'small-exif.jpg',
    });
    const stripped = await run(withExif, [encode({ format: 'jpeg', quality: 100 })]);
    expect(stripped.result.keptInput).toBeUndefined();
    expect(stripped.result.outputSize).toBeGreaterThan(stripped.result.inputSize);
  });
});
