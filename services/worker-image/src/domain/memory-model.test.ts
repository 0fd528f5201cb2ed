import type { ImageFormat } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { type EncodeSettings, encodeSettingsFor } from './encode-settings';
import { ImageLimitError } from './errors';
import {
  bytesPerPixelAt,
  cheaperEncodeSettings,
  DECODER_BYTES_PER_PIXEL,
  decoderMemoryClass,
  ENCODER_BYTES_PER_PIXEL,
  encoderMemoryClass,
  estimateImageMemory,
  imageMemoryDemand,
  JOB_OVERHEAD_BYTES,
  planSearchWithinMemory,
  planWithinMemory,
  SEARCH_SAMPLE_BYTES_PER_PIXEL,
  smartCropHeldPixels,
} from './memory-model';
import type { ResizeParams } from './operations';
import { planResizeChain } from './resize-geometry';

const MiB = 1024 * 1024;
const settings = (format: ImageFormat, quality = 80, effort = 4) =>
  encodeSettingsFor({ format, quality, effort });

/** 8000 × 6000 (48 MP), the size of a ~25 MB camera JPEG. */
const CAMERA = { width: 8000, height: 6000 };

function demandFor(resizes: ResizeParams[] = [], decoder = decoderMemoryClass('jpeg', false)) {
  return imageMemoryDemand({
    decoder,
    input: CAMERA,
    frames: 1,
    resizes,
    steps: planResizeChain(CAMERA, resizes),
  });
}

describe('quality curves', () => {
  it('interpolates between points and stays flat outside them', () => {
    const curve = [
      [50, 4],
      [100, 8],
    ] as const;
    expect(bytesPerPixelAt(curve, 10)).toBe(4);
    expect(bytesPerPixelAt(curve, 75)).toBe(6);
    expect(bytesPerPixelAt(curve, 100)).toBe(8);
    expect(bytesPerPixelAt([[100, 1.1]], 30)).toBe(1.1);
  });

  it('never falls as quality rises, and every table entry is positive', () => {
    for (const curve of Object.values(ENCODER_BYTES_PER_PIXEL)) {
      for (let quality = 2; quality <= 100; quality++) {
        expect(bytesPerPixelAt(curve, quality)).toBeGreaterThanOrEqual(
          bytesPerPixelAt(curve, quality - 1),
        );
      }
    }
    for (const value of Object.values(DECODER_BYTES_PER_PIXEL)) {
      expect(value).toBeGreaterThanOrEqual(0);
    }
  });
});

describe('memory classes', () => {
  it('names the mode each encoder runs in', () => {
    expect(encoderMemoryClass(settings('webp', 80, 4))).toBe('webp-multi-pass');
    expect(encoderMemoryClass(settings('webp', 80, 2))).toBe('webp-single-pass');
    expect(encoderMemoryClass(settings('webp', 95))).toBe('webp-sharp-yuv');
    expect(encoderMemoryClass(settings('jpeg'))).toBe('jpeg-progressive');
    expect(encoderMemoryClass(settings('png', 100))).toBe('png');
    expect(encoderMemoryClass(settings('png', 80))).toBe('png-palette');
    expect(encoderMemoryClass(settings('avif'))).toBe('avif');
  });

  it('tells streaming decoders from those that hold the whole image', () => {
    expect(decoderMemoryClass('jpeg', false)).toBe('jpeg');
    expect(decoderMemoryClass('jpeg', true)).toBe('jpeg-progressive');
    expect(decoderMemoryClass('png', true)).toBe('png-interlaced');
    expect(decoderMemoryClass('webp', false)).toBe('webp');
  });
});

describe('cheaper encode settings', () => {
  it('steps WebP down through plain YUV to libwebp method 2, keeping quality', () => {
    const variants = cheaperEncodeSettings(settings('webp', 95, 6));
    expect(variants.map(encoderMemoryClass)).toEqual([
      'webp-sharp-yuv',
      'webp-multi-pass',
      'webp-single-pass',
    ]);
    expect(variants.at(-1)).toEqual({
      format: 'webp',
      options: { quality: 95, effort: 2, smartSubsample: false },
    });
  });

  it('steps progressive JPEG down to baseline, then to standard Huffman tables', () => {
    const variants = cheaperEncodeSettings(settings('jpeg', 85));
    expect(variants.map(encoderMemoryClass)).toEqual([
      'jpeg-progressive',
      'jpeg-optimised',
      'jpeg-baseline',
    ]);
    for (const variant of variants) expect(variant.options).toMatchObject({ quality: 85 });
  });

  it('has nothing cheaper for AVIF, palette PNG or modes that already stream', () => {
    expect(cheaperEncodeSettings(settings('avif'))).toHaveLength(1);
    expect(cheaperEncodeSettings(settings('png', 80))).toHaveLength(1);
    expect(cheaperEncodeSettings(settings('webp', 80, 1))).toHaveLength(1);
  });

  it('costs less memory at every step', () => {
    for (const start of [settings('webp', 95, 9), settings('jpeg', 100, 9)]) {
      const estimates = cheaperEncodeSettings(start).map((variant: EncodeSettings) =>
        estimateImageMemory(demandFor(), variant),
      );
      for (let index = 1; index < estimates.length; index++) {
        expect(estimates[index]).toBeLessThan(estimates[index - 1]!);
      }
    }
  });
});

