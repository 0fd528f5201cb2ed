import { describe, expect, it } from 'vitest';
import {
  type CutInterval,
  keepFramesExpression,
  keptSilenceSec,
  removedSeconds,
  silenceCuts,
  silenceThresholdDb,
} from './silence-cuts';

/** Evaluates the generated ffmpeg expression in JS (only the functions we emit). */
function compileExpression(expression: string): (t: number) => number {
  const js = expression
    .replaceAll(/between\(t,([\d.]+),([\d.]+)\)/g, '(t>=$1&&t<=$2?1:0)')
    .replaceAll(/gte\(t,([\d.]+)\)/g, '(t>=$1?1:0)')
    .replaceAll(/lt\(t,([\d.]+)\)/g, '(t<$1)')
    .replaceAll('if(', 'pick(')
    .replaceAll('not(', 'negate(');
  return new Function('t', `const pick=(c,a,b)=>c?a:b; const negate=(x)=>x?0:1; return ${js};`) as (
    t: number,
  ) => number;
}

const bruteForceKeep = (cuts: readonly CutInterval[], t: number) =>
  cuts.some((cut) => t >= cut.startSec && t <= cut.endSec) ? 0 : 1;

describe('silence threshold mapping', () => {
  it('maps aggressiveness linearly from -60 dB to -25 dB', () => {
    expect(silenceThresholdDb(0)).toBe(-60);
    expect(silenceThresholdDb(0.5)).toBe(-42.5);
    expect(silenceThresholdDb(1)).toBe(-25);
  });

  it('keeps half the minimum silence, at most 250 ms', () => {
    expect(keptSilenceSec(100)).toBe(0.05);
    expect(keptSilenceSec(500)).toBe(0.25);
    expect(keptSilenceSec(5000)).toBe(0.25);
  });
});

describe('silenceCuts', () => {
  it('shortens long silences to the kept length, split around the cut', () => {
    const cuts = silenceCuts(
      [
        { startSec: 0, endSec: 2 },
        { startSec: 5, endSec: 5.3 },
        { startSec: 8, endSec: 10 },
      ],
      0.5,
      0.2,
    );
    expect(cuts).toEqual([
      { startSec: 0.1, endSec: 1.9 },
      { startSec: 8.1, endSec: 9.9 },
    ]);
    expect(removedSeconds(cuts, 12)).toBeCloseTo(3.6, 9);
  });

  it('cuts a silence that runs to the end of the stream', () => {
    const cuts = silenceCuts([{ startSec: 10, endSec: null }], 0.5, 0.2);
    expect(cuts).toEqual([{ startSec: 10.1, endSec: Number.POSITIVE_INFINITY }]);
    expect(removedSeconds(cuts, 13)).toBeCloseTo(2.9, 9);
  });

  it('leaves a silence alone when nothing would remain to cut', () => {
    expect(silenceCuts([{ startSec: 1, endSec: 1.15 }], 0.1, 0.2)).toEqual([]);
  });
});

describe('keepFramesExpression', () => {
  it('keeps everything when there is nothing to cut', () => {
    expect(keepFramesExpression([])).toBe('1');
  });

  it('agrees with a brute-force check for a few and for thousands of cuts', () => {
    for (const count of [1, 3, 4, 5, 17, 600]) {
      const cuts: CutInterval[] = Array.from({ length: count }, (_, i) => ({
        startSec: i * 3 + 1,
        endSec: i === count - 1 ? Number.POSITIVE_INFINITY : i * 3 + 2.5,
      }));
      const keep = compileExpression(keepFramesExpression(cuts));
      const disagreements: number[] = [];
      for (let t = 0; t < count * 3 + 5; t += 0.37) {
        if (keep(t) !== bruteForceKeep(cuts, t)) disagreements.push(t);
      }
      expect(disagreements, `${count} cuts`).toEqual([]);
    }
  });

  it('nests logarithmically so per-frame cost stays small', () => {
    const cuts = Array.from({ length: 4096 }, (_, i) => ({ startSec: i, endSec: i + 0.5 }));
    const expression = keepFramesExpression(cuts);
    const open: boolean[] = [];
    let deepestIf = 0;
    for (let i = 0; i < expression.length; i++) {
      if (expression[i] === '(') {
        open.push(expression.slice(i - 2, i) === 'if');
        deepestIf = Math.max(deepestIf, open.filter(Boolean).length);
      } else if (expression[i] === ')') {
        open.pop();
      }
    }
    // 4096 cuts in leaves of 4 → 1024 leaves → a balanced tree of depth 10.
    expect(deepestIf).toBe(10);
  });
});
