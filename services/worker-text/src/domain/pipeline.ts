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

/**
 * The shape of a step, for its span: the operation, its settings and sizes, never any of the
 * text. Lengths are UTF-16 code units (`String#length`): free to read, unlike code points.
 */
export type StepAttributes = Readonly<Record<string, string | number>>;

/** One step of the pipeline: an operation, or a token count. */
export interface PipelineStep<T> {
  /** The span's name: `text trim`, `text json-to-toon`, `text count tokens`. */
  readonly name: string;
  /** What is known before it runs. */
  readonly attributes: StepAttributes;
  readonly run: () => T;
  /** The shape of its result. */
  readonly describe: (result: T) => StepAttributes;
}

/** Runs a step of the pipeline; the pipeline thread passes one that also times it. */
export type RunStep = <T>(step: PipelineStep<T>) => T;

const runStepOnly: RunStep = (step) => step.run();

function applyOperation(
  text: string,
  operation: TextOperation,
  index: number,
  runStep: RunStep,
): string {
  const name = `text ${operation.type}`;
  const attributes = {
    'text.operation': operation.type,
    'text.operation.index': index,
    'text.length_in': text.length,
  };
  switch (operation.type) {
    case 'trim':
      return runStep({
        name,
        attributes: { ...attributes, 'text.trim.intensity': operation.params.intensity },
        run: () => trimText(text, operation.params.intensity),
        describe: (output) => ({ 'text.length_out': output.length }),
      });
    case 'json-to-toon':
      return runStep({
        name,
        attributes,
        run: () => convertJsonBlocksToToon(text),
        describe: (conversion) => ({
          'text.length_out': conversion.text.length,
          'text.json_blocks_converted': conversion.blocksConverted,
          'text.json_blocks_skipped': conversion.blocksSkipped,
        }),
      }).text;
  }
}

function countTokensStep(text: string, counted: 'input' | 'output'): PipelineStep<number> {
  return {
    name: 'text count tokens',
    attributes: { 'text.counted': counted, 'text.length_in': text.length },
    run: () => countTokens(text),
    describe: (tokens) => ({ 'text.tokens': tokens }),
  };
}

/** Runs the operations in order over `text`, each step through `runStep`. */
export function runTextPipeline(
  text: string,
  operations: readonly TextOperation[],
  runStep: RunStep = runStepOnly,
): TextPipelineResult {
  const output = operations.reduce(
    (input, operation, index) => applyOperation(input, operation, index, runStep),
    text,
  );
  return {
    text: output,
    operationsApplied: operations.map((operation) => operation.type),
    tokensIn: runStep(countTokensStep(text, 'input')),
    tokensOut: runStep(countTokensStep(output, 'output')),
    charactersIn: countCharacters(text),
  };
}
