export type PdfFailureReason = 'not-a-pdf' | 'encrypted' | 'unreadable';

/** Why a file's text could not be extracted; `message` is fit to show as a job error. */
export class PdfTextExtractionError extends Error {
  override readonly name = 'PdfTextExtractionError';

  constructor(
    message: string,
    readonly reason: PdfFailureReason,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
