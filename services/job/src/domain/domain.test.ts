import { type CreateJobRequest, imageInputFitsInline, MB, newId } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { retryDelayMs } from './backoff';
import { routeOf } from './creation-route';
import { decodeCursor, encodeCursor } from './cursor';
import type { JobDocument } from './job';
import { outputToResolve, publicJobOf, publicJobSummaryOf } from './representation';
import { decideBegin, decideFailure } from './transitions';

describe('backoff', () => {
  it('doubles the delay per failed attempt from the base', () => {
    expect([1, 2, 3].map((attempt) => retryDelayMs(2000, attempt))).toEqual([2000, 4000, 8000]);
  });
});

describe('begin decisions', () => {
  const begin = (status: JobDocument['status'], attempts: number, attempt: number) =>
    decideBegin({ status, attempts }, attempt, 4);

  it('starts the next attempt of a created or pending job', () => {
    expect(begin('created', 0, 1)).toEqual({ kind: 'start', attempt: 1 });
    expect(begin('pending', 2, 3)).toEqual({ kind: 'start', attempt: 3 });
    // A stale delivery number never moves the count backwards.
    expect(begin('pending', 2, 1)).toEqual({ kind: 'start', attempt: 3 });
  });

  it('counts a lost attempt of a processing job', () => {
    expect(begin('processing', 1, 1)).toEqual({ kind: 'resume' });
    // An older delivery than the running attempt's: left alone, never acknowledged.
    expect(begin('processing', 2, 1)).toEqual({ kind: 'superseded' });
    expect(begin('processing', 1, 2)).toEqual({ kind: 'start', attempt: 2 });
    expect(begin('processing', 4, 5)).toMatchObject({ kind: 'fail', attempt: 4 });
    expect(begin('pending', 3, 5)).toMatchObject({ kind: 'fail', attempt: 4 });
  });

  it('skips terminal jobs', () => {
    expect(begin('completed', 1, 2)).toEqual({ kind: 'skip' });
    expect(begin('failed', 4, 5)).toEqual({ kind: 'skip' });
  });
});

describe('failure decisions', () => {
  const now = new Date('2030-01-01T00:00:00Z');
  /** The top of the jitter band: the nominal backoff itself. */
  const options = { maxAttempts: 4, retryBaseMs: 2000, now, random: () => 0.999_999 };
  const job = (status: JobDocument['status'], attempts: number, retryAt: Date | null = null) => ({
    status,
    attempts,
    retryAt,
  });

  it('retries with backoff until the 4th attempt, then fails', () => {
    expect(decideFailure(job('processing', 1), 1, false, options)).toEqual({
      kind: 'retry',
      attempt: 1,
      delayMs: 2000,
    });
    expect(decideFailure(job('processing', 3), 3, false, options)).toEqual({
      kind: 'retry',
      attempt: 3,
      delayMs: 8000,
    });
    expect(decideFailure(job('processing', 4), 4, false, options)).toEqual({
      kind: 'fail',
      attempt: 4,
    });
    expect(decideFailure(job('processing', 1), 1, true, options)).toEqual({
      kind: 'fail',
      attempt: 1,
    });
  });

  it('jitters the backoff between half of it and all of it, from the random source it is given', () => {
    const retryIn = (attempt: number, random: () => number) => {
      const decision = decideFailure(job('processing', attempt), attempt, false, {
        ...options,
        random,
      });
      return decision.kind === 'retry' ? decision.delayMs : undefined;
    };
    expect([1, 2, 3].map((attempt) => retryIn(attempt, () => 0))).toEqual([1000, 2000, 4000]);
    expect([1, 2, 3].map((attempt) => retryIn(attempt, () => 0.5))).toEqual([1500, 3000, 6000]);
    const delays = new Set(Array.from({ length: 200 }, () => retryIn(3, Math.random)));
    expect(delays.size).toBeGreaterThan(1);
    for (const delay of delays) {
      expect(delay).toBeGreaterThanOrEqual(4000);
      expect(delay).toBeLessThanOrEqual(8000);
    }
  });

  it('treats a repeated report as recorded and terminal jobs as final', () => {
    const retryAt = new Date(now.getTime() + 1500);
    expect(decideFailure(job('pending', 2, retryAt), 2, false, options)).toEqual({
      kind: 'recorded',
      retryInMs: 1500,
    });
    expect(decideFailure(job('completed', 2), 2, false, options)).toEqual({ kind: 'ignore' });
  });
});

describe('cursor', () => {
  const scope = { accountId: 'acct_1', type: undefined, status: undefined };
  const id = newId('job');

  it('round-trips and is bound to its scope and secret', () => {
    const cursor = encodeCursor('secret-secret-secret', scope, id);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor('secret-secret-secret', scope, cursor)).toBe(id);
    expect(() => decodeCursor('another-secret-value', scope, cursor)).toThrow(/cursor/);
    expect(() =>
      decodeCursor('secret-secret-secret', { ...scope, status: 'failed' }, cursor),
    ).toThrow(/cursor/);
    expect(() => decodeCursor('secret-secret-secret', scope, '')).toThrow(/cursor/);
  });
});

