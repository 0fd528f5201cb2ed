import type { ResizeParams } from './operations';

export interface Dimensions {
  width: number;
  height: number;
}

/**
 * libvips rounds with C's rint (ties to even); Math.round ties upward, which would make the
 * plan disagree with sharp by a pixel on exact halves.
 */
function roundHalfEven(value: number): number {
  const floor = Math.floor(value);
  const fraction = value - floor;
  if (fraction > 0.5) return floor + 1;
  if (fraction < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/**
 * The dimensions one resize produces, following the product rules: a missing width or height
 * follows the aspect ratio; `inside` never enlarges; `cover` and `contain` with both sizes give
 * exactly that box. The arithmetic mirrors sharp's own shrink resolution, so the plan predicts
 * the real output before anything is decoded, which lets the pipeline refuse oversized results
 * up front. It is exact for PNG and WebP input and for any cover/contain box; for JPEG input a
 * side that follows the aspect ratio can come out one pixel larger, because libjpeg's
 * shrink-on-load rounds the intermediate size up. The pipeline reports sharp's real size.
 */
export function planResize(input: Dimensions, params: ResizeParams): Dimensions {
  const { width: boxWidth, height: boxHeight, fit } = params;
  let horizontalShrink = 1;
  let verticalShrink = 1;

  if (boxWidth !== undefined && boxHeight !== undefined) {
    horizontalShrink = input.width / boxWidth;
    verticalShrink = input.height / boxHeight;
    // cover scales until the box is filled (the smaller shrink), inside/contain until the
    // image fits in it (the larger one).
    const shrink =
      fit === 'cover'
        ? Math.min(horizontalShrink, verticalShrink)
        : Math.max(horizontalShrink, verticalShrink);
    horizontalShrink = shrink;
    verticalShrink = shrink;
  } else if (boxWidth !== undefined) {
    horizontalShrink = input.width / boxWidth;
    verticalShrink = horizontalShrink;
  } else if (boxHeight !== undefined) {
    verticalShrink = input.height / boxHeight;
    horizontalShrink = verticalShrink;
  }

  if (fit === 'inside') {
    horizontalShrink = Math.max(1, horizontalShrink);
    verticalShrink = Math.max(1, verticalShrink);
  }
  // Never shrink an axis below one pixel.
  horizontalShrink = Math.min(horizontalShrink, input.width);
  verticalShrink = Math.min(verticalShrink, input.height);

  if (boxWidth !== undefined && boxHeight !== undefined && fit !== 'inside') {
    return { width: boxWidth, height: boxHeight };
  }
  return {
    width: Math.max(1, roundHalfEven(input.width / horizontalShrink)),
    height: Math.max(1, roundHalfEven(input.height / verticalShrink)),
  };
}

/** Dimensions after each resize of a chain, in order (empty when there is no resize). */
export function planResizeChain(input: Dimensions, resizes: readonly ResizeParams[]): Dimensions[] {
  const steps: Dimensions[] = [];
  let current = input;
  for (const params of resizes) {
    current = planResize(current, params);
    steps.push(current);
  }
  return steps;
}
