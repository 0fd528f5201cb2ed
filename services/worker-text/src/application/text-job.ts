import { readFile, stat, writeFile } from 'node:fs/promises';
import { extname, join } from 'node:path';
import {
  type JobFileStore,
  PermanentJobError,
  type ProcessJob,
  sizeMetrics,
  storeResult,
} from '@tamp/kit';
import type { JobInput } from '@tamp/proto';
import type { ExtractPdfText } from '../adapters/pdf';
import type { RunTextPipeline } from '../adapters/text-pipeline-pool';
import { PdfTextExtractionError } from '../domain/errors';

export interface TextJobOptions {
  store: JobFileStore;
  /**
   * Largest output (UTF-8 bytes) returned as `outputText` for a `stored-text` job; a larger one
   * is only in the result object. Keeps completions far below NATS' max payload (1 MB by
   * default) and job documents below MongoDB's 16 MB.
   */
  maxOutputTextBytes: number;
  /** The CPU-heavy part (trim, JSON to TOON, token counts), kept off the event loop. */
  runPipeline: RunTextPipeline;
  extractPdfText: ExtractPdfText;
}

interface TextInput {
  text: string;
  inputSize: number;
  /** Where the output goes: back as text (inline `text` sources) or into a `.txt` object. */
  source: 'message' | 'stored-text' | 'upload';
}

/**
 * A text job. Output placement:
 * - inline fast path (`text` in the message, answered by request/reply): `outputText` only.
 * - every queued job: `results/<a>/<j>/result.txt`, whose key the job's webhook carries (spec:
 *   `job.result.outputKey` is a storage key); jobs from inline text (`text` or `stored-text`)
 *   also return `outputText` when it is at most `maxOutputTextBytes` — above that it is null and
 *   the job service serves `result.outputText` from `outputKey`.
 * - `upload` (`.txt` read as UTF-8, `.pdf` through text extraction): `result.txt` only.
 */
export function createTextJobProcessor(options: TextJobOptions): ProcessJob<'text'> {
  return async (work, { workspace, mode, signal }) => {
    const startedAt = performance.now();
    const input = await readInput(work.input, workspace, options, signal);
    const result = await options.runPipeline(input.text, work.operations, signal);
    const outputSize = Buffer.byteLength(result.text, 'utf8');

    let outputKey: string | null = null;
    let outputText: string | null = result.text;
    if (mode === 'queued' || input.source !== 'message') {
      const outputPath = join(await workspace(), 'result.txt');
      await writeFile(outputPath, result.text, 'utf8');
      outputKey = await storeResult(options.store, work, outputPath, 'txt');
      const returnText = input.source !== 'upload' && outputSize <= options.maxOutputTextBytes;
      outputText = returnText ? result.text : null;
    }
    return {
      outputKey,
      outputText,
      metrics: {
        ...sizeMetrics(input.inputSize, outputSize, startedAt),
        operationsApplied: result.operationsApplied,
        tokensIn: result.tokensIn,
        tokensOut: result.tokensOut,
      },
      usage: { inputBytes: input.inputSize, characters: result.charactersIn },
    };
  };
}

async function readInput(
  input: JobInput,
  workspace: () => Promise<string>,
  { store, extractPdfText }: TextJobOptions,
  signal: AbortSignal,
): Promise<TextInput> {
  switch (input.kind) {
    case 'text':
      return {
        text: input.text,
        inputSize: Buffer.byteLength(input.text, 'utf8'),
        source: 'message',
      };
    case 'stored-text': {
      const path = join(await workspace(), 'input.txt');
      await store.downloadToFile(input.key, path);
      return {
        text: await readUtf8(path),
        inputSize: (await stat(path)).size,
        source: 'stored-text',
      };
    }
    case 'upload': {
      const extension = extname(input.filename).toLowerCase();
      const path = join(await workspace(), `input${extension}`);
      await store.downloadToFile(input.key, path);
      const inputSize = (await stat(path)).size;
      if (extension === '.txt') return { text: await readUtf8(path), inputSize, source: 'upload' };
      if (extension === '.pdf') {
        try {
          return { text: await extractPdfText(path, signal), inputSize, source: 'upload' };
        } catch (error) {
          // Not a PDF, encrypted or unreadable: the same file will fail the same way again.
          if (error instanceof PdfTextExtractionError) {
            throw new PermanentJobError(error.message.replace(/^input\.pdf/, input.filename), {
              cause: error,
            });
          }
          throw error;
        }
      }
      throw new PermanentJobError(`A text job cannot read ${extension || 'extensionless'} files`);
    }
  }
}

/** UTF-8 with the byte-order mark dropped; invalid sequences become U+FFFD. */
async function readUtf8(path: string): Promise<string> {
  return new TextDecoder('utf-8').decode(await readFile(path));
}
