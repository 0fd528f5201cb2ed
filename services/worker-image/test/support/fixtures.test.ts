import { readFile, stat } from 'node:fs/promises';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImageFixtures, renderPhotoPixels } from './fixtures';

let fixtures: ImageFixtures;

beforeAll(async () => {
  fixtures = await ImageFixtures.create();
});

afterAll(async () => {
  await fixtures.cleanup();
  await expect(stat(fixtures.dir)).rejects.toMatchObject({ code: 'ENOENT' });
});

describe('ImageFixtures', () => {
  it('is deterministic for a seed and varies between seeds', async () => {
    expect(
      Buffer.from(renderPhotoPixels(64, 48, 9)).equals(Buffer.from(renderPhotoPixels(64, 48, 9))),
    ).toBe(true);
    expect(
      Buffer.from(renderPhotoPixels(64, 48, 9)).equals(Buffer.from(renderPhotoPixels(64, 48, 10))),
    ).toBe(false);
    const first = await fixtures.photo({
      width: 160,
      height: 120,
      format: 'webp',
      seed: 4,
      name: 'a.webp',
    });
    const second = await fixtures.photo({
      width: 160,
      height: 120,
      format: 'webp',
      seed: 4,
      name: 'b.webp',
    });
    expect((await readFile(first)).equals(await readFile(second))).toBe(true);
  });

  it.each(['jpeg', 'png', 'webp'] as const)(
    'writes a %s photo of the requested size',
    async (format) => {
      const path = await fixtures.photo({ width: 321, height: 123, format });
      const metadata = await sharp(path).metadata();
      expect([metadata.format, metadata.width, metadata.height]).toEqual([format, 321, 123]);
    },
  );

  it('makes photo-like pixels: varied, not flat, so they compress like photos', async () => {
    const path = await fixtures.photo({ width: 400, height: 300, format: 'png' });
    const { channels } = await sharp(path).stats();
    for (const channel of channels) {
      expect(channel.stdev).toBeGreaterThan(20);
    }
    // A flat 400 × 300 PNG is a few hundred bytes; a photo stays well above 100 KB lossless.
    expect((await stat(path)).size).toBeGreaterThan(100_000);
  });

  it('writes the requested metadata', async () => {
    const path = await fixtures.photo({
      width: 80,
      height: 40,
      orientation: 6,
      iccProfile: 'p3',
      withExifAndXmp: true,
    });
    const metadata = await sharp(path).metadata();
    expect(metadata.orientation).toBe(6);
    expect(metadata.icc).toBeDefined();
    expect(metadata.exif).toBeDefined();
    expect(metadata.xmp).toBeDefined();
  });

  it('writes an animated WebP with one delay per frame', async () => {
    const path = await fixtures.animatedWebp({ width: 40, height: 30, frames: 3, delay: 80 });
    const metadata = await sharp(path).metadata();
    expect([metadata.pages, metadata.width, metadata.height]).toEqual([3, 40, 30]);
    expect(metadata.delay).toEqual([80, 80, 80]);
  });

  it('writes a small pixel bomb whose header declares its full size', async () => {
    const path = await fixtures.pixelBombPng({ width: 20000, height: 10000 });
    expect((await stat(path)).size).toBeLessThan(100_000);
    const metadata = await sharp(path, { limitInputPixels: false }).metadata();
    expect([metadata.width, metadata.height]).toEqual([20000, 10000]);
  });
});
