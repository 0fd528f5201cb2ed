import { type ImageEncodeParams, imageOperationSchema } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import {
  type CandidateOutcome,
  candidatesFor,
  chooseCandidate,
  hasFewColours,
  hasTransparency,
  projectedCandidateMs,
  QUALITY_SEARCH,
  QualitySearch,
  SearchBudget,
} from './auto-encode';

function params(input: Record<string, unknown>): ImageEncodeParams {
  const operation = imageOperationSchema.parse({ type: 'encode', params: input });
  if (operation.type !== 'encode') throw new Error('not an encode');
  return operation.params;
}

const PHOTO = { transparent: false, fewColours: false, animated: false };
const names = (specs: { format: string; lossless: boolean }[]) =>
  specs.map((spec) => `${spec.format}${spec.lossless ? ' lossless' : ''}`);

describe('candidatesFor', () => {
  it('weighs the three lossy formats for a photo, cheapest first', () => {
    expect(names(candidatesFor(params({ format: 'auto' }), PHOTO))).toEqual([
      'jpeg',
      'webp',
      'avif',
    ]);
  });

  it('adds lossless PNG and WebP for graphics, and drops JPEG when transparent', () => {
    expect(
      names(candidatesFor(params({ format: 'auto' }), { ...PHOTO, fewColours: true })),
    ).toEqual(['jpeg', 'webp', 'png lossless', 'webp lossless', 'avif']);
    expect(
      names(candidatesFor(params({ format: 'auto' }), { ...PHOTO, transparent: true })),
    ).toEqual(['webp', 'png lossless', 'webp lossless', 'avif']);
  });

  it('keeps to accept', () => {
    const accept = params({ format: 'auto', accept: ['png', 'jpeg'] });
    expect(names(candidatesFor(accept, PHOTO))).toEqual(['jpeg']);
    expect(names(candidatesFor(accept, { ...PHOTO, fewColours: true }))).toEqual([
      'jpeg',
      'png lossless',
    ]);
  });

  it('writes JPEG on white when it is the only format accepted for a transparent image', () => {
    const onlyJpeg = params({ format: 'auto', accept: ['jpeg'] });
    expect(names(candidatesFor(onlyJpeg, { ...PHOTO, transparent: true }))).toEqual(['jpeg']);
  });

  it('keeps an animation as WebP when WebP is accepted', () => {
    const animated = { ...PHOTO, animated: true };
    expect(names(candidatesFor(params({ format: 'auto' }), animated))).toEqual(['webp']);
    expect(
      names(candidatesFor(params({ format: 'auto', accept: ['avif', 'jpeg'] }), animated)),
    ).toEqual(['jpeg', 'avif']);
  });

  it('searches the one fixed format of an ssim target', () => {
    expect(names(candidatesFor(params({ format: 'png', ssim: 0.9 }), PHOTO))).toEqual(['png']);
  });
});

/** A codec whose score rises smoothly with quality, reaching `at(q)`; bytes grow with q. */
function searchOn(target: number, score: (quality: number) => number, start?: number) {
  const search = new QualitySearch(
    target,
    { min: QUALITY_SEARCH.min, max: QUALITY_SEARCH.max },
    { start },
  );
  for (let quality = search.next(); quality !== undefined; quality = search.next()) {
    search.record({ quality, bytes: quality * 100, ssim: score(quality) });
  }
  return search;
}

