import { AUDIO_AUTO_ENCODINGS } from '@tamp/proto';
import { seededRandom } from '@tamp/scripts/fixtures/seeded-random';
import { describe, expect, it } from 'vitest';
import {
  type AnalysisFrame,
  analysisFramesCollector,
  chooseAutoEncoding,
  chosenEncode,
  classifyContent,
  contentMeasures,
} from './auto-encoding';

/** Frames of a level envelope in dBFS (null: digital silence), at one correlation. */
function frames(levels: readonly (number | null)[], correlation = 1): AnalysisFrame[] {
  return levels.map((rmsDb) => ({ rmsDb, correlation }));
}

/** Syllables (3–6 frames loud) and gaps (1–8 frames quiet) of random lengths: no period. */
function speechLike(count: number, seed: number): number[] {
  const random = seededRandom(seed);
  const levels: number[] = [];
  while (levels.length < count) {
    const syllable = 3 + Math.floor(random() * 4);
    const gap = 1 + Math.floor(random() * 8);
    levels.push(...Array.from({ length: syllable }, () => -20 + random() * 6));
    levels.push(...Array.from({ length: gap }, () => -55 + random() * 5));
  }
  return levels.slice(0, count);
}

/** A note struck every 10 frames (0.5 s, 120 bpm) that decays, with a rest every fourth beat. */
function beatWithRests(count: number): number[] {
  return Array.from({ length: count }, (_, index) => {
    const beat = Math.floor(index / 10);
    return beat % 4 === 3 ? -60 : -15 - 4 * (index % 10);
  });
}

describe('contentMeasures and classifyContent', () => {
  it('hears pauses and syllables without a period as speech', () => {
    const measures = contentMeasures(frames(speechLike(400, 7)));
    expect(measures.pauseShare).toBeGreaterThan(0.2);
    expect(measures.beatRegularity).toBeLessThan(0.5);
    expect(classifyContent(measures)).toBe('speech');
  });

  it('hears the same stops and jumps at a steady beat as music', () => {
    const measures = contentMeasures(frames(beatWithRests(400)));
    expect(measures.pauseShare).toBeGreaterThan(0.2);
    expect(measures.envelopeModulationDb).toBeGreaterThan(3);
    expect(measures.beatRegularity).toBeGreaterThan(0.8);
    expect(classifyContent(measures)).toBe('music');
  });

  it('hears a continuous sound as music, beat or not', () => {
    const random = seededRandom(3);
    const measures = contentMeasures(frames(Array.from({ length: 400 }, () => -14 + random())));
    expect(measures.pauseShare).toBe(0);
    expect(measures.envelopeModulationDb).toBeLessThan(1);
    expect(classifyContent(measures)).toBe('music');
  });

  it('needs pauses, jumps and no beat for speech: doubt goes to music', () => {
    // A real tracker tune's figures with its beat just under the threshold.
    const tune = {
      pauseShare: 0.039,
      envelopeModulationDb: 3.439,
      beatRegularity: 0.49,
      stereoCorrelation: 0.862,
    };
    expect(classifyContent(tune)).toBe('music');
    expect(classifyContent({ ...tune, pauseShare: 0.17 })).toBe('speech');
    expect(classifyContent({ ...tune, pauseShare: 0.17, envelopeModulationDb: 2 })).toBe('music');
  });

  it('reads the correlation of the sounding frames only', () => {
    const levels = beatWithRests(200);
    const measured = contentMeasures(
      levels.map((rmsDb) => ({ rmsDb, correlation: rmsDb < -50 ? 1 : 0.2 })),
    );
    expect(measured.stereoCorrelation).toBe(0.2);
  });
});

describe('chooseAutoEncoding', () => {
  it('encodes speech mono at the speech rate with voip, whatever the input channels', () => {
    const choice = chooseAutoEncoding(frames(speechLike(400, 11), 0.3), 2);
    expect(choice).toMatchObject({
      class: 'speech',
      application: 'voip',
      ...AUDIO_AUTO_ENCODINGS.speech,
    });
    expect(chosenEncode(choice)).toEqual({
      type: 'encode',
      params: { format: 'opus', ...AUDIO_AUTO_ENCODINGS.speech },
    });
  });

  it('encodes music stereo only when the input has two channels that differ', () => {
    const music = beatWithRests(400);
    expect(chooseAutoEncoding(frames(music, 0.3), 2)).toMatchObject({
      class: 'music',
      application: 'audio',
      ...AUDIO_AUTO_ENCODINGS.musicStereo,
    });
    expect(chooseAutoEncoding(frames(music, 0.99), 2)).toMatchObject({
      application: 'audio',
      ...AUDIO_AUTO_ENCODINGS.musicMono,
    });
    expect(chooseAutoEncoding(frames(music, 1), 1)).toMatchObject(AUDIO_AUTO_ENCODINGS.musicMono);
  });

  it('gives silence the smallest encoding', () => {
    expect(chooseAutoEncoding(frames([null, null, null]), 2).class).toBe('speech');
    expect(chooseAutoEncoding(frames(Array(100).fill(-80)), 1).class).toBe('speech');
  });
});

describe('analysisFramesCollector', () => {
  it('reads each frame of ffmpeg ametadata lines, -inf as silence', () => {
    const collector = analysisFramesCollector();
    const log = [
      '[Parsed_ametadata_4 @ 0x55] frame:0    pts:0       pts_time:0',
      '[Parsed_ametadata_4 @ 0x55] lavfi.astats.Overall.RMS_level=-inf',
      '[Parsed_ametadata_4 @ 0x55] lavfi.aphasemeter.phase=nan',
      'Output #0, null, to pipe:',
      '[Parsed_ametadata_4 @ 0x55] frame:1    pts:2400    pts_time:0.05',
      '[Parsed_ametadata_4 @ 0x55] lavfi.astats.Overall.RMS_level=-23.5',
      '[Parsed_ametadata_4 @ 0x55] lavfi.aphasemeter.phase=0.516211',
    ];
    for (const line of log) collector.accept(line);
    expect(collector.finish()).toEqual([
      { rmsDb: null, correlation: null },
      { rmsDb: -23.5, correlation: 0.516211 },
    ]);
  });
});
