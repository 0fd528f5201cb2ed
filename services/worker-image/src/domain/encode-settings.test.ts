import type { ImageFormat } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import {
  avifQualityFor,
  type EncodeSettings,
  encodeSettingsFor,
  PNG_COMPRESSION_LEVEL_BY_API_EFFORT,
  PNG_PALETTE_EFFORT_BY_API_EFFORT,
  WEBP_EFFORT_BY_API_EFFORT,
} from './encode-settings';

const QUALITIES = Array.from({ length: 100 }, (_, index) => index + 1);
const EFFORTS = Array.from({ length: 10 }, (_, index) => index);

function settings(format: ImageFormat, quality = 80, effort = 4): EncodeSettings {
  return encodeSettingsFor({ format, quality, effort });
}

type OptionsByFormat = {
  [Format in ImageFormat]: Extract<EncodeSettings, { format: Format }>['options'];
};

/** The options of one format, typed as that format's. */
function optionsOf<Format extends ImageFormat>(
  format: Format,
  quality = 80,
  effort = 4,
): OptionsByFormat[Format] {
  const result = settings(format, quality, effort);
  expect(result.format).toBe(format);
  return result.options as OptionsByFormat[Format];
}

function isNonDecreasing(values: readonly number[]): boolean {
  return values.every((value, index) => index === 0 || value >= values[index - 1]!);
}

describe('encodeSettingsFor', () => {
  it('lands the API defaults (quality 80, effort 4) on each codec default', () => {
    expect(settings('webp')).toEqual({
      format: 'webp',
      options: { quality: 80, effort: 4, smartSubsample: false },
    });
    expect(settings('avif')).toEqual({
      format: 'avif',
      options: { quality: 50, effort: 4, chromaSubsampling: '4:2:0' },
    });
    expect(settings('jpeg')).toEqual({
      format: 'jpeg',
      options: {
        quality: 80,
        mozjpeg: true,
        progressive: true,
        chromaSubsampling: '4:2:0',
        trellisQuantisation: true,
        optimiseScans: true,
        optimiseCoding: true,
      },
    });
    expect(settings('png')).toEqual({
      format: 'png',
      options: {
        palette: true,
        quality: 80,
        effort: 7,
        compressionLevel: 6,
        adaptiveFiltering: false,
      },
    });
  });

  it('maps effort 0–9 monotonically onto the full range of each codec', () => {
    const webp = EFFORTS.map((effort) => optionsOf('webp', 80, effort).effort);
    const avif = EFFORTS.map((effort) => optionsOf('avif', 80, effort).effort);
    expect(isNonDecreasing(webp)).toBe(true);
    expect([webp[0], webp[9]]).toEqual([0, 6]);
    expect(avif).toEqual(EFFORTS);
    for (const table of [PNG_COMPRESSION_LEVEL_BY_API_EFFORT, PNG_PALETTE_EFFORT_BY_API_EFFORT]) {
      expect(table).toHaveLength(10);
      expect(isNonDecreasing(table)).toBe(true);
    }
    expect([
      PNG_COMPRESSION_LEVEL_BY_API_EFFORT[0],
      PNG_COMPRESSION_LEVEL_BY_API_EFFORT[9],
    ]).toEqual([1, 9]);
    expect([PNG_PALETTE_EFFORT_BY_API_EFFORT[0], PNG_PALETTE_EFFORT_BY_API_EFFORT[9]]).toEqual([
      1, 10,
    ]);
    expect(WEBP_EFFORT_BY_API_EFFORT).toHaveLength(10);
  });

  it('maps quality monotonically; AVIF spans 1–100 with the default at 50', () => {
    const avif = QUALITIES.map(avifQualityFor);
    expect(isNonDecreasing(avif)).toBe(true);
    expect([avif[0], avif[79], avif[99]]).toEqual([1, 50, 100]);
    expect(
      avif.every((quality) => Number.isInteger(quality) && quality >= 1 && quality <= 100),
    ).toBe(true);
    for (const format of ['webp', 'jpeg'] as const) {
      expect(QUALITIES.map((quality) => optionsOf(format, quality).quality)).toEqual(QUALITIES);
    }
  });

  it('keeps full chroma resolution from quality 90', () => {
    expect(settings('jpeg', 89).options).toMatchObject({ chromaSubsampling: '4:2:0' });
    expect(settings('jpeg', 90).options).toMatchObject({ chromaSubsampling: '4:4:4' });
    expect(settings('avif', 90).options).toMatchObject({ chromaSubsampling: '4:4:4' });
    expect(settings('webp', 90).options).toMatchObject({ smartSubsample: true });
  });

  it('keeps chroma subsampled at every quality a search against a luma target tries', () => {
    const searched = (format: 'jpeg' | 'avif' | 'webp', quality: number) =>
      encodeSettingsFor({ format, quality, effort: 4, searched: true }).options;
    for (const quality of [89, 90, 95]) {
      expect(searched('jpeg', quality)).toMatchObject({ chromaSubsampling: '4:2:0', quality });
      expect(searched('avif', quality)).toMatchObject({ chromaSubsampling: '4:2:0' });
      expect(searched('webp', quality)).toMatchObject({ smartSubsample: false, quality });
    }
    // The quality itself maps as for a fixed format.
    expect(searched('avif', 95)).toEqual({
      ...settings('avif', 95).options,
      chromaSubsampling: '4:2:0',
    });
  });

  it('makes PNG quality meaningful: palette below 100, lossless truecolour at 100', () => {
    expect(settings('png', 100, 4).options).toEqual({
      palette: false,
      compressionLevel: 6,
      adaptiveFiltering: false,
    });
    expect(settings('png', 100, 9).options).toMatchObject({
      palette: false,
      adaptiveFiltering: true,
    });
    expect(settings('png', 99, 0).options).toEqual({
      palette: true,
      quality: 99,
      effort: 1,
      compressionLevel: 1,
      adaptiveFiltering: false,
    });
  });

  it('lets the lowest JPEG efforts skip the slow mozjpeg passes', () => {
    expect(settings('jpeg', 80, 1).options).toMatchObject({
      trellisQuantisation: false,
      optimiseScans: false,
    });
    expect(settings('jpeg', 80, 2).options).toMatchObject({
      trellisQuantisation: true,
      optimiseScans: true,
    });
  });

  it('rejects values outside the API ranges', () => {
    expect(() => settings('webp', 0)).toThrow(RangeError);
    expect(() => settings('webp', 101)).toThrow(/quality/);
    expect(() => settings('webp', 80.5)).toThrow(/quality/);
    expect(() => settings('avif', 80, 10)).toThrow(/effort/);
    expect(() => settings('png', 80, -1)).toThrow(/effort/);
  });
});
