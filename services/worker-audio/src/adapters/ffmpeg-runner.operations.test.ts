import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AudioOperation } from '@tamp/proto';
import { op } from '@tamp/scripts/fixtures/audio-operations';
import {
  DEFAULT_SENTENCES,
  generateSpeechFixture,
  type SpeechFixture,
} from '@tamp/scripts/fixtures/speech';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFfmpegRunner } from './ffmpeg-runner';

/** Each processing operation, measured on real speech with real ffmpeg. */

const runner = createFfmpegRunner();
const FOUR_SENTENCES = DEFAULT_SENTENCES.slice(0, 4);
let dir: string;
let speech: SpeechFixture;
let quietSpeech: SpeechFixture;
let pausedSpeech: SpeechFixture;
let dynamicSpeech: SpeechFixture;
let outputs = 0;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tamp-audio-ops-'));
  [speech, quietSpeech, pausedSpeech, dynamicSpeech] = await Promise.all([
    generateSpeechFixture(dir, 'speech', { sentences: FOUR_SENTENCES }),
    generateSpeechFixture(dir, 'quiet', {
      sentences: FOUR_SENTENCES,
      sentenceGainsDb: [-14],
      sampleRate: 48_000,
    }),
    // 4 sentences with 3 × 2 s of near-silent room noise between them.
    generateSpeechFixture(dir, 'paused', {
      sentences: [
        'The first sentence starts the recording.',
        'After a long pause, the second one follows.',
        'Then another pause, and a third sentence.',
        'The last sentence ends it.',
      ],
      pauseSec: 2,
      pauseNoiseDb: -66,
    }),
    // Alternating loud and quiet sentences: a wide loudness range.
    generateSpeechFixture(dir, 'dynamic', { sentences: FOUR_SENTENCES, sentenceGainsDb: [0, -24] }),
  ]);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function run(input: SpeechFixture, operations: AudioOperation[]) {
  outputs += 1;
  const outputPath = join(dir, `out-${outputs}`);
  const result = await runner.processAudio({
    inputPath: input.wavPath,
    outputPath,
    operations,
    workDir: join(dir, 'work'),
  });
  return { ...result, outputPath };
}

describe('speedup', () => {
  it.each([1.5, 4])('rate %d shortens the duration by the rate within 3 percent', async (rate) => {
    const result = await run(speech, [op.speedup(rate), op.encode('opus', 32)]);
    const expected = result.durationInSec / rate;
    expect(Math.abs(result.durationOutSec - expected) / expected).toBeLessThan(0.03);
  });
});

describe('normalize', () => {
  it.each([
    ['normal', () => speech],
    ['quiet (-14 dB)', () => quietSpeech],
  ])('brings %s speech to -16 LUFS within 1.5 LU', async (_, input) => {
    const before = await runner.measureLoudness(input().wavPath);
    const result = await run(input(), [op.normalize(-16), op.encode('opus', 24)]);
    const after = await runner.measureLoudness(result.outputPath);
    expect(Math.abs(after.integratedLufs! - -16)).toBeLessThanOrEqual(1.5);
    // The fixture must actually need normalising, or the test proves nothing.
    expect(Math.abs(before.integratedLufs! - -16)).toBeGreaterThan(2);
    expect(result.integratedLufsOut).toBeCloseTo(after.integratedLufs!, 5);
  });

  it('keeps peaks near the ceiling when the gain would otherwise clip', async () => {
    const result = await run(speech, [op.normalize(-12), op.encode('mp3', 128)]);
    const peak = await runner.measureSamplePeakDb(result.outputPath);
    // Without the limiter the peak would sit ~8 dB over full scale (clipped at 0).
    expect(peak).toBeLessThan(-0.5);
  });

  it('peak-normalises to the requested sample peak within 1 dB', async () => {
    const before = await runner.measureSamplePeakDb(quietSpeech.wavPath);
    const result = await run(quietSpeech, [op.normalize(-3, true), op.encode('opus', 64)]);
    const after = await runner.measureSamplePeakDb(result.outputPath);
    expect(before).toBeLessThan(-10);
    expect(Math.abs(after! - -3)).toBeLessThanOrEqual(1);
  });
});

describe('trim-silence', () => {
  it('removes at least 80 % of inserted pauses and keeps the speech', async () => {
    const result = await run(pausedSpeech, [op.trimSilence(0.5, 500), op.encode('opus', 32)]);
    const removed = result.durationInSec - result.durationOutSec;
    expect(pausedSpeech.insertedSilenceSec).toBe(6);
    expect(removed).toBeGreaterThanOrEqual(0.8 * pausedSpeech.insertedSilenceSec);
    expect(result.durationOutSec).toBeGreaterThanOrEqual(pausedSpeech.speechSec * 0.9);
  });

  it('leaves pauses shorter than minSilenceDuration in place', async () => {
    const result = await run(pausedSpeech, [op.trimSilence(0.5, 5000), op.encode('opus', 32)]);
    expect(Math.abs(result.durationInSec - result.durationOutSec)).toBeLessThan(0.1);
  });

  it('keeps the speech at the most aggressive setting', async () => {
    // -25 dBFS counts quiet word endings as silence too; they may be shortened, not lost.
    const result = await run(pausedSpeech, [op.trimSilence(1, 500), op.encode('opus', 32)]);
    expect(result.durationOutSec).toBeGreaterThanOrEqual(pausedSpeech.speechSec * 0.9);
  });
});

describe('compress', () => {
  it('narrows the loudness range of speech with loud and quiet parts', async () => {
    const plain = await run(dynamicSpeech, [op.encode('opus', 64)]);
    const compressed = await run(dynamicSpeech, [
      op.compress(8, -40, 5, 100),
      op.encode('opus', 64),
    ]);
    const before = await runner.measureLoudness(plain.outputPath);
    const after = await runner.measureLoudness(compressed.outputPath);
    expect(before.loudnessRangeLu!).toBeGreaterThan(6);
    expect(after.loudnessRangeLu!).toBeLessThan(before.loudnessRangeLu! - 3);
  });

  it('with a fast attack also lowers peaks relative to loudness', async () => {
    const plain = await run(dynamicSpeech, [op.encode('mp3', 128)]);
    const compressed = await run(dynamicSpeech, [
      op.compress(20, -30, 0, 200),
      op.encode('mp3', 128),
    ]);
    const peakToLoudness = async (path: string) => {
      const measured = await runner.measureLoudness(path);
      return measured.truePeakDb! - measured.integratedLufs!;
    };
    expect(await peakToLoudness(compressed.outputPath)).toBeLessThan(
      (await peakToLoudness(plain.outputPath)) - 2,
    );
  });
});
