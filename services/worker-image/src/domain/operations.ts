import type { ImageEncodeOperation, ImageOperation, ImageResizeOperation } from '@tamp/proto';
import { InvalidOperationChainError } from './errors';

/**
 * The image chain as the worker receives it, already resolved by the job service (defaults
 * filled in, presets expanded, 0..n resizes followed by exactly one encode). Operations,
 * formats and extensions are `@tamp/proto`'s.
 */
export type ResizeParams = ImageResizeOperation['params'];
export type EncodeParams = ImageEncodeOperation['params'];

export interface ImagePlan {
  resizes: ResizeParams[];
  encode: EncodeParams;
}

/** Splits a resolved chain into its resizes (in order) and its final encode. */
export function planOperations(operations: readonly ImageOperation[]): ImagePlan {
  const last = operations.at(-1);
  if (last?.type !== 'encode') {
    throw new InvalidOperationChainError('the last operation must be encode');
  }
  const resizes: ResizeParams[] = [];
  for (const [index, operation] of operations.slice(0, -1).entries()) {
    if (operation.type !== 'resize') {
      throw new InvalidOperationChainError(
        `operation ${index} is ${operation.type}; only the last one may be encode`,
      );
    }
    if (operation.params.width === undefined && operation.params.height === undefined) {
      throw new InvalidOperationChainError(
        `resize ${index} needs at least one of width and height`,
      );
    }
    resizes.push(operation.params);
  }
  return { resizes, encode: last.params };
}
