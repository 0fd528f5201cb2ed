import { describe, expect, it } from 'vitest';
import { planSample, SAMPLE_MAX_PIXELS } from './search-sample';

describe('planSample', () => {
  it('searches an image of up to SAMPLE_MAX_PIXELS whole', () => {
    expect(planSample(640, 640)).toMatchObject({ whole: true, width: 640, height: 640 });
    expect(planSample(640, 480).tiles).toEqual([
      { left: 0, top: 0, x: 0, y: 0, width: 640, height: 480 },
    ]);
  });

  it.each([
    [1600, 1200],
    [4000, 3000],
    [8000, 6000],
    [8192, 64],
    [100, 8000],
  ])('lays %s×%s out as a mosaic of tiles inside the image, within the limit', (width, height) => {
    const plan = planSample(width, height);
    expect(plan.whole).toBe(false);
    expect(plan.width * plan.height).toBeLessThanOrEqual(SAMPLE_MAX_PIXELS);
    expect(plan.width * plan.height).toBeGreaterThan(SAMPLE_MAX_PIXELS / 2);
    const cells = new Set<string>();
    for (const tile of plan.tiles) {
      expect(tile.left + tile.width).toBeLessThanOrEqual(width);
      expect(tile.top + tile.height).toBeLessThanOrEqual(height);
      expect(tile.x + tile.width).toBeLessThanOrEqual(plan.width);
      expect(tile.y + tile.height).toBeLessThanOrEqual(plan.height);
      cells.add(`${tile.x},${tile.y}`);
    }
    // Every mosaic cell is filled exactly once.
    expect(cells.size * plan.tiles[0]!.width * plan.tiles[0]!.height).toBe(
      plan.width * plan.height,
    );
  });

  it('spreads the tiles over the whole image', () => {
    const { tiles } = planSample(4000, 3000);
    expect(Math.min(...tiles.map((tile) => tile.left))).toBeLessThan(4000 / 5);
    expect(Math.max(...tiles.map((tile) => tile.left + tile.width))).toBeGreaterThan(4000 * 0.8);
  });
});
