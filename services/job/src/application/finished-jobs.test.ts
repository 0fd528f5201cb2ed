import { describe, expect, it } from 'vitest';
import type { JobDocument } from '../domain/job';
import { FinishedJobs } from './finished-jobs';

const now = Date.now();

function completedTextJob(id: number, outputText: string): JobDocument {
  const at = new Date(now);
  return {
    _id: `job_${String(id).padStart(6, '0')}`,
    accountId: 'acct_1',
    pipeline: 'text',
    status: 'completed',
    operations: [],
    preset: null,
    input: { kind: 'text', text: 'short input' },
    filename: null,
    webhookUrl: null,
    inline: false,
    attempts: 1,
    lastError: null,
    createdAt: at,
    updatedAt: at,
    completedAt: at,
    retryAt: null,
    result: {
      outputKey: null,
      outputText,
      metrics: {
        inputSize: 11,
        outputSize: outputText.length,
        compressionRatio: 1,
        operationsApplied: ['trim'],
        processingMs: 1,
      },
      expired: false,
    },
    error: null,
    usage: null,
    eventPublished: true,
    refundPending: false,
  };
}

describe('FinishedJobs', () => {
  it('remembers as many small jobs as it counts', () => {
    const finished = new FinishedJobs();
    for (let id = 0; id < 10_000; id++) finished.remember(completedTextJob(id, 'out'), now);
    expect(finished.find('acct_1', completedTextJob(0, 'out')._id)).toBeDefined();
    expect(finished.find('acct_2', completedTextJob(0, 'out')._id)).toBeUndefined();
  });

  it('holds large texts within its byte budget, giving up the oldest first', () => {
    const finished = new FinishedJobs();
    // 400 outputs of 256 KB in characters: about 200 MB if all were kept.
    const large = 'x'.repeat(256 * 1024);
    for (let id = 0; id < 400; id++) finished.remember(completedTextJob(id, large), now);
    expect(finished.find('acct_1', completedTextJob(399, large)._id)).toBeDefined();
    expect(finished.find('acct_1', completedTextJob(0, large)._id)).toBeUndefined();
    const kept = Array.from({ length: 400 }, (_, id) =>
      finished.find('acct_1', completedTextJob(id, large)._id),
    ).filter((job) => job !== undefined).length;
    expect(kept).toBeGreaterThan(50);
    expect(kept * 2 * large.length).toBeLessThanOrEqual(64 * 1024 * 1024);
  });
});
