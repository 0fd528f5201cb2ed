import type { AudioOperation } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { atempoStages, compressorFilter, LIMITER_CEILING_DB } from './audio-filters';
import { mp3SampleRate } from './encoder-settings';
import { InvalidOperationChainError } from './errors';
import {
  buildProcessingPlan,
  type MeasurementMap,
  type MeasureStep,
  renderFfmpegArgs,
} from './ffmpeg-command';
import type { LoudnessSummary, Measurement } from './measurement-parsers';

const encode = (
  params: Partial<Extract<AudioOperation, { type: 'encode' }>['params']> = {},
): AudioOperation => ({
  type: 'encode',
  params: { format: 'opus', bitrate: 24, channels: 1, ...params },
});
const normalize = (targetLevel: number, peakNormalize = false): AudioOperation => ({
  type: 'normalize',
  params: { targetLevel, peakNormalize },
});
const level = (integratedLufs: number | null, peakDb: number | null): LoudnessSummary => ({
  kind: 'loudness',
  integratedLufs,
  loudnessRangeLu: 5,
  peakDb,
});

function measureSteps(chain: AudioOperation[]): MeasureStep[] {
  return buildProcessingPlan(chain).steps.filter((s): s is MeasureStep => s.kind === 'measure');
}

function encodeArgs(chain: AudioOperation[], measurements: MeasurementMap = new Map()) {
  const encodeStep = buildProcessingPlan(chain).steps.at(-1)!;
  return renderFfmpegArgs(encodeStep.invocation(measurements), {
    inputPath: '/in/a.wav',
    outputPath: '/out/b.ogg',
  });
}

const valueAfter = (args: string[], flag: string) => args[args.indexOf(flag) + 1];

describe('encode settings', () => {
  it('encodes Opus in Ogg at 48 kHz with the requested bitrate and channels', () => {
    const args = encodeArgs([encode({ bitrate: 16, channels: 2 })]);
    expect(valueAfter(args, '-c:a')).toBe('libopus');
    expect(valueAfter(args, '-b:a')).toBe('16k');
    expect(valueAfter(args, '-ac')).toBe('2');
    expect(valueAfter(args, '-ar')).toBe('48000');
    expect(valueAfter(args, '-application')).toBe('voip');
    expect(valueAfter(args, '-vbr')).toBe('constrained');
    expect(valueAfter(args, '-f')).toBe('ogg');
    expect(args.at(-1)).toBe('file:/out/b.ogg');
  });

  it('uses the audio application for Opus at high bitrates', () => {
    expect(valueAfter(encodeArgs([encode({ bitrate: 64 })]), '-application')).toBe('audio');
  });

  it('encodes MP3 with LAME at a sample rate its bitrate can carry', () => {
    const args = encodeArgs([encode({ format: 'mp3', bitrate: 24, channels: 1 })]);
    expect(valueAfter(args, '-c:a')).toBe('libmp3lame');
    expect(valueAfter(args, '-ar')).toBe('22050');
    expect(valueAfter(args, '-f')).toBe('mp3');
    expect(mp3SampleRate(12, 1)).toBe(16_000);
    expect(mp3SampleRate(128, 2)).toBe(44_100);
    expect(mp3SampleRate(64, 2)).toBe(22_050);
  });

  it('reads the input as a file URL, keeps only the first audio stream and no metadata', () => {
    const args = encodeArgs([encode()]);
    expect(args.slice(0, 4)).toEqual(['-nostdin', '-hide_banner', '-nostats', '-y']);
    expect(valueAfter(args, '-i')).toBe('file:/in/a.wav');
    expect(valueAfter(args, '-map')).toBe('0:a:0');
    expect(valueAfter(args, '-map_metadata')).toBe('-1');
  });

  it('converts to the encoder rate and layout first, so measurements see the output signal', () => {
    const stereo = valueAfter(encodeArgs([encode({ channels: 2 })]), '-af');
    expect(stereo).toBe('aformat=sample_fmts=fltp:sample_rates=48000:channel_layouts=stereo');
  });
});

