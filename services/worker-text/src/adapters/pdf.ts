import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { PDFParse } from 'pdf-parse';
import { PdfTextExtractionError } from '../domain/errors';

const PDF_SIGNATURE = Buffer.from('%PDF-');
/** Readers accept the signature anywhere in the first kilobyte (after junk some tools prepend). */
const SIGNATURE_WINDOW = 1024;

function hasPdfSignature(bytes: Buffer): boolean {
  return bytes.subarray(0, SIGNATURE_WINDOW).includes(PDF_SIGNATURE);
}

/** Extracts the text of every page that has text, pages separated by a blank line. */
export async function extractPdfText(filePath: string): Promise<string> {
  const bytes = await readFile(filePath);
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
    return result.pages
      .map((page) => page.text.trim())
      .filter((text) => text !== '') // pages without text (e.g. scans) add nothing
      .join('\n\n');
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
