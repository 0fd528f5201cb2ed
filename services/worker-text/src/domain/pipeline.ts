import { convertJsonBlocksToToon } from './json-to-toon';
import { countTokens } from './tokens';
import { trimText } from './trim';

export type TextOperation =
  | { readonly type: 'trim'; readonly params: { readonly intensity: number } }
  | { readonly type: 'json-to-toon'; readonly params?: Record<string, never> };

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

/** Counts code points without materialising an array of them (inputs reach 5 M characters). */
export function countCodePoints(text: string): number {
  let count = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        count--;
        i++;
      }
    }
  }
  return count;
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
    charactersIn: countCodePoints(text),
  };
}
