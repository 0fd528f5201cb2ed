import {
  type AudioEncodeOperation,
  type AudioOperation,
  audioEncodeOf,
  audioOperationSchema,
} from '@tamp/proto';
import { InvalidOperationChainError } from './errors';

/**
 * The resolved audio chain as the worker receives it (presets expanded, defaults filled, one
 * `encode` last): the operations, ranges and defaults are `@tamp/proto`'s, never restated here.
 */
export type AudioOperationOf<Type extends AudioOperation['type']> = Extract<
  AudioOperation,
  { type: Type }
>;
export type ProcessingOperation = Exclude<AudioOperation, AudioEncodeOperation>;

/** A chain split into its processing steps and the final encode. */
export interface ValidatedAudioChain {
  processing: readonly ProcessingOperation[];
  encode: AudioEncodeOperation;
}

/**
 * Guards the processing core against a chain that skipped resolution or validation upstream,
 * with proto's own schema. The gateway validates user input; a failure here is a programming
 * error, so the message names the offending position instead of being user-friendly.
 */
export function validateResolvedChain(chain: readonly AudioOperation[]): ValidatedAudioChain {
  const operations = chain.map((operation, index) => {
    if (operation.type === 'encode' && index !== chain.length - 1) {
      throw new InvalidOperationChainError(`encode at position ${index} is not the last operation`);
    }
    const parsed = audioOperationSchema.safeParse(operation);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = [operation.type, ...(issue?.path.slice(1) ?? [])].join('.');
      throw new InvalidOperationChainError(`${field} at position ${index}: ${issue?.message}`);
    }
    return parsed.data;
  });
  if (chain.at(-1)?.type !== 'encode') {
    throw new InvalidOperationChainError('the chain must end with exactly one encode operation');
  }
  return {
    processing: operations.slice(0, -1) as ProcessingOperation[],
    encode: audioEncodeOf(operations),
  };
}