describe('speedup', () => {
  it('splits any rate in 0.5–5 into atempo stages within 0.5–2 whose product is the rate', () => {
    for (let rate = 0.5; rate <= 5.0001; rate += 0.05) {
      const stages = atempoStages(rate);
      for (const stage of stages) {
        expect(stage).toBeGreaterThanOrEqual(0.5 - 1e-9);
        expect(stage).toBeLessThanOrEqual(2 + 1e-9);
      }
      expect(stages.reduce((a, b) => a * b, 1)).toBeCloseTo(rate, 9);
    }
    expect(atempoStages(5)).toHaveLength(3);
    expect(atempoStages(1.5)).toEqual([1.5]);
  });

  it('renders the stages as an atempo chain with no measurement pass', () => {
    const chain = [{ type: 'speedup', params: { rate: 4 } } as const, encode()];
    expect(measureSteps(chain)).toHaveLength(0);
    expect(valueAfter(encodeArgs(chain), '-af')).toMatch(/,atempo=2,atempo=2$/);
  });
});

describe('compress', () => {
  it('converts the dB threshold to the linear one acompressor expects', () => {
    const filter = compressorFilter({
      type: 'compress',
      params: { ratio: 4, threshold: -20, attack: 10, release: 100 },
    });
    expect(filter).toBe('acompressor=threshold=0.1:ratio=4:attack=10:release=100');
  });

  it('lifts zero attack/release to the smallest value acompressor accepts', () => {
    const filter = compressorFilter({
      type: 'compress',
      params: { ratio: 20, threshold: -60, attack: 0, release: 0 },
    });
    expect(filter).toBe('acompressor=threshold=0.001:ratio=20:attack=0.01:release=0.01');
  });
});

describe('trim-silence plan', () => {
  const chain: AudioOperation[] = [
    { type: 'trim-silence', params: { aggressiveness: 1, minSilenceDuration: 1000 } },
    encode(),
  ];

  it('detects silences first with the mapped threshold and minimum duration', () => {
    const [detect] = measureSteps(chain);
    expect(detect?.key).toBe('0:silences');
    expect(detect?.invocation(new Map()).filterGraph).toMatch(
      /,silencedetect=noise=-25dB:duration=1$/,
    );
    expect(detect?.invocation(new Map()).output).toBeNull();
  });

  it('cuts what was detected, keeping 250 ms of each long silence', () => {
    const measurements = new Map<string, Measurement>([
      [
        '0:silences',
        {
          kind: 'silences',
          intervals: [
            { startSec: 2, endSec: 5 },
            { startSec: 7, endSec: 7.5 },
          ],
        },
      ],
    ]);
    const graph = valueAfter(encodeArgs(chain, measurements), '-af');
    expect(graph).toContain(
      "asetnsamples=n=480:p=0,aselect='not(between(t,2.125,4.875))',asetpts=N/SR/TB",
    );
  });

  it('measures through the operations that precede the measured one', () => {
    const steps = measureSteps([
      { type: 'speedup', params: { rate: 1.5 } },
      { type: 'trim-silence', params: { aggressiveness: 0.5, minSilenceDuration: 500 } },
      encode(),
    ]);
    expect(steps[0]?.invocation(new Map()).filterGraph).toMatch(
      /atempo=1\.5,silencedetect=noise=-42\.5dB:duration=0\.5$/,
    );
  });
});

