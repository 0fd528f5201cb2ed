/**
 * The pixels a quality search encodes and scores. An image of at most SAMPLE_MAX_PIXELS is
 * searched whole. A larger one is searched on a mosaic of tiles taken at full resolution on an
 * even grid (5×5 tiles of 128 px, 0.41 MP), so the search costs the same for 2 MP as for 48 MP:
 * - SSIM is the mean of local scores over 11×11 windows, so the mean over an even spread of
 *   windows estimates it (the grid covers sky, edges and texture in proportion);
 * - every codec here quantises with one setting for the whole image (no rate control), so
 *   what a quality does to a tile is what it does to the same tile in place;
 * - tiles are 128 px, a multiple of every codec's block (JPEG 8/16, WebP 16, AVIF 64/128), so
 *   tile seams fall on block edges in the mosaic.
 * The full-size encode at the settled quality is checked again on the same tiles (adapter).
 */

export const SAMPLE_TILE = 128;
export const SAMPLE_GRID = 5;
export const SAMPLE_MAX_PIXELS = (SAMPLE_TILE * SAMPLE_GRID) ** 2;

/** A tile: where it is in the image (left, top) and where it goes in the mosaic (x, y). */
export interface SampleTile {
  left: number;
  top: number;
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface SamplePlan {
  /** The whole image, one tile: no mosaic, and the search's best encode is the output. */
  whole: boolean;
  width: number;
  height: number;
  tiles: SampleTile[];
}

/** Evenly spread starts of `count` spans of `span` in `length`, each centred in its share. */
function starts(length: number, span: number, count: number): number[] {
  return Array.from({ length: count }, (_, index) => {
    const centre = ((index + 0.5) * length) / count;
    return Math.min(length - span, Math.max(0, Math.round(centre - span / 2)));
  });
}

export function planSample(width: number, height: number): SamplePlan {
  if (width * height <= SAMPLE_MAX_PIXELS) {
    return {
      whole: true,
      width,
      height,
      tiles: [{ left: 0, top: 0, x: 0, y: 0, width, height }],
    };
  }
  // A side shorter than a tile is taken whole; a long thin image gets more tiles along it.
  const tileWidth = Math.min(SAMPLE_TILE, width);
  const tileHeight = Math.min(SAMPLE_TILE, height);
  const maxTiles = Math.floor(SAMPLE_MAX_PIXELS / (tileWidth * tileHeight));
  let columns = Math.min(SAMPLE_GRID, Math.floor(width / tileWidth));
  let rows = Math.min(SAMPLE_GRID, Math.floor(height / tileHeight));
  if (rows === 1) columns = Math.min(maxTiles, Math.floor(width / tileWidth));
  if (columns === 1) rows = Math.min(maxTiles, Math.floor(height / tileHeight));
  const lefts = starts(width, tileWidth, columns);
  const tops = starts(height, tileHeight, rows);
  const tiles: SampleTile[] = [];
  for (const [row, top] of tops.entries()) {
    for (const [column, left] of lefts.entries()) {
      tiles.push({
        left,
        top,
        x: column * tileWidth,
        y: row * tileHeight,
        width: tileWidth,
        height: tileHeight,
      });
    }
  }
  return { whole: false, width: columns * tileWidth, height: rows * tileHeight, tiles };
}
