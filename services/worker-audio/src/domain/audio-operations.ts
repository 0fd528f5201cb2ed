import type { AudioEncodeOperation, AudioOperation } from '@tamp/proto';

/**
 * The resolved audio chain as the worker receives it (presets expanded, defaults filled, one
 * `encode` last, validated by proto's `audioChainSchema` when the work message arrived): the
 * operations, ranges, defaults and chain rules are `@tamp/proto`'s, never restated here.
 */
export type AudioOperationOf<Type extends AudioOperation['type']> = Extract<
  AudioOperation,
  { type: Type }
>;
export type ProcessingOperation = Exclude<AudioOperation, AudioEncodeOperation>;
