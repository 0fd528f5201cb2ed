import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { op } from '@tamp/scripts/fixtures/audio-operations';
import { generateSpeechFixture, type SpeechFixture } from '@tamp/scripts/fixtures/speech';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AudioTooLongError,
  InvalidAudioInputError,
  ProcessingAbortedError,
  ToolNotFoundError,
} from '../domain/errors';
import { createFfmpegRunner } from './ffmpeg-runner';

/** Inputs and situations that must fail, and fail with an error the job runner can use. */

const runner = createFfmpegRunner();
let dir: string;
let speech: SpeechFixture;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tamp-audio-fail-'));
  speech = await generateSpeechFixture(dir, 'speech', {
    sentences: ['A short sentence for the failure tests.', 'And a second one.'],
  });
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const chain = [op.trimSilence(), op.normalize(-16), op.encode()];

function request(inputPath: string, name: string) {
  return {
    inputPath,
    outputPath: join(dir, `${name}.ogg`),
    operations: chain,
    workDir: join(dir, `work-${name}`),
  };
}

describe('probeAudio', () => {
  it('describes a WAV input', async () => {
    const probe = await runner.probeAudio(speech.wavPath);
    expect(probe).toMatchObject({ sampleRate: 44_100, channels: 1, codec: 'pcm_s16le' });
    expect(probe.durationSec).toBeCloseTo(speech.durationSec, 3);
    expect(probe.bitRate).toBe(705_600);
  });
});

describe('processAudio failures', () => {
  it('rejects random bytes as invalid audio, permanently', async () => {
    const corrupt = join(dir, 'corrupt.wav');
    await writeFile(corrupt, randomBytes(64 * 1024));
    const error = await runner.processAudio(request(corrupt, 'corrupt')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidAudioInputError);
    expect((error as InvalidAudioInputError).permanent).toBe(true);
    expect((error as Error).message).toMatch(/not a readable audio file/);
  });

  it('rejects a WAV header followed by garbage in the format chunk', async () => {
    const header = Buffer.from('RIFF\x24\x00\x01\x00WAVEfmt \x10\x00\x00\x00', 'latin1');
    const broken = join(dir, 'broken.wav');
    await writeFile(broken, Buffer.concat([header, Buffer.alloc(16, 0xff), randomBytes(4096)]));
    await expect(runner.processAudio(request(broken, 'broken'))).rejects.toBeInstanceOf(
      InvalidAudioInputError,
    );
  });

  it('refuses containers other than WAV and MP3 even when ffmpeg could read them', async () => {
    const ogg = join(dir, 'already.ogg');
    await runner.processAudio({ ...request(speech.wavPath, 'source'), outputPath: ogg });
    const error = await runner.processAudio(request(ogg, 'ogg-input')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidAudioInputError);
    expect((error as Error).message).toMatch(/not WAV or MP3/);
  });

  it('rejects an input longer than maxDurationSec before processing it', async () => {
    const strict = createFfmpegRunner({ maxDurationSec: 2 });
    const name = 'too-long';
    const error = await strict.processAudio(request(speech.wavPath, name)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AudioTooLongError);
    expect((error as AudioTooLongError).durationSec).toBeCloseTo(speech.durationSec, 3);
    await expect(readdir(join(dir, `work-${name}`))).rejects.toThrow(/ENOENT/);
  });

  it('accepts the same input under a generous limit', async () => {
    const result = await runner.processAudio({
      ...request(speech.wavPath, 'within-limit'),
      maxDurationSec: 60,
    });
    expect(result.durationOutSec).toBeGreaterThan(1);
  });

  it('stops on abort and leaves neither output nor scratch files behind', async () => {
    const controller = new AbortController();
    const name = 'aborted';
    const run = runner.processAudio({
      ...request(speech.wavPath, name),
      signal: controller.signal,
      onProgress: () => controller.abort(),
    });
    await expect(run).rejects.toBeInstanceOf(ProcessingAbortedError);
    expect(await readdir(join(dir, `work-${name}`))).toEqual([]);
    await expect(readdir(join(dir, `${name}.ogg`))).rejects.toThrow(/ENOENT/);
  });

  it('names a missing ffmpeg binary', async () => {
    const broken = createFfmpegRunner({ ffprobePath: '/nonexistent/ffprobe' });
    await expect(broken.processAudio(request(speech.wavPath, 'no-tool'))).rejects.toBeInstanceOf(
      ToolNotFoundError,
    );
  });
});