describe('normalize plan', () => {
  it('applies the measured loudness gap as gain when peaks stay under the ceiling', () => {
    const chain = [normalize(-16), encode()];
    const steps = measureSteps(chain);
    expect(steps.map((s) => s.key)).toEqual(['0:level', '0:correction-1', '0:correction-2']);
    const measured = new Map([['0:level', level(-20, -10)]]);
    expect(steps[1]?.shouldRun(measured)).toBe(false);
    expect(valueAfter(encodeArgs(chain, measured), '-af')).toMatch(/,volume=4dB$/);
  });

  it('adds a limiter and corrects for what it cost when the gain would clip', () => {
    const chain = [normalize(-14), encode()];
    const [, first, second] = measureSteps(chain);
    const measured = new Map<string, Measurement>([['0:level', level(-20, -2)]]);
    expect(first?.shouldRun(measured)).toBe(true);
    expect(first?.invocation(measured).filterGraph).toMatch(
      /volume=6dB,alimiter=limit=0\.841395:.*level=false.*,ebur128=peak=sample/,
    );
    measured.set('0:correction-1', level(-15.2, LIMITER_CEILING_DB));
    expect(second?.shouldRun(measured)).toBe(true);
    measured.set('0:correction-2', level(-14.3, LIMITER_CEILING_DB));
    expect(valueAfter(encodeArgs(chain, measured), '-af')).toMatch(/volume=7\.5dB,alimiter/);
  });

  it('skips the second correction when the first landed within tolerance', () => {
    const [, , second] = measureSteps([normalize(-14), encode()]);
    const measured = new Map<string, Measurement>([
      ['0:level', level(-20, -2)],
      ['0:correction-1', level(-14.3, -1.5)],
    ]);
    expect(second?.shouldRun(measured)).toBe(false);
  });

  it('leaves silence alone instead of applying an unbounded gain', () => {
    const chain = [normalize(-16), encode()];
    const graph = valueAfter(encodeArgs(chain, new Map([['0:level', level(null, null)]])), '-af');
    expect(graph).not.toContain('volume');
  });

  it('peak-normalises with one measurement and a plain gain', () => {
    const chain = [normalize(-3, true), encode()];
    expect(measureSteps(chain).map((s) => s.key)).toEqual(['0:level']);
    const graph = valueAfter(encodeArgs(chain, new Map([['0:level', level(-20, -7.5)]])), '-af');
    expect(graph).toMatch(/,volume=4\.5dB$/);
  });

  it('refuses to build a pass before its measurements exist', () => {
    expect(() => encodeArgs([normalize(-16), encode()])).toThrow(/measurement 0:level/);
  });
});

describe('chain validation', () => {
  it('requires exactly one encode, last', () => {
    expect(() => buildProcessingPlan([normalize(-16)])).toThrow(InvalidOperationChainError);
    expect(() => buildProcessingPlan([encode(), normalize(-16), encode()])).toThrow(
      /position 0 is not the last/,
    );
  });

  it('rejects parameters outside the spec ranges', () => {
    expect(() => buildProcessingPlan([{ type: 'speedup', params: { rate: 6 } }, encode()])).toThrow(
      /speedup.rate/,
    );
    expect(() => buildProcessingPlan([encode({ bitrate: 8 })])).toThrow(/encode.bitrate/);
  });

  it('reports the operations applied in order, encode last', () => {
    const plan = buildProcessingPlan([
      { type: 'speedup', params: { rate: 1.25 } },
      normalize(-14),
      encode(),
    ]);
    expect(plan.operationsApplied).toEqual(['speedup', 'normalize', 'encode']);
  });
});

describe('renderFfmpegArgs', () => {
  it('reads a long filtergraph from a script file and applies input guards', () => {
    const step = buildProcessingPlan([encode()]).steps[0]!;
    const args = renderFfmpegArgs(step.invocation(new Map()), {
      inputPath: '-weird name.wav',
      outputPath: '/out/x.ogg',
      filterScriptPath: '/work/graph.txt',
      allowedInputFormats: ['wav', 'mp3'],
      maxInputSec: 3601,
      progress: true,
    });
    expect(valueAfter(args, '-filter_script:a')).toBe('/work/graph.txt');
    expect(args).not.toContain('-af');
    expect(valueAfter(args, '-format_whitelist')).toBe('wav,mp3');
    expect(valueAfter(args, '-t')).toBe('3601');
    expect(valueAfter(args, '-progress')).toBe('pipe:1');
    expect(valueAfter(args, '-i')).toBe('file:-weird name.wav');
    expect(args.indexOf('-t')).toBeLessThan(args.indexOf('-i'));
  });

  it('discards the output of measurement passes', () => {
    const [step] = measureSteps([normalize(-16), encode()]);
    const args = renderFfmpegArgs(step!.invocation(new Map()), { inputPath: '/a.wav' });
    expect(args.slice(-3)).toEqual(['-f', 'null', '-']);
    expect(args).not.toContain('-c:a');
  });
});
