import { mkdir, readdir, stat } from 'node:fs/promises';
import { type ImageFormat, type ImageOperation, InvalidChainError } from '@tamp/proto';
import { EXIF_ARTIST, ImageFixtures, type SubjectBox } from '@tamp/scripts/fixtures/images';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ImageDecodeError, ImageLimitError } from '../domain/errors';
import { MemoryBudget } from '../domain/memory-budget';
import type { ResizeParams } from '../domain/operations';
import { planResize } from '../domain/resize-geometry';
import { type ImageResult, processImage } from './sharp-pipeline';

const LIMIT = 100_000_000;
const MiB = 1024 * 1024;
const MEMORY = new MemoryBudget(320 * MiB);

let fixtures: ImageFixtures;
let outputCount = 0;

// Inputs shared by several tests, generated once.
let photo: string; // 640 × 480 JPEG
let smallPhoto: string; // 200 × 150 JPEG

beforeAll(async () => {
  fixtures = await ImageFixtures.create('tamp-pipeline-test-');
  [photo, smallPhoto] = await Promise.all([
    fixtures.photo({ width: 640, height: 480, seed: 11 }),
    fixtures.photo({ width: 200, height: 150, seed: 12 }),
  ]);
});

afterAll(async () => {
  await fixtures.cleanup();
});

function resize(params: Partial<ResizeParams>): ImageOperation {
  return { type: 'resize', params: { fit: 'inside', position: 'centre', ...params } };
}

function encode(format: ImageFormat = 'webp', quality = 80, effort = 4): ImageOperation {
  return { type: 'encode', params: { format, quality, effort } };
}

interface Run {
  result: ImageResult;
  outputPath: string;
  metadata: sharp.Metadata;
}

async function run(
  inputPath: string,
  operations: ImageOperation[],
  options: { limit?: number; outputDir?: string; memory?: MemoryBudget } = {},
): Promise<Run> {
  outputCount += 1;
  // A neutral extension: the format must come from the encode operation, not the file name.
  const outputPath = `${options.outputDir ?? fixtures.dir}/output-${outputCount}.out`;
  const result = await processImage({
    inputPath,
    outputPath,
    operations,
    limitInputPixels: options.limit ?? LIMIT,
    memory: options.memory ?? MEMORY,
  });
  const metadata = await sharp(outputPath).metadata();
  return { result, outputPath, metadata };
}

