import { describe, expect, it } from 'vitest';
import type { ResizeParams } from './operations';
import { planResize, planResizeChain } from './resize-geometry';

function resize(params: Partial<ResizeParams>): ResizeParams {
  return { fit: 'inside', position: 'centre', ...params };
}

describe('planResize', () => {
  const landscape = { width: 1600, height: 1200 };

  it('follows the aspect ratio when one side is missing', () => {
    expect(planResize(landscape, resize({ width: 800 }))).toEqual({ width: 800, height: 600 });
    expect(planResize(landscape, resize({ height: 300 }))).toEqual({ width: 400, height: 300 });
    expect(planResize(landscape, resize({ width: 3200, fit: 'cover' }))).toEqual({
      width: 3200,
      height: 2400,
    });
  });

  it('never enlarges with inside, with one or both sides given', () => {
    expect(planResize({ width: 200, height: 150 }, resize({ width: 800, height: 800 }))).toEqual({
      width: 200,
      height: 150,
    });
    expect(planResize({ width: 200, height: 150 }, resize({ width: 1000 }))).toEqual({
      width: 200,
      height: 150,
    });
    expect(planResize(landscape, resize({ width: 1000, height: 1000 }))).toEqual({
      width: 1000,
      height: 750,
    });
  });

  it('gives exactly the box with cover and contain, enlarging when needed', () => {
    for (const fit of ['cover', 'contain'] as const) {
      expect(planResize(landscape, resize({ width: 300, height: 500, fit }))).toEqual({
        width: 300,
        height: 500,
      });
      expect(
        planResize({ width: 20, height: 20 }, resize({ width: 640, height: 480, fit })),
      ).toEqual({ width: 640, height: 480 });
    }
  });

  it('rounds halves to even like libvips', () => {
    // 1001 × 0.5 = 500.5 → 500 (even), 1003 × 0.5 = 501.5 → 502.
    expect(planResize({ width: 2000, height: 1001 }, resize({ width: 1000 })).height).toBe(500);
    expect(planResize({ width: 2000, height: 1003 }, resize({ width: 1000 })).height).toBe(502);
  });

  it('never sends a side below one pixel', () => {
    expect(planResize({ width: 10000, height: 16 }, resize({ width: 16 }))).toEqual({
      width: 16,
      height: 1,
    });
  });

  it('chains resizes in order', () => {
    expect(
      planResizeChain(landscape, [
        resize({ width: 400, height: 400, fit: 'cover' }),
        resize({ width: 100 }),
      ]),
    ).toEqual([
      { width: 400, height: 400 },
      { width: 100, height: 100 },
    ]);
    expect(planResizeChain(landscape, [])).toEqual([]);
  });
});
