import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { op, SPEC_PRESET_CHAINS } from '@tamp/scripts/fixtures/audio-operations';
import {
  generateSpeechFixture,
  PODCAST_SPEECH,
  type SpeechFixture,
} from '@tamp/scripts/fixtures/speech';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFfmpegRunner } from './ffmpeg-runner';

/** Output formats, bitrates and channel counts, and every spec preset end to end. */

const runner = createFfmpegRunner();
let dir: string;
/** ~28 s of speech: long enough that container overhead does not skew bitrates. */
let speech: SpeechFixture;
/** Stereo, 48 kHz, with pauses, also as MP3: the shape of a real podcast upload. */
let podcast: SpeechFixture;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tamp-audio-encode-'));
  [speech, podcast] = await Promise.all([
    generateSpeechFixture(dir, 'speech'),
    generateSpeechFixture(dir, 'podcast', PODCAST_SPEECH),
  ]);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('Opus bitrate', () => {
  it.each([16, 24, 64])('%d kbit/s lands within 25 percent of the target', async (kbps) => {
    expect(speech.durationSec).toBeGreaterThanOrEqual(20);
    const outputPath = join(dir, `bitrate-${kbps}.ogg`);
    const result = await runner.processAudio({
      inputPath: speech.wavPath,
      outputPath,
      operations: [op.encode('opus', kbps, 1)],
      workDir: join(dir, 'work'),
      measureOutputLoudness: false,
    });
    const measuredKbps = (result.outputSize * 8) / result.durationOutSec / 1000;
    expect(Math.abs(measuredKbps - kbps) / kbps).toBeLessThanOrEqual(0.25);
    const probe = await runner.probeAudio(outputPath);
    expect(probe).toMatchObject({ codec: 'opus', sampleRate: 48_000, formatName: 'ogg' });
  });
});

describe('channels and formats', () => {
  it.each([
    [1, () => podcast],
    [2, () => speech],
  ])('writes %d channel(s) as asked, whatever the input has', async (channels, input) => {
    const outputPath = join(dir, `channels-${channels}.ogg`);
    await runner.processAudio({
      inputPath: input().wavPath,
      outputPath,
      operations: [op.encode('opus', 32, channels)],
      workDir: join(dir, 'work'),
      measureOutputLoudness: false,
    });
    const probe = await runner.probeAudio(outputPath);
    expect(probe.channels).toBe(channels);
    expect(input().wavPath && (await runner.probeAudio(input().wavPath)).channels).not.toBe(
      channels,
    );
  });

  it('writes MP3 when asked, from an MP3 input', async () => {
    const outputPath = join(dir, 'out.mp3');
    const result = await runner.processAudio({
      inputPath: podcast.mp3Path!,
      outputPath,
      operations: [op.normalize(-16), op.encode('mp3', 64, 2)],
      workDir: join(dir, 'work'),
    });
    expect(result).toMatchObject({ format: 'mp3', extension: 'mp3' });
    const probe = await runner.probeAudio(outputPath);
    expect(probe).toMatchObject({ codec: 'mp3', formatName: 'mp3', channels: 2 });
    expect(Math.abs(result.durationOutSec - result.durationInSec)).toBeLessThan(0.2);
  });
});

describe('spec presets', () => {
  it.each(Object.entries(SPEC_PRESET_CHAINS))(
    '%s runs end to end and produces a valid, smaller Opus file',
    async (name, chain) => {
      const outputPath = join(dir, `preset-${name}.ogg`);
      const progress: number[] = [];
      const result = await runner.processAudio({
        inputPath: podcast.wavPath,
        outputPath,
        operations: chain,
        workDir: join(dir, 'work'),
        onProgress: (report) => progress.push(report.pass),
      });
      const probe = await runner.probeAudio(outputPath);
      expect(probe).toMatchObject({ codec: 'opus', formatName: 'ogg', channels: 1 });
      expect(probe.durationSec).toBeCloseTo(result.durationOutSec, 5);
      // Every preset trims silence: the 3 × 2 s pauses must be gone.
      const speedup = chain.find((o) => o.type === 'speedup');
      const rate = speedup?.type === 'speedup' ? speedup.params.rate : 1;
      expect(result.durationOutSec).toBeLessThan((podcast.durationSec - 4.8) / rate);
      expect(result.outputSize).toBeLessThan(result.inputSize / 20);
      expect(result.integratedLufsOut).toBeDefined();
      // The preset's loudness target holds at the output, compression included (make-up
      // gain). Speech cannot reach -10 LUFS with peaks held under the -1.5 dBFS ceiling, so the
      // aggressive preset is bounded by the limiter (README: "Very loud targets").
      const target = chain.findLast((o) => o.type === 'normalize');
      if (target?.type === 'normalize') {
        const measured = await runner.measureLoudness(outputPath);
        const level = target.params.targetLevel;
        const shortfallAllowed = level > -12 ? 2.5 : 1.5;
        expect(measured?.integratedLufs).toBeGreaterThan(level - shortfallAllowed);
        expect(measured?.integratedLufs).toBeLessThan(level + 1.5);
      }
      expect(result.operationsApplied).toEqual(chain.map((o) => o.type));
      expect(new Set(progress).size).toBe(result.passes);
    },
  );
});
