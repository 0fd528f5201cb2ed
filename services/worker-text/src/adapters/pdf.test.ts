import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPdf } from '@tamp/scripts/fixtures/pdf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PdfTextExtractionError } from '../domain/errors';
import { type PdfTextPool, startPdfTextPool } from './pdf';

// This thread's own built-ins, taken before anything of this file runs.
const NATIVE_PUSH = Array.prototype.push;
const NATIVE_JSON_PARSE = JSON.parse;

const PAGES = [
  ['Quarterly report (draft)', 'Revenue grew by 12 percent.'],
  ['Second page: costs', 'Costs fell by 3 percent.'],
  ['Third page: outlook', 'We expect steady growth.'],
];

let directory: string;
let pool: PdfTextPool;
const running = new AbortController().signal;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), 'tamp-pdf-'));
  pool = startPdfTextPool({ threads: 2 });
});

afterAll(async () => {
  await pool.close();
  await rm(directory, { recursive: true, force: true });
});

describe('the PDF text pool', () => {
  it('extracts the text of every page, in order, from a file path', async () => {
    const path = join(directory, 'report.pdf');
    await writeFile(path, buildPdf(PAGES));
    // One line per drawn line, pages separated by a blank line, no page markers.
    expect(await pool.extract(path, running)).toBe(
      PAGES.map((lines) => lines.join('\n')).join('\n\n'),
    );
  });

  it('leaves the built-ins of the calling thread alone', async () => {
    const path = join(directory, 'globals.pdf');
    await writeFile(path, buildPdf(PAGES));
    await pool.extract(path, running);
    // pdf.js' legacy build replaces these on the thread that loads it (Node 20).
    expect(Array.prototype.push).toBe(NATIVE_PUSH);
    expect(JSON.parse).toBe(NATIVE_JSON_PARSE);
    expect('__core-js_shared__' in globalThis).toBe(false);
    expect('pdfjsLib' in globalThis).toBe(false);
  });

  it('rejects a file that is not a PDF with a clear error', async () => {
    const path = join(directory, 'notes.pdf');
    await writeFile(path, 'just some text, renamed to .pdf\n');
    const failure = pool.extract(path, running);
    await expect(failure).rejects.toBeInstanceOf(PdfTextExtractionError);
    await expect(failure).rejects.toMatchObject({
      reason: 'not-a-pdf',
      message: 'notes.pdf is not a PDF file (no %PDF- header)',
    });
  });

  it('reports a password-protected PDF as encrypted', async () => {
    const path = join(directory, 'locked.pdf');
    await writeFile(path, buildPdf(PAGES, { passwordProtected: true }));
    const failure = pool.extract(path, running);
    await expect(failure).rejects.toBeInstanceOf(PdfTextExtractionError);
    await expect(failure).rejects.toMatchObject({
      reason: 'encrypted',
      message: 'locked.pdf is password-protected',
    });
  });

  it('reports a truncated PDF as unreadable', async () => {
    const path = join(directory, 'broken.pdf');
    await writeFile(path, buildPdf(PAGES).subarray(0, 60));
    const failure = pool.extract(path, running);
    await expect(failure).rejects.toBeInstanceOf(PdfTextExtractionError);
    await expect(failure).rejects.toMatchObject({
      reason: 'unreadable',
      message: expect.stringMatching(/^broken\.pdf is not a readable PDF: /),
    });
  });

  it('fails for a missing file', async () => {
    await expect(pool.extract(join(directory, 'missing.pdf'), running)).rejects.toMatchObject({
      code: 'ENOENT',
    });
  });

  it('stops an extraction whose signal aborts', async () => {
    const path = join(directory, 'aborted.pdf');
    await writeFile(path, buildPdf(PAGES));
    await expect(pool.extract(path, AbortSignal.abort())).rejects.toMatchObject({
      name: 'AbortError',
    });
  });
});
