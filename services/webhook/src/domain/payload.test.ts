import type { JobEvent } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { buildPayload, deliveryKey, serializePayload, webhookIdFor } from './payload';

const completed: JobEvent = {
  event: 'job.completed',
  jobId: 'job_01JD6ABCDEFGHJKMNPQRSTVWXY',
  accountId: 'acct_01JD6ABCDEFGHJKMNPQRSTVWXY',
  pipeline: 'text',
  status: 'completed',
  inline: false,
  webhookUrl: 'https://hooks.example.com/tamp',
  result: {
    outputKey: 'results/acct/job/result.txt',
    metrics: {
      inputSize: 1000,
      outputSize: 250,
      compressionRatio: 4,
      operationsApplied: ['trim'],
      processingMs: 3,
      tokensBefore: 400,
    },
  },
  error: null,
  usage: { inputBytes: 1000, characters: 990 },
  createdAt: '2026-11-21T12:00:00.000Z',
  completedAt: '2026-11-21T12:00:01.000Z',
};

describe('webhook payload', () => {
  it('carries exactly the spec fields, in order, with only the three public metrics', () => {
    expect(serializePayload(buildPayload(completed))).toBe(
      '{"event":"job.completed","job":{"id":"job_01JD6ABCDEFGHJKMNPQRSTVWXY","type":"text",' +
        '"status":"completed","result":{"outputKey":"results/acct/job/result.txt","metrics":' +
        '{"inputSize":1000,"outputSize":250,"compressionRatio":4}},"error":null,' +
        '"createdAt":"2026-11-21T12:00:00.000Z","completedAt":"2026-11-21T12:00:01.000Z"}}',
    );
  });

  it('sends result null and the error for a failed job', () => {
    const failed = buildPayload({
      ...completed,
      event: 'job.failed',
      status: 'failed',
      result: null,
      error: 'the PDF is encrypted',
    });
    expect(failed.job.result).toBeNull();
    expect(failed.job.error).toBe('the PDF is encrypted');
    expect(failed.event).toBe('job.failed');
  });

  it('keys one sequence per job event and gives it a stable, header-safe webhook-id', () => {
    expect(deliveryKey(completed.jobId, 'job.failed')).toBe(`${completed.jobId}:job.failed`);
    expect(webhookIdFor(completed.jobId, 'job.completed')).toBe(
      `msg_${completed.jobId}_job.completed`,
    );
    const odd = webhookIdFor('job with spaces\r\n', 'job.completed');
    expect(odd).toMatch(/^msg_[A-Za-z0-9_-]{32}$/);
    expect(webhookIdFor('job with spaces\r\n', 'job.completed')).toBe(odd);
    expect(webhookIdFor('job with spaces\r\n', 'job.failed')).not.toBe(odd);
  });
});
