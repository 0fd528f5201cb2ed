import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { inSpan } from '@tamp/kit';
import { Piscina } from 'piscina';
import { PdfTextExtractionError } from '../domain/errors';
import type { PdfTextOutcome, PdfTextTask } from './pdf-thread';
import { IDLE_THREAD_TIMEOUT_MS, threadEntryOptions } from './thread-entry';

const PDF_SIGNATURE = Buffer.from('%PDF-');
/** Readers accept the signature anywhere in the first kilobyte (after junk some tools prepend). */
const SIGNATURE_WINDOW = 1024;

/**
 * The text of every page that has text, pages separated by a blank line; rejects with a
 * `PdfTextExtractionError` for a file pdf.js cannot read, and once `signal` aborts.
 */
export type ExtractPdfText = (filePath: string, signal: AbortSignal) => Promise<string>;

export interface PdfTextPool {
  extract: ExtractPdfText;
  /** Ends every thread at once; extractions still running are rejected. */
  close(): Promise<void>;
}

/**
 * Up to `threads` threads that run pdf.js (`pdf-thread.ts` says why never this one). None
 * runs before the first PDF: a worker that never sees one never pays for pdf.js, and the
 * first PDF of a quiet minute waits for a thread to load it. An abort terminates the task's
 * thread, so a timed-out job stops using a CPU at once.
 */
export function startPdfTextPool(options: { threads: number }): PdfTextPool {
  const piscina = new Piscina<PdfTextTask, PdfTextOutcome>({
    ...threadEntryOptions('pdf-thread'),
    minThreads: 0,
    maxThreads: options.threads,
    idleTimeout: IDLE_THREAD_TIMEOUT_MS,
  });
  const extract: ExtractPdfText = (filePath, signal) =>
    inSpan('pdf extract text', {}, async (span) => {
      const name = basename(filePath);
      const bytes = await readFile(filePath);
      span.setAttribute('pdf.bytes', bytes.length);
      if (!bytes.subarray(0, SIGNATURE_WINDOW).includes(PDF_SIGNATURE)) {
        throw new PdfTextExtractionError(
          `${name} is not a PDF file (no %PDF- header)`,
          'not-a-pdf',
        );
      }
      const data = ownedBytes(bytes);
      const outcome = await piscina.run({ data }, { signal, transferList: [data.buffer] });
      if ('failure' in outcome) throw extractionError(name, outcome);
      span.setAttributes({
        'pdf.pages': outcome.pages,
        'pdf.pages_with_text': outcome.pagesWithText,
        'text.length_out': outcome.text.length,
      });
      return outcome.text;
    });
  return { extract, close: () => piscina.destroy() };
}

/** Bytes with an ArrayBuffer of their own, which can be handed to a thread without a copy. */
function ownedBytes(bytes: Buffer): Uint8Array<ArrayBuffer> {
  const { buffer } = bytes;
  if (
    buffer instanceof ArrayBuffer &&
    bytes.byteOffset === 0 &&
    bytes.byteLength === buffer.byteLength
  ) {
    return new Uint8Array(buffer);
  }
  return new Uint8Array(bytes);
}

function extractionError(
  name: string,
  outcome: Extract<PdfTextOutcome, { failure: string }>,
): PdfTextExtractionError {
  if (outcome.failure === 'encrypted') {
    return new PdfTextExtractionError(`${name} is password-protected`, 'encrypted');
  }
  return new PdfTextExtractionError(
    `${name} is not a readable PDF: ${outcome.detail}`,
    'unreadable',
  );
}
