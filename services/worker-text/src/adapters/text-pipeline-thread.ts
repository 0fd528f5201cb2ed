import type { TextOperation } from '@tamp/proto';
import { runTextPipeline, type TextPipelineResult } from '../domain/pipeline';

/** What the main thread posts to a pipeline thread (structured-cloned). */
export interface TextPipelineTask {
  readonly text: string;
  readonly operations: readonly TextOperation[];
}

/**
 * Entry of the text pipeline's worker threads (piscina calls the default export per task).
 * Only this module graph is loaded in the threads: the domain and its tokenizer tables.
 */
export default function runTextPipelineTask(task: TextPipelineTask): TextPipelineResult {
  return runTextPipeline(task.text, task.operations);
}
