import { describe, expect, it } from 'vitest';
import { type GainProbe, levelAtOffset, offsetReachingTarget } from './audio-filters';

const probe = (offsetDb: number, integratedLufs: number | null, peakDb = -1.5): GainProbe => ({
  offsetDb,
  measured: { kind: 'loudness', integratedLufs, loudnessRangeLu: 4, peakDb },
});

describe('offsetReachingTarget', () => {
  const probes = [probe(3, -13.5), probe(0, -14.8), probe(1.5, -14.1)];

  it('interpolates between the two probes around the target, in any order', () => {
    expect(offsetReachingTarget(-14, probes)).toBeCloseTo(1.75, 9);
    expect(offsetReachingTarget(-14.45, probes)).toBeCloseTo(0.75, 9);
  });

  it('adds the gap one for one outside the probes', () => {
    expect(offsetReachingTarget(-12.5, probes)).toBeCloseTo(4, 9);
    expect(offsetReachingTarget(-15.3, probes)).toBeCloseTo(-0.5, 9);
  });

  it('ignores branches that measured silence, and asks for nothing without any level', () => {
    expect(offsetReachingTarget(-14, [probe(0, null), probe(1.5, -14.5)])).toBeCloseTo(2, 9);
    expect(offsetReachingTarget(-14, [probe(0, null)])).toBe(0);
  });
});

describe('levelAtOffset', () => {
  const after = [probe(0, -24.4, -9), probe(1.5, -23.8, -8.5), probe(3, -23.2, -8)];

  it('interpolates what the branches measured further down the chain', () => {
    const level = levelAtOffset(after, 1);
    expect(level.integratedLufs).toBeCloseTo(-24, 9);
    expect(level.peakDb).toBeCloseTo(-9 + 1 / 3, 9);
  });

  it('extrapolates from the nearest two branches past the ends', () => {
    expect(levelAtOffset(after, 4.5).integratedLufs).toBeCloseTo(-22.6, 9);
    expect(levelAtOffset(after, -1.5).integratedLufs).toBeCloseTo(-25, 9);
  });

  it('shifts a single branch one for one, as a plain gain does', () => {
    expect(levelAtOffset([probe(0, -15.6, -4.6)], -5)).toMatchObject({
      integratedLufs: -20.6,
      peakDb: -9.6,
      loudnessRangeLu: 4,
    });
  });
});
