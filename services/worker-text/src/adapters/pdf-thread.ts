import { PDFParse } from 'pdf-parse';
import type { PdfFailureReason } from '../domain/errors';

/** What the main thread posts to a PDF thread: the file's bytes, transferred, not copied. */
export interface PdfTextTask {
  readonly data: Uint8Array;
}

/** The text of every page that has text, or why pdf.js could not read the document. */
export type PdfTextOutcome =
  | { readonly text: string; readonly pages: number; readonly pagesWithText: number }
  | { readonly failure: Exclude<PdfFailureReason, 'not-a-pdf'>; readonly detail: string };

/**
 * Entry of the PDF threads (piscina calls the default export per task). pdf.js runs here and
 * never on the main thread: its legacy build, the one that runs on Node, installs core-js
 * polyfills on the globals of whatever thread loads it, and on Node 20 those replace
 * `Array.prototype.push` and `JSON.parse` with JavaScript versions and add `navigator`. In a
 * thread of its own they slow and confuse nobody else.
 */
export default async function extractPdfTextTask(task: PdfTextTask): Promise<PdfTextOutcome> {
  const parser = new PDFParse({ data: task.data });
  try {
    // No page markers: pages are joined here, so the text carries no "-- 1 of 3 --" lines.
    const result = await parser.getText({ pageJoiner: '' });
    // Pages without text (e.g. scans) add nothing.
    const pageTexts = result.pages.map((page) => page.text.trim()).filter((text) => text !== '');
    return {
      text: pageTexts.join('\n\n'),
      pages: result.pages.length,
      pagesWithText: pageTexts.length,
    };
  } catch (error) {
    if (error instanceof Error && error.name === 'PasswordException') {
      return { failure: 'encrypted', detail: error.message };
    }
    return {
      failure: 'unreadable',
      detail: error instanceof Error ? error.message : String(error),
    };
  } finally {
    await parser.destroy();
  }
}
