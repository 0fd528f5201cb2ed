import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPdf } from '@tamp/scripts/fixtures/pdf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PdfTextExtractionError } from '../domain/errors';
import { extractPdfText } from './pdf';

const PAGES = [
  ['Quarterly report (draft)', 'Revenue grew by 12 percent.'],
  ['Second page: costs', 'Costs fell by 3 percent.'],
  ['Third page: outlook', 'We expect steady growth.'],
];

let directory: string;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), 'tamp-pdf-'));
});

afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

describe('extractPdfText', () => {
  it('extracts the text of every page, in order, from a file path', async () => {
    const path = join(directory, 'report.pdf');
    await writeFile(path, buildPdf(PAGES));
    // One line per drawn line, pages separated by a blank line, no page markers.
    expect(await extractPdfText(path)).toBe(PAGES.map((lines) => lines.join('\n')).join('\n\n'));
  });

  it('rejects a file that is not a PDF with a clear error', async () => {
    const path = join(directory, 'notes.pdf');
    await writeFile(path, 'just some text, renamed to .pdf\n');
    const failure = extractPdfText(path);
    await expect(failure).rejects.toBeInstanceOf(PdfTextExtractionError);
    await expect(failure).rejects.toMatchObject({
      reason: 'not-a-pdf',
      message: 'notes.pdf is not a PDF file (no %PDF- header)',
    });
  });

  it('reports a truncated PDF as unreadable', async () => {
    const path = join(directory, 'broken.pdf');
    await writeFile(path, buildPdf(PAGES).subarray(0, 60));
    await expect(extractPdfText(path)).rejects.toMatchObject({ reason: 'unreadable' });
  });

  it('fails for a missing file', async () => {
    await expect(extractPdfText(join(directory, 'missing.pdf'))).rejects.toMatchObject({
      code: 'ENOENT',
    });
  });
});
