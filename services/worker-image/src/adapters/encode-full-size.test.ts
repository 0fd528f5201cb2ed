import { ImageFixtures } from '@tamp/scripts/fixtures/images';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CandidateOutcome, SearchBudget } from '../domain/auto-encode';
import { encodeSettingsFor } from '../domain/encode-settings';
import { encodeFullSize } from './auto-encode';
import { encodeWith } from './sharp-passes';

/**
 * The full-size step of a mosaic search, with real AVIF encodes of a photo and the in-place
 * score given per quality: what the score of a real image is at each quality is the search's
 * business (auto-encode.test.ts); here it is what the step does with the scores it reads.
 */
const TARGET = 0.975;
/** The sample's probes: the search settled at 60. Shifted by the in-place bias at 60
 * (0.0035), 55 passes and 48 fails, so calibratedQuality predicts 53. */
const WINNER: CandidateOutcome = {
  spec: { format: 'avif', lossless: false },
  settled: { quality: 60, bytes: 0, ssim: 0.975 },
  probes: [
    { quality: 48, bytes: 0, ssim: 0.9705 },
    { quality: 55, bytes: 0, ssim: 0.972 },
    { quality: 60, bytes: 0, ssim: 0.975 },
  ],
  meetsTarget: true,
};

const settingsAt = (quality: number) =>
  encodeSettingsFor({ format: 'avif', quality, effort: 4, searched: true });

let fixtures: ImageFixtures;
let photo: string;

beforeAll(async () => {
  fixtures = await ImageFixtures.create('tamp-full-size-test-');
  photo = await fixtures.photo({ width: 640, height: 480, seed: 3 });
});
afterAll(() => fixtures.cleanup());

/** encodeFullSize with in-place scores by quality; the qualities it encoded, in order. */
async function fullSize(inPlace: Record<number, number>, budgetMs = 60_000) {
  const encodedQualities: number[] = [];
  let clock = 0;
  const now = () => (clock += 100);
  const full = await encodeFullSize({
    settings: (quality) => {
      encodedQualities.push(quality);
      return settingsAt(quality);
    },
    source: () => sharp(photo),
    score: async (_encoded, attempt) => inPlace[encodedQualities[attempt] as number] as number,
    winner: WINNER,
    target: TARGET,
    budget: new SearchBudget(budgetMs, now),
    now,
  });
  return { full, encodedQualities };
}

describe('encodeFullSize after a mosaic search', () => {
  it('keeps the lower quality the mosaic bias predicts when it passes in place and is smaller', async () => {
    const { full, encodedQualities } = await fullSize({ 60: 0.9785, 53: 0.976 });
    expect(encodedQualities).toEqual([60, 53]);
    expect(full).toMatchObject({ quality: 53, ssim: 0.976 });
    const atSettled = await encodeWith(sharp(photo), settingsAt(60)).toBuffer();
    expect(full.data.length).toBeLessThan(atSettled.length);
    expect(full.info.size).toBe(full.data.length);
  });

  it('keeps the settled quality when the predicted one misses the target in place', async () => {
    const { full, encodedQualities } = await fullSize({ 60: 0.9785, 53: 0.9745 });
    expect(encodedQualities).toEqual([60, 53]);
    expect(full).toMatchObject({ quality: 60, ssim: 0.9785 });
  });

  it('tries nothing lower when the search budget cannot pay for another encode', async () => {
    // The clock advances 100 ms a reading: the first encode alone takes the whole budget.
    const { full, encodedQualities } = await fullSize({ 60: 0.9785, 53: 0.976 }, 300);
    expect(encodedQualities).toEqual([60]);
    expect(full.quality).toBe(60);
  });

  it('raises the quality on a miss in place and then tries nothing lower', async () => {
    const { full, encodedQualities } = await fullSize({ 60: 0.973, 63: 0.9755 });
    expect(encodedQualities).toEqual([60, 63]);
    expect(full).toMatchObject({ quality: 63, ssim: 0.9755 });
  });
});
