import { copyFile } from 'node:fs/promises';

/**
 * Never larger than the input (docs/decisions.md#never-larger-than-the-input), one rule for
 * every media pipeline: when the job's encoding is not smaller than its input and the input
 * itself is an answer the job accepts, the result is the input's own bytes.
 */
export interface KeepInputFacts<Format extends string> {
  inputSize: number;
  outputSize: number;
  /** The input's format in the pipeline's output formats; null when it is none of them (WAV). */
  inputFormat: Format | null;
  /** The formats the job accepts: its fixed format, or every one its `auto` may answer with. */
  accepted: readonly Format[];
  /**
   * The input already is what the chain asks for but for its encoding: the same dimensions and
   * frames (image), the same sound and channels (audio: a chain of the encode alone).
   */
  sameContent: boolean;
  /** The input carries what the pipeline strips or converts (metadata, orientation, a profile). */
  inputNeedsRewrite: boolean;
}

export function keepsInput<Format extends string>(facts: KeepInputFacts<Format>): boolean {
  return (
    facts.outputSize >= facts.inputSize &&
    facts.inputFormat !== null &&
    facts.accepted.includes(facts.inputFormat) &&
    facts.sameContent &&
    !facts.inputNeedsRewrite
  );
}

/** What a result becomes when its input is kept. */
export interface KeptInput<Format extends string> {
  format: Format;
  outputSize: number;
  keptInput: true;
}

/**
 * Copies the input over the encoded output when keepsInput says so and returns what the result
 * then is (the input's format and size, flagged); null, touching nothing, otherwise.
 */
export async function keepInputWhenNotSmaller<Format extends string>(
  paths: { inputPath: string; outputPath: string },
  facts: KeepInputFacts<Format>,
): Promise<KeptInput<Format> | null> {
  if (!keepsInput(facts) || facts.inputFormat === null) return null;
  await copyFile(paths.inputPath, paths.outputPath);
  return { format: facts.inputFormat, outputSize: facts.inputSize, keptInput: true };
}