function outputPathFor(
  inputPath: string,
  operations: ImageOperation[],
  options: { limit?: number; memory?: MemoryBudget; signal?: AbortSignal } = {},
) {
  outputCount += 1;
  const outputPath = fixtures.path(`failed-${outputCount}.out`);
  const outcome = processImage({
    inputPath,
    outputPath,
    operations,
    limitInputPixels: options.limit ?? LIMIT,
    memory: options.memory ?? MEMORY,
    signal: options.signal,
  });
  return { outcome, outputPath };
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** RGBA of the pixel at (x, y). */
async function pixelAt(path: string, x: number, y: number): Promise<number[]> {
  const { data, info } = await sharp(path)
    .ensureAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  const offset = (y * info.width + x) * 4;
  return [...data.subarray(offset, offset + 4)];
}

describe('resize dimensions', () => {
  const box = { width: 300, height: 200 };
  const expected = {
    // 640 × 480 fitted inside 300 × 200: the height limits, 480 / 200 = 2.4 → 266.7 wide.
    inside: { width: 267, height: 200 },
    cover: box,
    contain: box,
  };

  describe.each(['inside', 'cover', 'contain'] as const)('fit %s', (fit) => {
    it.each(['centre', 'attention', 'entropy'] as const)('position %s', async (position) => {
      const { result, metadata } = await run(photo, [resize({ ...box, fit, position }), encode()]);
      expect({ width: result.widthOut, height: result.heightOut }).toEqual(expected[fit]);
      expect({ width: metadata.width, height: metadata.height }).toEqual(expected[fit]);
      expect(planResize({ width: 640, height: 480 }, { ...box, fit, position })).toEqual(
        expected[fit],
      );
    });
  });

  it('inside with one side given follows the aspect ratio', async () => {
    const byWidth = await run(photo, [resize({ width: 320 }), encode()]);
    expect([byWidth.metadata.width, byWidth.metadata.height]).toEqual([320, 240]);
    const byHeight = await run(photo, [resize({ height: 120 }), encode()]);
    expect([byHeight.metadata.width, byHeight.metadata.height]).toEqual([160, 120]);
  });

  it('inside never enlarges a smaller image', async () => {
    for (const params of [{ width: 800, height: 800 }, { width: 1000 }, { height: 1000 }]) {
      const { result, metadata } = await run(smallPhoto, [resize(params), encode()]);
      expect([metadata.width, metadata.height]).toEqual([200, 150]);
      expect([result.widthOut, result.heightOut]).toEqual([200, 150]);
    }
  });

  it('cover and contain enlarge a smaller image to exactly the box', async () => {
    for (const fit of ['cover', 'contain'] as const) {
      const { metadata } = await run(smallPhoto, [
        resize({ width: 400, height: 400, fit }),
        encode(),
      ]);
      expect([metadata.width, metadata.height]).toEqual([400, 400]);
    }
  });

  it('contain letterboxes with transparency, or white for JPEG', async () => {
    const webp = await run(photo, [
      resize({ width: 300, height: 300, fit: 'contain' }),
      encode('webp'),
    ]);
    expect(webp.metadata.hasAlpha).toBe(true);
    expect((await pixelAt(webp.outputPath, 150, 2))[3]).toBe(0);
    const jpeg = await run(photo, [
      resize({ width: 300, height: 300, fit: 'contain' }),
      encode('jpeg'),
    ]);
    expect(
      (await pixelAt(jpeg.outputPath, 150, 2)).slice(0, 3).every((value) => value >= 250),
    ).toBe(true);
  });

  it('runs a chain of resizes in order and leaves no intermediate files', async () => {
    const outputDir = fixtures.path('chain');
    await mkdir(outputDir);
    const { metadata } = await run(
      photo,
      [resize({ width: 400, height: 400, fit: 'cover' }), resize({ width: 100 }), encode()],
      { outputDir },
    );
    expect([metadata.width, metadata.height]).toEqual([100, 100]);
    expect(await readdir(outputDir)).toEqual([expect.stringMatching(/^output-\d+\.out$/)]);
  });
});

describe('smart crop position', () => {
  let salient: { path: string; subject: SubjectBox };

  beforeAll(async () => {
    salient = await fixtures.salientSubject({ width: 800, height: 400, subjectCentreX: 0.85 });
  });

  /** Share of pixels in the subject's warm colours. */
  async function subjectShare(path: string): Promise<number> {
    const { data, info } = await sharp(path).raw().toBuffer({ resolveWithObject: true });
    let matches = 0;
    for (let offset = 0; offset < data.length; offset += info.channels) {
      const [red, green, blue] = [data[offset]!, data[offset + 1]!, data[offset + 2]!];
      if (red > 180 && red - blue > 70 && red - green > 30) matches += 1;
    }
    return matches / (info.width * info.height);
  }

  it('attention and entropy crop toward an off-centre subject; centre does not', async () => {
    const crop = (position: ResizeParams['position']) =>
      run(salient.path, [
        resize({ width: 200, height: 200, fit: 'cover', position }),
        encode('png', 100),
      ]);
    const [centre, attention, entropy] = await Promise.all([
      crop('centre'),
      crop('attention'),
      crop('entropy'),
    ]);
    // The subject is a disc 144 px across; scaled by half into the 200 × 200 crop it covers
    // about 10 % of the output when the crop holds all of it.
    expect(await subjectShare(centre.outputPath)).toBe(0);
    expect(await subjectShare(attention.outputPath)).toBeGreaterThan(0.08);
    expect(await subjectShare(entropy.outputPath)).toBeGreaterThan(0.08);
  });
});

describe('orientation and metadata', () => {
  it('applies EXIF orientation 6 before resizing and strips EXIF', async () => {
    // Stored landscape 400 × 200; orientation 6 means it is displayed turned, as 200 × 400.
    const input = await fixtures.photo({
      width: 400,
      height: 200,
      orientation: 6,
      withExifAndXmp: true,
    });
    const inputMetadata = await sharp(input).metadata();
    expect([inputMetadata.width, inputMetadata.height, inputMetadata.orientation]).toEqual([
      400, 200, 6,
    ]);

    const untouched = await run(input, [encode('jpeg')]);
    expect([untouched.metadata.width, untouched.metadata.height]).toEqual([200, 400]);
    expect(untouched.metadata.orientation).toBeUndefined();
    expect(untouched.metadata.exif).toBeUndefined();
    expect([untouched.result.widthIn, untouched.result.heightIn]).toEqual([200, 400]);

    const resized = await run(input, [resize({ width: 100 }), encode('webp')]);
    expect([resized.metadata.width, resized.metadata.height]).toEqual([100, 200]);
    expect(resized.metadata.orientation).toBeUndefined();
    expect(resized.metadata.exif).toBeUndefined();
  });

  it('keeps the ICC profile and strips EXIF and XMP, in every format and through chains', async () => {
    const input = await fixtures.photo({
      width: 400,
      height: 300,
      iccProfile: 'p3',
      withExifAndXmp: true,
    });
    const inputMetadata = await sharp(input).metadata();
    expect(inputMetadata.icc).toBeDefined();
    expect(inputMetadata.exif?.toString('latin1')).toContain(EXIF_ARTIST);
    expect(inputMetadata.xmp).toBeDefined();

    const chains: ImageOperation[][] = [
      ...(['webp', 'jpeg', 'png', 'avif'] as const).map((format) => [
        resize({ width: 200 }),
        encode(format),
      ]),
      [resize({ width: 300, height: 300, fit: 'cover' }), resize({ width: 120 }), encode('webp')],
    ];
    for (const operations of chains) {
      const { metadata } = await run(input, operations);
      expect(metadata.icc?.equals(inputMetadata.icc!)).toBe(true);
      expect(metadata.exif).toBeUndefined();
      expect(metadata.xmp).toBeUndefined();
    }
  });

  it('adds no profile to an image that had none', async () => {
    const { metadata } = await run(photo, [resize({ width: 100 }), encode('webp')]);
    expect(metadata.hasProfile).toBe(false);
  });

  it('converts CMYK JPEG to sRGB instead of tagging sRGB pixels with a CMYK profile', async () => {
    const input = await fixtures.photo({ width: 300, height: 200, iccProfile: 'cmyk' });
    expect((await sharp(input).metadata()).space).toBe('cmyk');
    for (const operations of [
      [resize({ width: 150 }), encode('webp')],
      [resize({ width: 200 }), resize({ width: 100 }), encode('jpeg')],
    ]) {
      const { metadata } = await run(input, operations);
      expect(metadata.space).toBe('srgb');
      expect(metadata.channels).toBe(3);
      expect(metadata.hasProfile).toBe(false);
    }
  });
});

describe('animated WebP', () => {
  let animation: string;

  beforeAll(async () => {
    animation = await fixtures.animatedWebp({
      width: 120,
      height: 80,
      frames: 4,
      delay: 120,
      loop: 3,
    });
  });

  it('keeps every frame and the timing when the output is WebP', async () => {
    const plain = await run(animation, [encode('webp')]);
    expect(plain.metadata.pages).toBe(4);
    expect(plain.metadata.delay).toEqual([120, 120, 120, 120]);
    expect(plain.metadata.loop).toBe(3);
    expect([plain.result.pages, plain.result.widthOut, plain.result.heightOut]).toEqual([
      4, 120, 80,
    ]);

    for (const params of [
      { width: 60 },
      { width: 60, height: 60, fit: 'contain' as const },
      // Smart crops work on one frame; animations fall back to a centre crop instead of failing.
      { width: 60, height: 60, fit: 'cover' as const, position: 'attention' as const },
      { width: 60, height: 60, fit: 'cover' as const, position: 'entropy' as const },
    ]) {
      const { result, metadata } = await run(animation, [resize(params), encode('webp')]);
      expect(metadata.pages).toBe(4);
      expect([metadata.width, metadata.height]).toEqual([result.widthOut, result.heightOut]);
      expect(result.pages).toBe(4);
    }
    const chained = await run(animation, [
      resize({ width: 100 }),
      resize({ width: 50 }),
      encode('webp'),
    ]);
    // 120 × 80 → 100 × 67 → 50 × 33.5, which rounds (half to even) to 34.
    expect([chained.metadata.pages, chained.result.widthOut, chained.result.heightOut]).toEqual([
      4, 50, 34,
    ]);
  });

  it('takes the first frame for formats without animation', async () => {
    const firstFrame = await sharp(animation).png().toBuffer();
    for (const format of ['jpeg', 'png', 'avif'] as const) {
      const { result, metadata, outputPath } = await run(animation, [encode(format, 100)]);
      expect([metadata.width, metadata.height]).toEqual([120, 80]);
      expect(metadata.pages ?? 1).toBe(1);
      expect([result.pages, result.widthOut, result.heightOut]).toEqual([1, 120, 80]);
      if (format === 'png') {
        const [actual, reference] = await Promise.all([
          sharp(outputPath).raw().toBuffer(),
          sharp(firstFrame).raw().toBuffer(),
        ]);
        expect(actual.equals(reference)).toBe(true);
      }
    }
  });

  it('takes the first frame when EXIF orientation needs a quarter turn', async () => {
    const turned = await fixtures.animatedWebp({
      width: 120,
      height: 80,
      frames: 3,
      orientation: 6,
    });
    const { result, metadata } = await run(turned, [resize({ width: 40 }), encode('webp')]);
    expect(metadata.pages ?? 1).toBe(1);
    expect([result.widthOut, result.heightOut]).toEqual([40, 60]);
  });
});

describe('encoding', () => {
  const decodedAs: Record<ImageFormat, { format: string; extension: string }> = {
    webp: { format: 'webp', extension: 'webp' },
    avif: { format: 'heif', extension: 'avif' },
    jpeg: { format: 'jpeg', extension: 'jpg' },
    png: { format: 'png', extension: 'png' },
  };

  it.each(['webp', 'avif', 'jpeg', 'png'] as const)(
    'writes %s whatever the output file is called',
    async (format) => {
      const { result, metadata } = await run(smallPhoto, [encode(format)]);
      expect(metadata.format).toBe(decodedAs[format].format);
      if (format === 'avif') expect(metadata.compression).toBe('av1');
      expect(result.format).toBe(format);
      expect(result.extension).toBe(decodedAs[format].extension);
    },
  );

  it('reports sizes and megapixels', async () => {
    const { result, outputPath } = await run(photo, [resize({ width: 320 }), encode('webp')]);
    expect(result.inputSize).toBe((await stat(photo)).size);
    expect(result.outputSize).toBe((await stat(outputPath)).size);
    expect(result.megapixelsIn).toBeCloseTo(0.3072, 10);
    expect([result.widthIn, result.heightIn, result.pages]).toEqual([640, 480, 1]);
  });

  it('flattens transparency onto white for JPEG', async () => {
    const input = await fixtures.photo({ width: 200, height: 200, format: 'png', alpha: true });
    expect((await pixelAt(input, 0, 0))[3]).toBe(0);
    const { outputPath } = await run(input, [encode('jpeg', 90)]);
    expect((await pixelAt(outputPath, 0, 0)).slice(0, 3).every((value) => value >= 250)).toBe(true);
  });

  describe('on a photo-like 1600 × 1200 image', () => {
    let bigPhoto: string;

    beforeAll(async () => {
      bigPhoto = await fixtures.photo({ width: 1600, height: 1200, seed: 5, quality: 95 });
    });

    it.each(['jpeg', 'webp'] as const)('gives a bigger %s for a higher quality', async (format) => {
      const sizes: number[] = [];
      for (const quality of [30, 60, 90]) {
        sizes.push((await run(bigPhoto, [encode(format, quality)])).result.outputSize);
      }
      expect(sizes[0]).toBeLessThan(sizes[1]!);
      expect(sizes[1]).toBeLessThan(sizes[2]!);
    });

    it('makes PNG quality and effort count: palette below 100, smaller with more effort', async () => {
      const input = await fixtures.photo({ width: 480, height: 360, format: 'png', seed: 6 });
      const lossless = await run(input, [encode('png', 100, 0)]);
      const losslessEffort = await run(input, [encode('png', 100, 9)]);
      const palette = await run(input, [encode('png', 50)]);
      expect(palette.metadata.isPalette).toBe(true);
      expect(lossless.metadata.isPalette).toBe(false);
      expect(palette.result.outputSize).toBeLessThan(lossless.result.outputSize);
      expect(losslessEffort.result.outputSize).toBeLessThan(lossless.result.outputSize);
      // Quality 100 keeps every pixel.
      const [before, after] = await Promise.all([
        sharp(input).raw().toBuffer(),
        sharp(losslessEffort.outputPath).raw().toBuffer(),
      ]);
      expect(after.equals(before)).toBe(true);
    });
  });
});

describe('limits', () => {
  it('rejects a pixel bomb by its header, before decoding', async () => {
    // 30000 × 30000 = 900 megapixels in a ~110 KB file.
    const bomb = await fixtures.pixelBombPng();
    expect((await stat(bomb)).size).toBeLessThan(200_000);
    const { outcome, outputPath } = outputPathFor(bomb, [resize({ width: 100 }), encode()]);
    await expect(outcome).rejects.toThrow(ImageLimitError);
    await expect(outcome).rejects.toMatchObject({
      code: 'IMAGE_TOO_LARGE',
      detail: {
        kind: 'input-pixels',
        width: 30000,
        height: 30000,
        pixels: 900_000_000,
        limit: LIMIT,
      },
      message: expect.stringMatching(
        /30000×30000 \(900\.0 megapixels\), over the limit of 100\.0 megapixels/,
      ),
    });
    expect(await exists(outputPath)).toBe(false);

    // The same header with no pixel data behind it: decoding it would fail as corrupt, so a
    // limit error proves the check needs the header only.
    const headerOnly = await fixtures.pixelBombPng({ complete: false });
    await expect(
      processImage({
        inputPath: headerOnly,
        outputPath,
        operations: [encode()],
        limitInputPixels: LIMIT,
        memory: MEMORY,
      }),
    ).rejects.toThrow(ImageLimitError);
  });

  it('accepts an image exactly at the limit and rejects one pixel over', async () => {
    await expect(run(smallPhoto, [encode()], { limit: 200 * 150 })).resolves.toBeDefined();
    await expect(run(smallPhoto, [encode()], { limit: 200 * 150 - 1 })).rejects.toThrow(
      ImageLimitError,
    );
  });

  it('counts every frame of an animation that stays animated', async () => {
    const animation = await fixtures.animatedWebp({ width: 100, height: 100, frames: 3 });
    await expect(run(animation, [encode('webp')], { limit: 25_000 })).rejects.toMatchObject({
      detail: { kind: 'input-pixels', frames: 3, pixels: 30_000 },
    });
    // As a still image only the first frame is decoded.
    await expect(run(animation, [encode('png')], { limit: 25_000 })).resolves.toBeDefined();
  });

  it('rejects a resize that would produce too many pixels', async () => {
    const sliver = fixtures.path('sliver.png');
    await sharp({ create: { width: 16, height: 4000, channels: 3, background: '#336699' } })
      .png()
      .toFile(sliver);
    const { outcome, outputPath } = outputPathFor(sliver, [
      resize({ width: 8192, fit: 'cover' }),
      encode(),
    ]);
    await expect(outcome).rejects.toMatchObject({
      detail: { kind: 'output-pixels', width: 8192, height: 2_048_000 },
    });
    expect(await exists(outputPath)).toBe(false);
  });

  it('rejects a size the output format cannot hold', async () => {
    const wide = fixtures.path('wide.png');
    await sharp({ create: { width: 17000, height: 20, channels: 3, background: '#ffffff' } })
      .png()
      .toFile(wide);
    await expect(run(wide, [encode('webp')])).rejects.toMatchObject({
      detail: { kind: 'format-dimensions', format: 'webp', maxDimension: 16383 },
      message: expect.stringContaining('WEBP output is limited to 16383 pixels per side'),
    });
    await expect(run(wide, [encode('png')])).resolves.toMatchObject({
      result: { widthOut: 17000 },
    });
  });
});

describe('memory budget', () => {
  // 1600 × 1200 = 1.92 MP. WebP at quality 95 asks for sharp YUV and libwebp method 4 (about
  // 50 MB by the model); method 2 without sharp YUV needs about 30 MB.
  let large: string;
  beforeAll(async () => {
    large = await fixtures.photo({ width: 1600, height: 1200, seed: 31 });
  });

  it('reserves its estimate while it runs and returns it afterwards', async () => {
    const { result } = await run(large, [encode('webp', 95)]);
    expect(result.encoderSteppedDown).toBe(false);
    expect(result.estimatedMemoryBytes).toBeGreaterThan(40 * MiB);
    expect(MEMORY.reservedBytes).toBe(0);
  });

  it('steps down to a leaner WebP mode when the requested one does not fit', async () => {
    const tight = new MemoryBudget(40 * MiB);
    const { result, metadata } = await run(large, [encode('webp', 95)], { memory: tight });
    expect(result.encoderSteppedDown).toBe(true);
    expect(result.estimatedMemoryBytes).toBeLessThanOrEqual(40 * MiB);
    expect(metadata).toMatchObject({ format: 'webp', width: 1600, height: 1200 });
    expect(tight.reservedBytes).toBe(0);
  });

  it('writes baseline JPEG instead of progressive when progressive does not fit', async () => {
    const roomy = await run(large, [encode('jpeg', 85)]);
    expect(roomy.metadata.isProgressive).toBe(true);
    const tight = await run(large, [encode('jpeg', 85)], { memory: new MemoryBudget(20 * MiB) });
    expect(tight.result.encoderSteppedDown).toBe(true);
    expect(tight.metadata).toMatchObject({ format: 'jpeg', isProgressive: false, width: 1600 });
  });

  it('fails with a permanent limit error when no mode of the format fits, and writes nothing', async () => {
    const { outcome, outputPath } = outputPathFor(large, [encode('avif', 50)], {
      memory: new MemoryBudget(100 * MiB),
    });
    await expect(outcome).rejects.toBeInstanceOf(ImageLimitError);
    await expect(outcome).rejects.toMatchObject({
      permanent: true,
      detail: { kind: 'memory', format: 'avif', width: 1600, height: 1200, budgetBytes: 100 * MiB },
      message: expect.stringMatching(
        /Writing 1600×1200 as AVIF needs about \d+ MB of memory, over this worker's image budget of 100 MB/,
      ),
    });
    expect(await exists(outputPath)).toBe(false);
    // The same chain with a resize in front fits.
    const { metadata } = await run(large, [resize({ width: 400 }), encode('avif', 50)], {
      memory: new MemoryBudget(100 * MiB),
    });
    expect(metadata).toMatchObject({ format: 'heif', width: 400 });
  });

  it('waits while other jobs hold the memory, and gives up when its signal aborts', async () => {
    const budget = new MemoryBudget(60 * MiB);
    const holder = await budget.reserve(50 * MiB);
    const controller = new AbortController();
    const { outcome: waiting, outputPath } = outputPathFor(large, [encode('webp', 80)], {
      memory: budget,
      signal: controller.signal,
    });
    await vi.waitFor(() => expect(budget.waitingCount).toBe(1), { timeout: 10_000 });
    controller.abort(new Error('inline processing timed out'));
    await expect(waiting).rejects.toThrow('inline processing timed out');
    expect(await exists(outputPath)).toBe(false);

    const queued = run(large, [encode('webp', 80)], { memory: budget });
    await vi.waitFor(() => expect(budget.waitingCount).toBe(1), { timeout: 10_000 });
    holder();
    const { metadata } = await queued;
    expect(metadata.format).toBe('webp');
    expect(budget.reservedBytes).toBe(0);
  });

  it('returns the memory when the image turns out to be corrupt', async () => {
    const truncated = await fixtures.truncated(large);
    await expect(run(truncated, [encode('webp', 80)])).rejects.toBeInstanceOf(ImageDecodeError);
    expect(MEMORY.reservedBytes).toBe(0);
  });
});

describe('unreadable input', () => {
  it('rejects a truncated JPEG or PNG as corrupt and leaves no partial output', async () => {
    const png = await fixtures.photo({ width: 640, height: 480, format: 'png', seed: 13 });
    for (const source of [photo, png]) {
      const truncated = await fixtures.truncated(source, 0.8);
      // Lossless PNG output streams row by row, so libvips has written most of the file by the
      // time it meets the cut; that file must not survive the failure.
      for (const operations of [[resize({ width: 100 }), encode()], [encode('png', 100)]]) {
        const { outcome, outputPath } = outputPathFor(truncated, operations);
        await expect(outcome).rejects.toThrow(ImageDecodeError);
        await expect(outcome).rejects.toMatchObject({
          code: 'IMAGE_UNREADABLE',
          reason: 'corrupt',
        });
        expect(await exists(outputPath)).toBe(false);
      }
    }
  });

  it('rejects files that are not JPEG, PNG or WebP', async () => {
    const text = await fixtures.file('notes.jpg', 'these are not pixels');
    const svg = await fixtures.file(
      'drawing.svg',
      '<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64"><rect width="64" height="64" fill="red"/></svg>',
    );
    const gif = fixtures.path('still.gif');
    await sharp({ create: { width: 32, height: 32, channels: 3, background: '#ff0000' } })
      .gif()
      .toFile(gif);
    for (const input of [text, svg, gif]) {
      await expect(run(input, [encode()])).rejects.toMatchObject({
        name: 'ImageDecodeError',
        reason: 'unsupported-format',
      });
    }
  });

  it('passes a missing input file through as a plain I/O error (retryable)', async () => {
    const outcome = run(fixtures.path('missing.jpg'), [encode()]);
    await expect(outcome).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(outcome).rejects.not.toBeInstanceOf(ImageDecodeError);
  });
});

describe('contract checks', () => {
  it('refuses a chain that does not end with exactly one encode', async () => {
    await expect(run(photo, [resize({ width: 100 })])).rejects.toThrow(InvalidChainError);
    await expect(run(photo, [encode(), resize({ width: 100 }), encode()])).rejects.toThrow(
      InvalidChainError,
    );
  });

  it('refuses a pixel limit that is not a positive integer', async () => {
    await expect(run(photo, [encode()], { limit: 0 })).rejects.toThrow(RangeError);
  });
});
