import { countCharacters, type TextOperation } from '@tamp/proto';
import { convertJsonBlocksToToon } from './json-to-toon';
import { countTokens } from './tokens';
import { trimText } from './trim';

export interface TextPipelineResult {
  readonly text: string;
  /** Operation types in the order they ran. */
  readonly operationsApplied: string[];
  /** o200k tokens of the input. */
  readonly tokensIn: number;
  /** o200k tokens of the output. */
  readonly tokensOut: number;
  /** Unicode code points of the input (what usage counts as characters). */
  readonly charactersIn: number;
}

function applyOperation(text: string, operation: TextOperation): string {
  switch (operation.type) {
    case 'trim':
      return trimText(text, operation.params.intensity);
    case 'json-to-toon':
      return convertJsonBlocksToToon(text).text;
  }
}

/** Runs the operations in order over `text`. */
export function runTextPipeline(
  text: string,
  operations: readonly TextOperation[],
): TextPipelineResult {
  const output = operations.reduce(applyOperation, text);
  return {
    text: output,
    operationsApplied: operations.map((operation) => operation.type),
    tokensIn: countTokens(text),
    tokensOut: countTokens(output),
    charactersIn: countCharacters(text),
  };
}