describe('estimates', () => {
  it('counts the decoder, a smart crop and the encoder of the last pass', () => {
    const thumbnail: ResizeParams = {
      width: 512,
      height: 512,
      fit: 'cover',
      position: 'attention',
    };
    // Covering 512 × 512 from 4:3 scales to 683 × 512 and holds that whole for the analysis.
    expect(smartCropHeldPixels(CAMERA, thumbnail)).toBe(683 * 512);
    expect(smartCropHeldPixels(CAMERA, { ...thumbnail, position: 'centre' })).toBe(0);

    const webp = settings('webp', 75);
    const streaming = estimateImageMemory(demandFor([thumbnail]), webp);
    const progressive = estimateImageMemory(
      demandFor([thumbnail], decoderMemoryClass('jpeg', true)),
      webp,
    );
    expect(progressive - streaming).toBe(
      Math.ceil(CAMERA.width * CAMERA.height * DECODER_BYTES_PER_PIXEL['jpeg-progressive']),
    );
    expect(streaming).toBeGreaterThan(JOB_OVERHEAD_BYTES);
    expect(streaming).toBeLessThan(JOB_OVERHEAD_BYTES + 10 * MiB);
  });

  it('takes the largest pass of a chain, with later passes reading a .v intermediate', () => {
    const resizes: ResizeParams[] = [
      { width: 4000, fit: 'inside', position: 'centre' },
      { width: 1000, fit: 'inside', position: 'centre' },
    ];
    const demand = demandFor(resizes);
    expect(demand.passes.map((pass) => pass.decoder)).toEqual(['jpeg', 'vips']);
    expect(demand.passes[1]?.inputPixels).toBe(4000 * 3000);
    expect(demand.outputPixels).toBe(1000 * 750);
    expect(estimateImageMemory(demand, settings('webp'))).toBeGreaterThan(
      DECODER_BYTES_PER_PIXEL.vips * 4000 * 3000,
    );
  });

  it('counts every frame of an animation', () => {
    const one = imageMemoryDemand({
      decoder: 'webp',
      input: CAMERA,
      frames: 1,
      resizes: [],
      steps: [],
    });
    const ten = imageMemoryDemand({
      decoder: 'webp',
      input: CAMERA,
      frames: 10,
      resizes: [],
      steps: [],
    });
    expect(ten.outputPixels).toBe(10 * one.outputPixels);
    expect(ten.passes[0]?.inputPixels).toBe(10 * (one.passes[0]?.inputPixels ?? 0));
  });
});

describe('planning within a budget', () => {
  const BUDGET = 320 * MiB;

  it('keeps the requested settings when they fit', () => {
    const plan = planWithinMemory(
      demandFor([{ width: 2560, height: 2560, fit: 'inside', position: 'centre' }]),
      settings('webp', 80),
      BUDGET,
    );
    expect(plan.steppedDown).toBe(false);
    expect(plan.settings).toEqual(settings('webp', 80));
  });

  it('writes a 48 MP photo as full-size WebP (the chill preset) in one pass to fit', () => {
    const plan = planWithinMemory(demandFor(), settings('webp', 85), BUDGET);
    expect(plan.steppedDown).toBe(true);
    expect(encoderMemoryClass(plan.settings)).toBe('webp-single-pass');
    expect(plan.estimatedBytes).toBeLessThanOrEqual(BUDGET);
  });

  it('refuses a full-size 48 MP AVIF, saying how much it needs', () => {
    expect(() => planWithinMemory(demandFor(), settings('avif', 50), BUDGET)).toThrow(
      ImageLimitError,
    );
    try {
      planWithinMemory(demandFor(), settings('avif', 50), BUDGET);
    } catch (error) {
      expect((error as ImageLimitError).detail).toMatchObject({
        kind: 'memory',
        format: 'avif',
        width: 8000,
        height: 6000,
        budgetBytes: BUDGET,
      });
      expect((error as Error).message).toMatch(/needs about 1\d{3} MB of memory/);
    }
  });
});

describe('planSearchWithinMemory', () => {
  const candidates = (['jpeg', 'webp', 'avif'] as const).map((format) => ({
    candidate: format,
    settings: settings(format, 95),
  }));

  it('skips a candidate that cannot fit rather than failing, and reserves for the rest', () => {
    // 48 MP at the top of the search range (q95): AVIF needs far more than 320 MiB, WebP even
    // in one pass ~350 MiB; baseline JPEG streams.
    const plan = planSearchWithinMemory({
      chain: demandFor(),
      candidates,
      samplePixels: 640 * 640,
      budgetBytes: 320 * MiB,
    });
    expect(plan.skipped).toEqual(['webp', 'avif']);
    expect(plan.fitting.map(({ candidate }) => candidate)).toEqual(['jpeg']);
    const sampleBytes = SEARCH_SAMPLE_BYTES_PER_PIXEL * 640 * 640;
    expect(plan.estimatedBytes).toBe(
      Math.max(...plan.fitting.map(({ plan: fitting }) => fitting.estimatedBytes)) + sampleBytes,
    );
    expect(plan.estimatedBytes).toBeLessThanOrEqual(320 * MiB);
  });

  it('fails like a fixed job when no candidate fits', () => {
    expect(() =>
      planSearchWithinMemory({
        chain: demandFor(),
        candidates: candidates.filter(({ candidate }) => candidate === 'avif'),
        samplePixels: 640 * 640,
        budgetBytes: 320 * MiB,
      }),
    ).toThrow(ImageLimitError);
  });
});