describe('QualitySearch', () => {
  const smooth = (quality: number) => 0.7 + 0.003 * quality;
  const lowestPassing = (target: number, score: (quality: number) => number) => {
    for (let quality = QUALITY_SEARCH.min; quality <= QUALITY_SEARCH.max; quality++) {
      if (score(quality) >= target) return quality;
    }
    return undefined;
  };

  it.each([0.8, 0.85, 0.9, 0.95])(
    'settles within the resolution of the lowest passing quality for %s, in few encodes',
    (target) => {
      const search = searchOn(target, smooth);
      const exact = lowestPassing(target, smooth)!;
      expect(search.best?.ssim).toBeGreaterThanOrEqual(target);
      expect(search.best!.quality - exact).toBeGreaterThanOrEqual(0);
      expect(search.best!.quality - exact).toBeLessThanOrEqual(QUALITY_SEARCH.resolution);
      expect(search.probes.length).toBeLessThanOrEqual(QUALITY_SEARCH.probes);
    },
  );

  it('copes with a steep step in the score (a codec keeping noise from some quality on)', () => {
    const steep = (quality: number) => (quality < 84 ? 0.88 + quality / 10_000 : 0.95);
    const search = searchOn(0.9, steep);
    expect(search.best?.quality).toBeGreaterThanOrEqual(84);
    expect(search.best?.quality).toBeLessThanOrEqual(84 + QUALITY_SEARCH.resolution);
    expect(search.probes.length).toBeLessThanOrEqual(QUALITY_SEARCH.probes);
  });

  it('starts where it is told', () => {
    expect(searchOn(0.9, smooth, 80).probes[0]?.quality).toBe(80);
  });

  it('never settles on a quality that was not measured to pass, and says how close it came', () => {
    const search = searchOn(0.999, smooth);
    expect(search.best).toBeUndefined();
    expect(search.closest?.quality).toBe(Math.max(...search.probes.map((probe) => probe.quality)));
  });
});

describe('chooseCandidate', () => {
  const outcome = (format: 'webp' | 'avif' | 'jpeg', bytes: number, ssim: number, meets: boolean) =>
    ({
      spec: { format, lossless: false },
      settled: { quality: 80, bytes, ssim },
      meetsTarget: meets,
    }) satisfies CandidateOutcome;

  it('takes the smallest that meets the target', () => {
    const chosen = chooseCandidate([
      outcome('jpeg', 300, 0.91, true),
      outcome('webp', 200, 0.9, true),
      outcome('avif', 100, 0.85, false),
      { spec: { format: 'png', lossless: true }, skipped: 'time-budget' },
    ]);
    expect(chosen.spec.format).toBe('webp');
  });

  it('takes the closest when none meets it', () => {
    const chosen = chooseCandidate([
      outcome('jpeg', 300, 0.88, false),
      outcome('webp', 200, 0.86, false),
    ]);
    expect(chosen.spec.format).toBe('jpeg');
  });
});

describe('the time budget', () => {
  it('allows what ends within it, on the clock it is handed', () => {
    let now = 1_000;
    const budget = new SearchBudget(5_000, () => now);
    expect(budget.allows(5_000)).toBe(true);
    now += 3_000;
    expect(budget.elapsedMs).toBe(3_000);
    expect(budget.allows(2_000)).toBe(true);
    expect(budget.allows(2_001)).toBe(false);
  });

  it('projects the rest of a candidate, and on a sample what its full-size encode adds', () => {
    const base = { probeMs: 100, remainingProbes: 5, samplePixels: 400, leaderProbeMs: 40 };
    expect(projectedCandidateMs({ ...base, fullPixels: 400 })).toBe(500);
    // 10× the sample: its full-size encode (1,000 ms) in place of the leader's (400 ms).
    expect(projectedCandidateMs({ ...base, fullPixels: 4_000 })).toBe(1_100);
    expect(projectedCandidateMs({ ...base, fullPixels: 4_000, leaderProbeMs: 200 })).toBe(500);
  });
});

describe('image traits', () => {
  it('counts colours up to a palette', () => {
    const palette = new Uint8Array(256 * 3).map((_, index) => Math.floor(index / 3));
    expect(hasFewColours(palette, 3)).toBe(true);
    expect(hasFewColours(new Uint8Array([...palette, 1, 2, 3]), 3)).toBe(false);
  });

  it('finds a pixel that is not opaque', () => {
    expect(hasTransparency(new Uint8Array([1, 2, 3, 255, 4, 5, 6, 255]), 4)).toBe(false);
    expect(hasTransparency(new Uint8Array([1, 2, 3, 255, 4, 5, 6, 254]), 4)).toBe(true);
    expect(hasTransparency(new Uint8Array([1, 2, 3]), 3)).toBe(false);
  });
});
