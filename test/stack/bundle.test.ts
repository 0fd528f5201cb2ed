import { existsSync } from 'node:fs';
import { bundledServiceEntry } from '@tamp/scripts/build/bundle';
import { photo, speechWav } from '@tamp/scripts/fixtures/media';
import { SERVICE_NAMES } from '@tamp/scripts/stack/services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  finishedJob,
  startTestStack,
  type TestAccount,
  type TestStack,
  uploadFile,
} from '../support/stack';

interface JobBody {
  id: string;
  status: string;
  error?: string;
  result?: { outputText?: string; outputUrl?: string };
}

/**
 * The artifact a container runs: every service bundled by scripts/build/bundle.ts and started
 * with plain node (no tsx). A pipeline per worker proves the bundles load what they resolve at
 * run time: sharp's native addon, ffmpeg, and worker-text's thread entry beside its bundle.
 */
describe('the bundled services', () => {
  let stack: TestStack;
  let account: TestAccount;

  beforeAll(async () => {
    stack = await startTestStack({ runtime: 'bundle' });
    account = await stack.createAccount({ plan: 'pro' });
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  });

  const finished = (id: string) => finishedJob<JobBody>(stack, account.apiKey, id);

  it('builds one module per service', () => {
    for (const name of SERVICE_NAMES) expect(existsSync(bundledServiceEntry(name))).toBe(true);
  });

  it('answers inline text from the pipeline thread pool', async () => {
    const response = await stack.api<JobBody>('POST', '/v1/text', {
      token: account.apiKey,
      body: { text: 'Hello    world,\n\n\n\nthis   is   Tamp.', preset: 'aggressive' },
    });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body.data?.status).toBe('completed');
    expect(response.body.data?.result?.outputText).toMatch(/Hello world/);
  });

  it('runs an image and an audio job', async () => {
    const imageId = await uploadFile(stack, account.apiKey, 'photo.jpg', await photo(640, 480));
    const image = await stack.api<JobBody>('POST', '/v1/image', {
      token: account.apiKey,
      body: { imageId, preset: 'thumbnail' },
    });
    expect([200, 202]).toContain(image.status);
    const imageJob = await finished(image.body.data!.id);
    expect(imageJob.status, imageJob.error).toBe('completed');

    const audioId = await uploadFile(stack, account.apiKey, 'speech.wav', await speechWav());
    const audio = await stack.api<JobBody>('POST', '/v1/audio', {
      token: account.apiKey,
      body: { audioId, preset: 'podcast' },
    });
    expect(audio.status).toBe(202);
    const audioJob = await finished(audio.body.data!.id);
    expect(audioJob.status, audioJob.error).toBe('completed');
  }, 120_000);
});
