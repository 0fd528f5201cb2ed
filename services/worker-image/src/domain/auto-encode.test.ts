import { type ImageEncodeParams, imageOperationSchema } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import {
  type CandidateOutcome,
  calibratedQuality,
  candidatesFor,
  chooseCandidate,
  hasFewColours,
  hasTransparency,
  projectedCandidateMs,
  QUALITY_SEARCH,
  QualitySearch,
  resolutionFor,
  SearchBudget,
  searchStartFor,
} from './auto-encode';
import { avifQualityFor } from './encode-settings';

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

  it('goes below 20 when the target is met there (flat graphics, low targets)', () => {
    // grub-homeworld, a flat 1920×1080 background, scores 0.9955 at API 22: `avifenc` meets
    // 0.98 near the bottom of its range, where a floor of 20 kept Tamp 1.33× its size.
    const flat = (quality: number) => 0.975 + quality / 1_000;
    const search = searchOn(0.98, flat);
    expect(search.best!.quality).toBeGreaterThanOrEqual(5);
    expect(search.best!.quality).toBeLessThanOrEqual(5 + QUALITY_SEARCH.resolution);
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

/** An AVIF search as the adapter runs it (finer above API 80) on a synthetic codec. */
function avifSearchOn(
  target: number,
  codec: (quality: number) => { bytes: number; ssim: number },
  start?: number,
) {
  const avif = { format: 'avif', lossless: false } as const;
  const search = new QualitySearch(
    target,
    { min: QUALITY_SEARCH.min, max: QUALITY_SEARCH.max },
    { start, maxProbes: QUALITY_SEARCH.probes, resolution: resolutionFor(avif) },
  );
  for (let quality = search.next(); quality !== undefined; quality = search.next()) {
    search.record({ quality, ...codec(quality) });
  }
  return search;
}

/** Linear between (quality, value) anchors, and beyond the ends along their last slope. */
function piecewise(anchors: readonly (readonly [number, number])[]) {
  return (quality: number) => {
    let index = anchors.findIndex(([at]) => at > quality);
    if (index <= 0) index = index === 0 ? 1 : anchors.length - 1;
    const [q0, v0] = anchors[index - 1]!;
    const [q1, v1] = anchors[index]!;
    return v0 + ((v1 - v0) * (quality - q0)) / (q1 - q0);
  };
}

describe('QualitySearch lands on the smallest passing quality', () => {
  // "ladybird" (a 1280 px photo) at SSIM 0.98, as measured by scripts/bench/image-corpus.ts: q87
  // passes, q53 fails, q70 and q72 fail with the same file (AVIF 44 and 45 encode alike), q73
  // passes at half q87's size. Started at 87 (where WebP had settled), the old search spent its
  // 4 encodes on 87, 53, 70, 72 and kept q87.
  const ladybirdScore = piecewise([
    [53, 0.9751],
    [70, 0.9794],
    [72, 0.9794],
    [73, 0.98],
    [80, 0.9809],
    [87, 0.9849],
  ]);
  const ladybird = (quality: number) => ({
    ssim: ladybirdScore(quality),
    bytes: quality >= 70 && quality <= 72 ? 8_800 : Math.round(9_300 * 1.1 ** (quality - 73)),
  });

  it('spends its last encode towards the passing side (ladybird, started at 87)', () => {
    const search = avifSearchOn(0.98, ladybird, 87);
    expect(search.probes[0]?.quality).toBe(87);
    expect(search.best!.quality).toBeGreaterThanOrEqual(73);
    expect(search.best!.quality).toBeLessThanOrEqual(80);
    expect(search.probes.length).toBeLessThanOrEqual(QUALITY_SEARCH.probes);
  });

  it('lands near 73 on ladybird from the middle, where AVIF now starts', () => {
    const search = avifSearchOn(0.98, ladybird);
    expect(search.best!.quality).toBeGreaterThanOrEqual(73);
    expect(search.best!.quality).toBeLessThanOrEqual(80);
  });

  it('bisects after an encode that gave the same file as another quality', () => {
    // With encodes to spare, interpolation after the flat 70–72 would aim just short again.
    const search = new QualitySearch(0.98, { min: 20, max: 95 }, { start: 87, maxProbes: 6 });
    for (const quality of [87, 53, 70, 72]) search.record({ quality, ...ladybird(quality) });
    expect(search.next()).toBe(80);
  });

  // "green-meadow": the score rises evenly with AVIF's quality and first passes at API 81
  // (avifenc's cq31). From the middle the old search spent its 4 encodes on 58, 77, 87, 80 and
  // kept 87: 5 AVIF qualities higher than needed, 1.9× the size.
  it('does not overshoot above API 80, where a step is 2.5 AVIF qualities (green-meadow)', () => {
    const meadow = (quality: number) => ({
      ssim: 0.98 + 0.0006 * (avifQualityFor(quality) - avifQualityFor(81)),
      bytes: Math.round(1_000 * Math.exp(avifQualityFor(quality) / 25)),
    });
    const search = avifSearchOn(0.98, meadow);
    expect(search.best!.quality).toBeGreaterThanOrEqual(81);
    expect(search.best!.quality).toBeLessThanOrEqual(82);
    expect(search.probes.length).toBeLessThanOrEqual(QUALITY_SEARCH.probes);
  });
});

describe('QualitySearch with the AVIF encodes it may spend', () => {
  // AVIF's score often jumps between neighbouring qualities (yellow-flower, wood and pixels of
  // the corpus kept outputs 0.004-0.009 above the target with 4 encodes). On a score that jumps
  // at 60, 4 encodes stop at 63 with the bracket still 3 wide; 6 find 60.
  it('finds the first passing quality on a score that jumps where it crosses the target', () => {
    const jumping = (quality: number) => ({
      ssim:
        0.9775 +
        0.0003 * (avifQualityFor(quality) - avifQualityFor(60)) +
        (quality >= 60 ? 0.004 : 0),
      bytes: Math.round(1_000 * Math.exp(avifQualityFor(quality) / 25)),
    });
    const search = avifSearchOn(0.98, jumping);
    expect(search.best!.quality).toBe(60);
  });
});

describe('searchStartFor', () => {
  const avif = { format: 'avif', lossless: false } as const;
  const webp = { format: 'webp', lossless: false } as const;

  it("starts at the job's quality without a target (the API's qualities are aligned)", () => {
    expect(searchStartFor(avif, params({ format: 'auto', quality: 70 }), 87)).toBe(70);
  });

  it('with a target, starts WebP where JPEG settled and AVIF in the middle', () => {
    const target = params({ format: 'auto', ssim: 0.98 });
    expect(searchStartFor(webp, target, 61)).toBe(61);
    expect(searchStartFor(avif, target, 87)).toBeUndefined();
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

describe('calibratedQuality', () => {
  // Tamp's AVIF on the corpus' wood render, API qualities: the mosaic's scores and, at 60, the
  // full-size output's score in place (0.9853 against the mosaic's 0.9818).
  const probe = (quality: number, ssim: number) => ({ quality, bytes: 0, ssim });
  const woodProbes = [probe(48, 0.9733), probe(56, 0.9788), probe(60, 0.9818)];

  it('interpolates where the sample, shifted by the bias measured in place, reaches the target', () => {
    // Shifted by 0.0035: 48 → 0.9768 (fails), 56 → 0.9823 (passes); 0.98 lies at 52.7.
    expect(calibratedQuality(woodProbes, probe(60, 0.9818), 0.9853, 0.98)).toBe(53);
  });

  it('takes the lowest probe predicted to pass when none below it is predicted to fail', () => {
    expect(calibratedQuality([probe(56, 0.9788)], probe(60, 0.9818), 0.9853, 0.98)).toBe(56);
  });

  it('interpolates up to the settled quality when every probe below is predicted to fail', () => {
    // 48 → 0.9768, 60 → 0.9853 in place: 0.98 lies at 52.5.
    expect(calibratedQuality([probe(48, 0.9733)], probe(60, 0.9818), 0.9853, 0.98)).toBe(53);
  });

  it('leaves the quality alone without a bias, or when the output misses the target in place', () => {
    expect(calibratedQuality(woodProbes, probe(60, 0.9818), 0.9818, 0.98)).toBeUndefined();
    // A small bias moves it a little: 56 → 0.9792, 60 → 0.9822; 0.98 lies at 57.1.
    expect(calibratedQuality(woodProbes, probe(60, 0.9818), 0.9822, 0.98)).toBe(58);
    expect(calibratedQuality(woodProbes, probe(60, 0.981), 0.979, 0.98)).toBeUndefined();
    expect(calibratedQuality([], probe(60, 0.9818), 0.9853, 0.98)).toBeUndefined();
  });
});
