import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { inSpan } from '@tamp/kit';
import { PDFParse } from 'pdf-parse';
import { PdfTextExtractionError } from '../domain/errors';

const PDF_SIGNATURE = Buffer.from('%PDF-');
/** Readers accept the signature anywhere in the first kilobyte (after junk some tools prepend). */
const SIGNATURE_WINDOW = 1024;

function hasPdfSignature(bytes: Buffer): boolean {
  return bytes.subarray(0, SIGNATURE_WINDOW).includes(PDF_SIGNATURE);
}

/**
 * Extracts the text of every page that has text, pages separated by a blank line. Its span
 * tells the document's shape: bytes, pages, pages with text, length of the text.
 */
export function extractPdfText(filePath: string): Promise<string> {
  return inSpan('pdf extract text', {}, async (span) => {
    const extracted = await extractText(filePath, (shape) => span.setAttributes(shape));
    span.setAttribute('text.length_out', extracted.length);
    return extracted;
  });
}

async function extractText(
  filePath: string,
  describe: (shape: Record<string, number>) => void,
): Promise<string> {
  const bytes = await readFile(filePath);
  describe({ 'pdf.bytes': bytes.length });
  const name = basename(filePath);
  if (!hasPdfSignature(bytes)) {
    throw new PdfTextExtractionError(`${name} is not a PDF file (no %PDF- header)`, 'not-a-pdf');
  }
  const parser = new PDFParse({
    data: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length),
  });
  try {
    // No page markers: pages are joined here, so the text carries no "-- 1 of 3 --" lines.
    const result = await parser.getText({ pageJoiner: '' });
    // Pages without text (e.g. scans) add nothing.
    const pageTexts = result.pages.map((page) => page.text.trim()).filter((text) => text !== '');
    describe({ 'pdf.pages': result.pages.length, 'pdf.pages_with_text': pageTexts.length });
    return pageTexts.join('\n\n');
  } catch (error) {
    if (error instanceof Error && error.name === 'PasswordException') {
      throw new PdfTextExtractionError(`${name} is password-protected`, 'encrypted', {
        cause: error,
      });
    }
    const detail = error instanceof Error ? error.message : String(error);
    throw new PdfTextExtractionError(`${name} is not a readable PDF: ${detail}`, 'unreadable', {
      cause: error,
    });
  } finally {
    await parser.destroy();
  }
}
