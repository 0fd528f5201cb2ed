import type { TextOperation } from '@tamp/proto';
import {
  type RunStep,
  runTextPipeline,
  type StepAttributes,
  type TextPipelineResult,
} from '../domain/pipeline';

/** What the main thread posts to a pipeline thread (structured-cloned). */
export interface TextPipelineTask {
  readonly text: string;
  readonly operations: readonly TextOperation[];
}

/** A step as it ran in the thread, for the span the main thread makes of it. */
export interface TimedStep {
  readonly name: string;
  readonly attributes: StepAttributes;
  /**
   * `process.hrtime.bigint()` when it started and ended: one monotonic clock for every thread
   * of the process, so the main thread places the step exactly on its own timeline.
   */
  readonly startedAt: bigint;
  readonly endedAt: bigint;
  readonly failed: boolean;
}

/**
 * What a pipeline thread answers: the result or the error the pipeline threw (cloned as piscina
 * would clone it), and the steps that ran either way, the failed one last.
 */
export type TextPipelineOutcome = { readonly steps: readonly TimedStep[] } & (
  | { readonly result: TextPipelineResult }
  | { readonly error: unknown }
);

/**
 * Entry of the text pipeline's worker threads (piscina calls the default export per task).
 * Only this module graph is loaded in the threads: the domain and its tokenizer tables.
 */
export default function runTextPipelineTask(task: TextPipelineTask): TextPipelineOutcome {
  const steps: TimedStep[] = [];
  const runTimedStep: RunStep = (step) => {
    const startedAt = process.hrtime.bigint();
    let result: ReturnType<typeof step.run>;
    let failed = true;
    try {
      result = step.run();
      failed = false;
    } finally {
      const endedAt = process.hrtime.bigint();
      // The result's shape is read after the clock stops: it is not part of the step.
      const attributes = failed
        ? step.attributes
        : { ...step.attributes, ...step.describe(result!) };
      steps.push({ name: step.name, attributes, startedAt, endedAt, failed });
    }
    return result;
  };
  try {
    return { result: runTextPipeline(task.text, task.operations, runTimedStep), steps };
  } catch (error) {
    return { error, steps };
  }
}
