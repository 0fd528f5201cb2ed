import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { encodeMp3 } from '@tamp/scripts/fixtures/music';
import { generateSpeechFixture } from '@tamp/scripts/fixtures/speech';
import { describe, expect, it } from 'vitest';
import { uploadWork, useWorkerHarness } from '../../../test/support/worker-harness';
import { configSchema, workerAudioSettingsFrom } from '../src/config';
import { startWorkerAudioService } from '../src/service';

const worker = useWorkerHarness({
  name: 'audio-worker',
  concurrency: 1,
  start: ({ env, ...dependencies }) =>
    startWorkerAudioService({
      ...dependencies,
      settings: workerAudioSettingsFrom(
        configSchema.parse({ ...env, AUDIO_MAX_DURATION_SEC: '600' }),
      ),
    }),
});

describe('worker-audio', () => {
  it('runs a queued audio job into result.ogg with durations, loudness and usage', async () => {
    const { store, dir, publish, settled } = worker.harness;
    const wav = join(dir, 'tone.wav');
    await promisify(execFile)('ffmpeg', [
      '-v',
      'error',
      '-f',
      'lavfi',
      '-i',
      'sine=frequency=440:duration=3',
      '-ac',
      '1',
      wav,
    ]);
    const uploadKey = `uploads/acc_aud/${randomUUID()}`;
    await store.uploadFile(uploadKey, wav, 'audio/wav');
    const message = uploadWork({
      accountId: 'acc_aud',
      pipeline: 'audio',
      key: uploadKey,
      contentType: 'audio/wav',
      filename: 'tone.wav',
      operations: [
        { type: 'normalize', params: { targetLevel: -16, peakNormalize: false } },
        { type: 'encode', params: { format: 'opus', bitrate: 24, channels: 1 } },
      ],
    });
    await publish(message);
    const job = await settled(message.jobId);
    expect(job.failures).toEqual([]);
    const completion = job.completions[0]!;
    expect(completion.outputKey).toBe(`results/acc_aud/${message.jobId}/result.ogg`);
    expect((await store.stat(completion.outputKey!))?.contentType).toBe('audio/ogg');
    expect(completion.metrics.operationsApplied).toEqual(['normalize', 'encode']);
    expect(completion.metrics.durationInSec).toBeCloseTo(3, 1);
    expect(completion.metrics.durationOutSec).toBeCloseTo(3, 1);
    expect(completion.usage).toEqual({
      inputBytes: completion.metrics.inputSize,
      audioSeconds: expect.closeTo(3, 1),
    });
    console.log('audio job metrics', JSON.stringify(completion.metrics));
  });

  it('answers an auto job whose encoding is not smaller with the input MP3, flagged and charged', async () => {
    const { store, dir, publish, settled } = worker.harness;
    const speech = await generateSpeechFixture(dir, 'auto-speech');
    const mp3 = await encodeMp3(speech.wavPath, join(dir, 'auto-speech-8k.mp3'), {
      bitrateKbps: 8,
      sampleRate: 8_000,
    });
    const uploadKey = `uploads/acc_aud/${randomUUID()}`;
    await store.uploadFile(uploadKey, mp3, 'audio/mpeg');
    const message = uploadWork({
      accountId: 'acc_aud',
      pipeline: 'audio',
      key: uploadKey,
      contentType: 'audio/mpeg',
      filename: 'speech.mp3',
      operations: [{ type: 'encode', params: { format: 'auto', bitrate: 24, channels: 1 } }],
    });
    await publish(message);
    const job = await settled(message.jobId);
    expect(job.failures).toEqual([]);
    const completion = job.completions[0]!;
    expect(completion.outputKey).toBe(`results/acc_aud/${message.jobId}/result.mp3`);
    expect((await store.stat(completion.outputKey!))?.contentType).toBe('audio/mpeg');
    expect(completion.metrics).toMatchObject({
      keptInput: true,
      compressionRatio: 1,
      format: 'mp3',
      audioAuto: { class: 'speech', application: 'voip', bitrate: 24, channels: 1 },
    });
    expect(completion.metrics.outputSize).toBe(completion.metrics.inputSize);
    // Charged as any job: usage counts its input.
    expect(completion.usage).toMatchObject({ inputBytes: completion.metrics.inputSize });
  });
});
