import type { ImageFormat } from '@tamp/proto';
import type { EncodeParams } from './operations';

/**
 * Maps the API's codec-neutral `quality` (1–100) and `effort` (0–9) onto each codec's own
 * options. Two principles, so the knobs mean the same thing whatever the format:
 * - the API defaults (quality 80, effort 4) land on each codec's own balanced default;
 * - a higher API value never gives a lower codec value (monotonic), and the ends of the API
 *   range reach the ends of the codec range.
 * The tables are documented in services/worker-image/README.md.
 *
 * The option objects are plain data shaped like sharp's WebpOptions/AvifOptions/JpegOptions/
 * PngOptions, so this module stays free of sharp and the adapter passes them straight through.
 */

export type ChromaSubsampling = '4:2:0' | '4:4:4';

export interface WebpEncodeOptions {
  quality: number;
  effort: number;
  smartSubsample: boolean;
  /** libwebp's lossless mode (auto's candidate for graphics); quality then is its effort knob. */
  lossless?: true;
}

export interface AvifEncodeOptions {
  quality: number;
  effort: number;
  chromaSubsampling: ChromaSubsampling;
}

export interface JpegEncodeOptions {
  quality: number;
  /** mozjpeg's defaults (trellis, deringing, its quantisation table); forces progressive. */
  mozjpeg: boolean;
  progressive: boolean;
  chromaSubsampling: ChromaSubsampling;
  trellisQuantisation: boolean;
  optimiseScans: boolean;
  /** Two-pass Huffman tables: a smaller file, but the whole image's coefficients are buffered. */
  optimiseCoding: boolean;
}

export type PngEncodeOptions =
  | { palette: false; compressionLevel: number; adaptiveFiltering: boolean }
  | {
      palette: true;
      /** libimagequant target quality: the fewest colours that reach it are used. */
      quality: number;
      /** libimagequant effort, 1–10. */
      effort: number;
      compressionLevel: number;
      adaptiveFiltering: false;
      /** 0 for auto's lossless palette of an image with at most 256 colours: no dither noise. */
      dither?: 0;
    };

export type EncodeSettings =
  | { format: 'webp'; options: WebpEncodeOptions }
  | { format: 'avif'; options: AvifEncodeOptions }
  | { format: 'jpeg'; options: JpegEncodeOptions }
  | { format: 'png'; options: PngEncodeOptions };

/** libwebp `method` 0–6, indexed by API effort 0–9; API 4 → libwebp's default 4. */
export const WEBP_EFFORT_BY_API_EFFORT = [0, 1, 2, 3, 4, 4, 5, 5, 6, 6] as const;

/** zlib level, indexed by API effort; API 4 → sharp's default 6. Level 0 (stored) is never useful here. */
export const PNG_COMPRESSION_LEVEL_BY_API_EFFORT = [1, 2, 3, 5, 6, 7, 8, 9, 9, 9] as const;

/** libimagequant effort 1–10, indexed by API effort; API 4 → sharp's default 7. */
export const PNG_PALETTE_EFFORT_BY_API_EFFORT = [1, 2, 4, 5, 7, 8, 9, 10, 10, 10] as const;

/** From this API quality up, chroma keeps full resolution (JPEG/AVIF 4:4:4, WebP smart subsampling). */
export const FULL_CHROMA_FROM_QUALITY = 90;

/** API efforts up to this one skip mozjpeg's slow trellis quantisation and scan optimisation. */
export const JPEG_FAST_UP_TO_EFFORT = 1;

/**
 * AVIF's quality scale is much steeper than JPEG's: sharp defaults AVIF to 50 where JPEG and
 * WebP default to 80, for similar visual quality at a fraction of the size. The API's 1–80
 * maps linearly onto AVIF 1–50 and 80–100 onto 50–100, so the API default lands on 50.
 */
