import { isId } from '@tamp/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Harness } from './harness';

/**
 * A creation the job service never answered (it died or stalled mid-creation) may have left a
 * job behind; the 503 says so and names it (docs/decisions.md#when-a-creation-fails).
 */
const harness = new Harness();
let key: string;

beforeAll(async () => {
  await harness.start({ createJobBudgetMs: 1_000 });
  ({ apiKey: key } = harness.account());
});
afterAll(() => harness.stop());

describe('a creation without an answer', () => {
  it('is a 503 that names the job id it may exist under, with outcome unknown', async () => {
    const response = await harness.app.inject({
      method: 'POST',
      url: '/v1/audio',
      headers: { authorization: `Bearer ${key}`, 'idempotency-key': 'silent' },
      payload: { audioId: 'upl_x', preset: 'chill' },
    });
    expect(response.statusCode).toBe(503);
    expect(response.headers['retry-after']).toBeDefined();
    const { error } = response.json();
    const sent = harness.createJobRequests.at(-1)!;
    expect(error.code).toBe('UNAVAILABLE');
    expect(error.details).toEqual({ jobId: sent.jobId, outcome: 'unknown' });
    expect(isId('job', error.details.jobId)).toBe(true);
    expect(error.message).toContain(`GET /v1/jobs/${sent.jobId}`);
  });

  it('keeps the outcome the job service gave itself', async () => {
    const response = await harness.app.inject({
      method: 'POST',
      url: '/v1/audio',
      headers: { authorization: `Bearer ${key}`, 'idempotency-key': 'reused' },
      payload: { audioId: 'upl_x', preset: 'chill' },
    });
    expect(response.statusCode).toBe(422);
    expect(response.json().error.details).toBeUndefined();
  });
});

describe('a creation that reached no job service', () => {
  const away = new Harness();
  beforeAll(() => away.start({ createJobBudgetMs: 5_000, jobService: false }));
  afterAll(() => away.stop());

  it('is a 503 that names the job id as not created: nothing received it', async () => {
    const { apiKey } = away.account();
    const response = await away.app.inject({
      method: 'POST',
      url: '/v1/audio',
      headers: { authorization: `Bearer ${apiKey}` },
      payload: { audioId: 'upl_x', preset: 'chill' },
    });
    expect(response.statusCode).toBe(503);
    expect(response.headers['retry-after']).toBeDefined();
    const { error } = response.json();
    expect(error.code).toBe('UNAVAILABLE');
    expect(error.details.outcome).toBe('not-created');
    expect(isId('job', error.details.jobId)).toBe(true);
  });
});
