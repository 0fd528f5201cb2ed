import {
  type ImageEncodeOperation,
  type ImageOperation,
  type ImageResizeOperation,
  splitImageChain,
} from '@tamp/proto';

/**
 * The image chain as the worker receives it, already resolved by the job service (defaults
 * filled in, presets expanded, 0..n resizes followed by exactly one encode) and validated by
 * proto's `imageChainSchema` when the work message arrived. Operations, formats, extensions and
 * the chain rules are `@tamp/proto`'s.
 */
export type ResizeParams = ImageResizeOperation['params'];
export type EncodeParams = ImageEncodeOperation['params'];

export interface ImagePlan {
  resizes: ResizeParams[];
  encode: EncodeParams;
}

/** A resolved chain's resizes (in order) and its final encode. */
export function planOperations(operations: readonly ImageOperation[]): ImagePlan {
  const { processing, encode } = splitImageChain(operations);
  return { resizes: processing.map((resize) => resize.params), encode: encode.params };
}