describe('routing', () => {
  const base = {
    jobId: newId('job'),
    accountId: 'acct_1',
    webhookUrl: null,
    idempotencyKey: null,
    requestHash: 'h',
    maxUploadBytes: 25 * MB,
  };
  const text = (text: string, webhookUrl: string | null = null) =>
    ({
      ...base,
      webhookUrl,
      pipeline: 'text',
      operations: [],
      source: { kind: 'text', text },
    }) as CreateJobRequest;

  it('sends fast-path text inline, and queues everything the spec queues', () => {
    expect(routeOf(text('a'.repeat(50 * 1024)))).toBe('inline');
    // 50 KB is measured in UTF-8 bytes: 25,601 two-byte characters exceed it.
    expect(routeOf(text('é'.repeat(25_601)))).toBe('queued');
    expect(routeOf(text('a', 'https://example.com'))).toBe('queued');
    const upload = { kind: 'upload', uploadId: 'upl_x' } as const;
    expect(
      routeOf({ ...base, pipeline: 'text', operations: [], source: upload } as CreateJobRequest),
    ).toBe('queued');
    expect(
      routeOf({ ...base, pipeline: 'audio', operations: [], source: upload } as CreateJobRequest),
    ).toBe('queued');
    const image = (format: string, accept?: string[]) =>
      ({
        ...base,
        pipeline: 'image',
        source: upload,
        operations: [{ type: 'encode', params: { format, quality: 80, effort: 4, accept } }],
      }) as CreateJobRequest;
    expect(routeOf(image('avif'))).toBe('queued');
    expect(routeOf(image('webp'))).toBe('by-input-size');
    // auto may choose AVIF unless its accept list leaves AVIF out.
    expect(routeOf(image('auto'))).toBe('queued');
    expect(routeOf(image('auto', ['webp', 'avif']))).toBe('queued');
    expect(routeOf(image('auto', ['webp', 'jpeg']))).toBe('by-input-size');
    expect(imageInputFitsInline(5 * MB)).toBe(true);
    expect(imageInputFitsInline(5 * MB + 1)).toBe(false);
  });
});

describe('public representation', () => {
  const job: JobDocument = {
    _id: 'job_1',
    accountId: 'acct_1',
    pipeline: 'image',
    status: 'completed',
    operations: [],
    input: {
      kind: 'upload',
      uploadId: 'upl_1',
      key: 'uploads/a/u',
      size: 10,
      contentType: 'image/png',
      filename: 'cat.png',
    },
    filename: 'cat.png',
    webhookUrl: null,
    inline: false,
    attempts: 1,
    lastError: 'earlier failure',
    createdAt: new Date('2030-01-01T00:00:00Z'),
    updatedAt: new Date('2030-01-01T00:00:05Z'),
    completedAt: new Date('2030-01-01T00:00:05Z'),
    retryAt: null,
    result: {
      outputKey: 'results/acct_1/job_1/result.webp',
      outputText: null,
      metrics: {
        inputSize: 10,
        outputSize: 5,
        compressionRatio: 2,
        operationsApplied: ['encode'],
        processingMs: 1,
      },
      expired: false,
    },
    error: null,
    usage: { inputBytes: 10 },
    eventPublished: true,
    refundPending: false,
  };

  it('downloads file outputs as result.<ext>; expired results keep only metrics', () => {
    expect(outputToResolve(job)).toEqual({
      kind: 'download',
      key: 'results/acct_1/job_1/result.webp',
      filename: 'result.webp',
    });
    expect(publicJobOf(job, { outputUrl: 'https://s3/x' })).toEqual({
      id: 'job_1',
      status: 'completed',
      result: { outputUrl: 'https://s3/x', metrics: job.result?.metrics },
    });
    const expired = { ...job, result: { ...job.result!, expired: true } };
    expect(outputToResolve(expired)).toEqual({ kind: 'none' });
    expect(publicJobOf(expired)).toEqual({
      id: 'job_1',
      status: 'completed',
      result: { expired: true, metrics: job.result?.metrics },
    });
  });

  it('shows no error or result on jobs still running', () => {
    expect(publicJobOf({ ...job, status: 'pending', result: null })).toEqual({
      id: 'job_1',
      status: 'pending',
    });
  });

  it('summarizes with name, size metrics and timestamps only', () => {
    expect(publicJobSummaryOf(job)).toEqual({
      id: 'job_1',
      type: 'image',
      status: 'completed',
      name: 'cat.png',
      metrics: { inputSize: 10, outputSize: 5, compressionRatio: 2 },
      createdAt: '2030-01-01T00:00:00.000Z',
      completedAt: '2030-01-01T00:00:05.000Z',
    });
  });
});
