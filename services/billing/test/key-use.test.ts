import { newId } from '@tamp/proto';
import { MongoClient } from 'mongodb';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { ApiKeyRepository } from '../src/adapters/api-key-repository';
import { KeyUseRecorder } from '../src/application/key-use';

// Nothing listens on port 1: every write fails once server selection gives up.
const unreachable = new MongoClient('mongodb://127.0.0.1:1', { serverSelectionTimeoutMS: 300 });

afterAll(async () => {
  await unreachable.close();
});

describe('recording the last use of API keys', () => {
  it('neither waits for nor fails on its write, warns instead, and retries on the next use', async () => {
    const warnings: unknown[] = [];
    const logger = pino(
      { level: 'warn' },
      { write: (line: string) => warnings.push(JSON.parse(line)) },
    );
    const now = new Date('2025-01-15T12:00:30Z');
    const recorder = new KeyUseRecorder(
      new ApiKeyRepository(unreachable.db('tamp')),
      () => now,
      logger,
    );
    const keyId = newId('apiKey');

    // Returns at once (no promise to wait for), the write still under way.
    expect(recorder.record(keyId)).toBeUndefined();
    expect(warnings).toEqual([]);

    await recorder.settle();
    expect(warnings).toEqual([
      expect.objectContaining({ keyId, msg: 'could not record the last use of an API key' }),
    ]);
    // The failed minute is not taken as written: the same minute's next use tries again.
    recorder.record(keyId);
    await recorder.settle();
    expect(warnings).toHaveLength(2);
  });
});