export function avifQualityFor(apiQuality: number): number {
  if (apiQuality <= 80) return 1 + Math.round(((apiQuality - 1) * 49) / 79);
  return 50 + Math.round((apiQuality - 80) * 2.5);
}

function assertIntegerInRange(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer from ${min} to ${max}, got ${value}`);
  }
}

function tableValue(table: readonly number[], effort: number): number {
  // In range by the assertion above; the fallback only satisfies noUncheckedIndexedAccess.
  return table[effort] ?? table[table.length - 1]!;
}

/**
 * The settings of one format at an API quality and effort (auto chooses a format first).
 * `searched`: the quality is one a search against an SSIM target tries. That score is taken on
 * luma (ssim.ts), which full-resolution chroma does not raise, so a searched quality keeps chroma
 * subsampled all the way up: from FULL_CHROMA_FROM_QUALITY the search would otherwise pay 4:4:4's
 * bytes (a fifth more for AVIF on the corpus' pixel art) for nothing it measures.
 */
export function encodeSettingsFor(
  params: Pick<EncodeParams, 'quality' | 'effort'> & { format: ImageFormat; searched?: boolean },
): EncodeSettings {
  const { format, quality, effort } = params;
  assertIntegerInRange('quality', quality, 1, 100);
  assertIntegerInRange('effort', effort, 0, 9);
  const fullChroma = params.searched !== true && quality >= FULL_CHROMA_FROM_QUALITY;

  switch (format) {
    case 'webp':
      return {
        format,
        options: {
          quality,
          effort: tableValue(WEBP_EFFORT_BY_API_EFFORT, effort),
          smartSubsample: fullChroma,
        },
      };
    case 'avif':
      return {
        format,
        options: {
          quality: avifQualityFor(quality),
          effort,
          chromaSubsampling: fullChroma ? '4:4:4' : '4:2:0',
        },
      };
    case 'jpeg': {
      const thorough = effort > JPEG_FAST_UP_TO_EFFORT;
      return {
        format,
        options: {
          quality,
          mozjpeg: true,
          progressive: true,
          chromaSubsampling: fullChroma ? '4:4:4' : '4:2:0',
          trellisQuantisation: thorough,
          optimiseScans: thorough,
          optimiseCoding: true,
        },
      };
    }
    case 'png':
      // Lossless truecolour at 100: the only PNG that keeps every pixel of any image.
      return pngSettings(effort, quality === 100 ? undefined : { quality });
  }
}

/** PNG: truecolour, or a palette (libimagequant) at a target quality. */
function pngSettings(
  effort: number,
  palette: { quality: number; dither?: 0 } | undefined,
): EncodeSettings {
  const compressionLevel = tableValue(PNG_COMPRESSION_LEVEL_BY_API_EFFORT, effort);
  if (palette === undefined) {
    return {
      format: 'png',
      options: { palette: false, compressionLevel, adaptiveFiltering: effort >= 7 },
    };
  }
  return {
    format: 'png',
    options: {
      palette: true,
      ...palette,
      effort: tableValue(PNG_PALETTE_EFFORT_BY_API_EFFORT, effort),
      compressionLevel,
      adaptiveFiltering: false,
    },
  };
}

/**
 * auto's lossless candidates (graphics: transparency or few colours): lossless WebP at the
 * job's effort, and PNG, as a palette when the image has at most 256 colours (every colour
 * kept exactly, far smaller than truecolour) and truecolour otherwise.
 */
export function losslessEncodeSettings(
  format: 'webp' | 'png',
  effort: number,
  fewColours: boolean,
): EncodeSettings {
  assertIntegerInRange('effort', effort, 0, 9);
  if (format === 'webp') {
    return {
      format,
      options: {
        quality: 100,
        effort: tableValue(WEBP_EFFORT_BY_API_EFFORT, effort),
        smartSubsample: false,
        lossless: true,
      },
    };
  }
  return pngSettings(effort, fewColours ? { quality: 100, dither: 0 } : undefined);
}
