import { ssim as referenceSsim } from 'ssim.js';
import { describe, expect, it } from 'vitest';
import { lumaOnWhite, SsimReference, ssim } from './ssim';

/** Deterministic RGBA pixels: a gradient with a pattern, and a distorted copy. */
function image(width: number, height: number, distortion: number): Uint8ClampedArray {
  const data = new Uint8ClampedArray(width * height * 4);
  let seed = 7;
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const offset = (y * width + x) * 4;
      const base = (x * 3 + y * 2 + ((x >> 3) % 2) * 40) % 256;
      const noise = (random() - 0.5) * distortion;
      data[offset] = base + noise;
      data[offset + 1] = 255 - base + noise;
      data[offset + 2] = (base * 2) % 256;
      data[offset + 3] = 255;
    }
  }
  return data;
}

describe('ssim', () => {
  it.each([0, 10, 40, 120])(
    'agrees with ssim.js (weber, no downsampling) at distortion %s',
    (distortion) => {
      const [width, height] = [97, 61];
      const reference = image(width, height, 0);
      const candidate = image(width, height, distortion);
      const expected = referenceSsim(
        { data: reference, width, height },
        { data: candidate, width, height },
        { downsample: false, ssim: 'weber' },
      ).mssim;
      const ours = ssim(
        lumaOnWhite(new Uint8Array(reference.buffer), width, height, 4),
        lumaOnWhite(new Uint8Array(candidate.buffer), width, height, 4),
      );
      expect(ours).toBeCloseTo(expected, 4);
    },
  );

  it('is 1 for identical images and falls as they differ', () => {
    const plane = lumaOnWhite(new Uint8Array(image(40, 30, 20).buffer), 40, 30, 4);
    const reference = new SsimReference(plane);
    expect(reference.compare(plane)).toBe(1);
    const worse = lumaOnWhite(new Uint8Array(image(40, 30, 60).buffer), 40, 30, 4);
    expect(reference.compare(worse)).toBeLessThan(1);
  });

  it('refuses images of different sizes and images smaller than its window', () => {
    const plane = lumaOnWhite(new Uint8Array(image(40, 30, 0).buffer), 40, 30, 4);
    const other = lumaOnWhite(new Uint8Array(image(30, 40, 0).buffer), 30, 40, 4);
    expect(() => ssim(plane, other)).toThrow(RangeError);
    const tiny = lumaOnWhite(new Uint8Array(image(10, 10, 0).buffer), 10, 10, 4);
    expect(() => new SsimReference(tiny)).toThrow(RangeError);
  });
});

describe('lumaOnWhite', () => {
  it('is BT.601 luma, with transparent pixels on white', () => {
    const rgba = new Uint8Array([255, 0, 0, 255, 0, 0, 0, 0, 0, 0, 0, 128]);
    expect([...lumaOnWhite(rgba, 3, 1, 4).data]).toEqual([77, 255, 127]);
    expect([...lumaOnWhite(new Uint8Array([9, 255, 9, 0]), 2, 1, 2).data]).toEqual([9, 255]);
  });
});
