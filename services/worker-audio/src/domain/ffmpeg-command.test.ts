import { type AudioOperation, InvalidChainError } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { atempoStages, compressorFilter, LIMITER_CEILING_DB } from './audio-filters';
import { mp3SampleRate } from './encoder-settings';
import {
  buildProcessingPlan,
  type MeasurementMap,
  type MeasurePass,
  type PlanMeasurement,
  renderFfmpegArgs,
} from './ffmpeg-command';
import type { LoudnessSummary } from './measurement-parsers';

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
const trim = (aggressiveness = 0.5, minSilenceDuration = 500): AudioOperation => ({
  type: 'trim-silence',
  params: { aggressiveness, minSilenceDuration },
});
const compress = (ratio = 4): AudioOperation => ({
  type: 'compress',
  params: { ratio, threshold: -20, attack: 10, release: 100 },
});
const level = (integratedLufs: number | null, peakDb: number | null): LoudnessSummary => ({
  kind: 'loudness',
  integratedLufs,
  loudnessRangeLu: 5,
  peakDb,
});
const exactLevel = (integratedLufs: number | null, peakDb: number | null): PlanMeasurement => ({
  kind: 'level',
  exact: true,
  measured: level(integratedLufs, peakDb),
});

/** ffmpeg's stderr for a pass: one ebur128 summary per level, in graph order. */
function summaries(levels: readonly LoudnessSummary[]): string {
  return levels
    .map(
      (measured, position) =>
        `[Parsed_ebur128_${position + 3} @ 0x1] Summary:\n  Integrated loudness:\n` +
        `    I:         ${measured.integratedLufs ?? -70} LUFS\n  Loudness range:\n` +
        `    LRA:         ${measured.loudnessRangeLu ?? 0} LU\n  Sample peak:\n` +
        `    Peak:       ${measured.peakDb ?? '-inf'} dBFS`,
    )
    .join('\n');
}

/** Runs a pass's collector over a log and adds what it read to the measurements. */
function measure(pass: MeasurePass, measurements: Map<string, PlanMeasurement>, log: string) {
  const collector = pass.createCollector();
  for (const line of log.split('\n')) collector.accept(line);
  for (const [key, measured] of collector.finish()) measurements.set(key, measured);
}

function nextMeasurePass(chain: AudioOperation[], measurements: MeasurementMap = new Map()) {
  const pass = buildProcessingPlan(chain).nextPass(measurements);
  if (pass.kind !== 'measure') throw new Error(`expected a measurement pass, got ${pass.label}`);
  return pass;
}

function encodeArgs(chain: AudioOperation[], measurements: MeasurementMap = new Map()) {
  const pass = buildProcessingPlan(chain).nextPass(measurements);
  if (pass.kind !== 'encode') throw new Error(`expected the encode pass, got ${pass.label}`);
  return renderFfmpegArgs(pass.invocation, { inputPath: '/in/a.wav', outputPath: '/out/b.ogg' });
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
    expect(buildProcessingPlan(chain).nextPass(new Map()).kind).toBe('encode');
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
  const chain: AudioOperation[] = [trim(1, 1000), encode()];

  it('detects silences first with the mapped threshold and minimum duration', () => {
    const detect = nextMeasurePass(chain);
    expect(detect.invocation.filterGraph).toMatch(/,silencedetect=noise=-25dB:duration=1$/);
    expect(detect.invocation.output).toBeNull();
  });

  it('cuts what was detected, keeping 250 ms of each long silence', () => {
    const measurements = new Map<string, PlanMeasurement>();
    measure(
      nextMeasurePass(chain),
      measurements,
      [
        '[silencedetect @ 0x5] silence_start: 2',
        '[silencedetect @ 0x5] silence_end: 5 | silence_duration: 3',
        '[silencedetect @ 0x5] silence_start: 7',
        '[silencedetect @ 0x5] silence_end: 7.5 | silence_duration: 0.5',
      ].join('\n'),
    );
    const graph = valueAfter(encodeArgs(chain, measurements), '-af');
    expect(graph).toContain(
      "asetnsamples=n=480:p=0,aselect='not(between(t,2.125,4.875))',asetpts=N/SR/TB",
    );
  });

  it('measures through the operations that precede the measured one', () => {
    const detect = nextMeasurePass([
      { type: 'speedup', params: { rate: 1.5 } },
      trim(0.5, 500),
      encode(),
    ]);
    expect(detect.invocation.filterGraph).toMatch(
      /atempo=1\.5,silencedetect=noise=-42\.5dB:duration=0\.5$/,
    );
  });
});

describe('normalize plan', () => {
  it('applies the measured loudness gap as gain when peaks stay under the ceiling', () => {
    const chain = [normalize(-16), encode()];
    const measurements = new Map<string, PlanMeasurement>();
    const scan = nextMeasurePass(chain, measurements);
    expect(scan.invocation.filterGraph).toMatch(/,ebur128=peak=sample:framelog=verbose$/);
    measure(scan, measurements, summaries([level(-20, -10)]));
    expect(valueAfter(encodeArgs(chain, measurements), '-af')).toMatch(/,volume=4dB$/);
  });

  it('measures a limited gain at two gains in one pass and interpolates the target', () => {
    const chain = [normalize(-14), encode()];
    const measurements = new Map([['0:level', exactLevel(-20, -2)]]);
    const gains = nextMeasurePass(chain, measurements);
    const branches = gains.invocation.filterGraph.split(';');
    expect(branches[0]).toMatch(/,asplit=2\[gain0\]\[gain1\]$/);
    expect(branches.slice(1)).toEqual([
      expect.stringMatching(
        /^\[gain0\]volume=6dB,alimiter=limit=0\.841395:.*level=false.*,ebur128=.*,anullsink$/,
      ),
      expect.stringMatching(
        /^\[gain1\]volume=9dB,alimiter=.*,ebur128=peak=sample:framelog=verbose$/,
      ),
    ]);
    // The limiter costs loudness, so 3 dB more gain gives only 1.2 LU more: -14 is 2 dB up.
    measure(gains, measurements, summaries([level(-14.8, -1.5), level(-13.6, -1.5)]));
    expect(valueAfter(encodeArgs(chain, measurements), '-af')).toMatch(
      /volume=8dB,alimiter=limit=0\.841395/,
    );
  });

  it('adds the remaining gap one for one when even the highest gain falls short', () => {
    const chain = [normalize(-10), encode()];
    const measurements = new Map([['0:level', exactLevel(-20, -2)]]);
    measure(
      nextMeasurePass(chain, measurements),
      measurements,
      summaries([level(-12.6, -1.5), level(-11.9, LIMITER_CEILING_DB)]),
    );
    // 10 dB gap + 3 dB offset + the 1.9 LU still missing at it.
    expect(valueAfter(encodeArgs(chain, measurements), '-af')).toMatch(/volume=14\.9dB,alimiter/);
  });

  it('leaves silence alone instead of applying an unbounded gain', () => {
    const chain = [normalize(-16), encode()];
    const graph = valueAfter(
      encodeArgs(chain, new Map([['0:level', exactLevel(null, null)]])),
      '-af',
    );
    expect(graph).not.toContain('volume');
  });

  it('peak-normalises with one measurement and a plain gain', () => {
    const chain = [normalize(-3, true), encode()];
    const graph = valueAfter(
      encodeArgs(chain, new Map([['0:level', exactLevel(-20, -7.5)]])),
      '-af',
    );
    expect(graph).toMatch(/,volume=4\.5dB$/);
  });
});

describe('passes shared by several measurements', () => {
  it('estimates the level on the decode that detects silences, then checks it on the cut signal', () => {
    const chain = [trim(), normalize(-16), encode()];
    const measurements = new Map<string, PlanMeasurement>();
    const first = nextMeasurePass(chain, measurements);
    expect(first.invocation.filterGraph).toMatch(
      /,silencedetect=[^,]+,ebur128=peak=sample:framelog=verbose$/,
    );
    measure(
      first,
      measurements,
      `[silencedetect @ 0x5] silence_start: 2\n[silencedetect @ 0x5] silence_end: 5\n${summaries([level(-21, -10)])}`,
    );
    // Estimated on the uncut signal: the gain is measured once more on the cut one, never applied blind.
    const check = nextMeasurePass(chain, measurements);
    expect(check.invocation.filterGraph).toMatch(
      /aselect=.*,volume=5dB,ebur128=peak=sample:framelog=verbose$/,
    );
    measure(check, measurements, summaries([level(-15.6, -4.6)]));
    expect(valueAfter(encodeArgs(chain, measurements), '-af')).toMatch(/aselect=.*,volume=4\.6dB$/);
  });

  it('probes again, limited, when the checked level turns out to need the limiter', () => {
    const chain = [trim(), normalize(-16), encode()];
    const measurements = new Map<string, PlanMeasurement>([
      ['0:silences', { kind: 'silences', intervals: [] }],
      ['1:level', { kind: 'level', exact: false, measured: level(-21, -10) }],
    ]);
    // The estimate needs no limiter: one plain branch checks it...
    measure(nextMeasurePass(chain, measurements), measurements, summaries([level(-16.5, -1.2)]));
    // ...and finds -21.5 LUFS with peaks at -6.2 dBFS: +5.5 dB would clip, so two limited gains.
    const limited = nextMeasurePass(chain, measurements);
    expect(limited.invocation.filterGraph).toMatch(/asplit=2.*\[gain0\]volume=5\.5dB,alimiter/);
    expect(limited.invocation.filterGraph).toContain('[gain1]volume=8.5dB,alimiter');
  });

  it('measures what a compressor leaves in every branch, for its make-up gain', () => {
    const chain = [normalize(-16), compress(4), encode()];
    const measurements = new Map([['0:level', exactLevel(-20, -2)]]);
    const gains = nextMeasurePass(chain, measurements);
    expect(gains.invocation.filterGraph).toMatch(
      /\[gain0\]volume=4dB,alimiter=[^,]+,ebur128=[^,]+,acompressor=[^,]+,ebur128=[^,]+,anullsink;/,
    );
    measure(
      gains,
      measurements,
      summaries([level(-16.4, -1.5), level(-24.4, -9), level(-15.2, -1.5), level(-23.2, -8)]),
    );
    // -16 is reached at offset 0.4 / (1.2 / 3) = 1 dB, where the compressor leaves -24.0 LUFS.
    const makeup = nextMeasurePass(chain, measurements);
    expect(makeup.invocation.filterGraph).toMatch(
      /^[^;]*volume=5dB,alimiter=[^,]+,acompressor=[^;]+,asplit=2/,
    );
    expect(makeup.invocation.filterGraph).toContain('[gain0]volume=8dB,alimiter');
    measure(makeup, measurements, summaries([level(-16.3, -1.5), level(-14.1, -1.5)]));
    expect(valueAfter(encodeArgs(chain, measurements), '-af')).toMatch(
      /volume=5dB,alimiter=[^,]+,acompressor=[^,]+,volume=8\.409dB,alimiter/,
    );
  });

  it('fails loudly when a pass printed fewer summaries than it measures', () => {
    const pass = nextMeasurePass(
      [normalize(-14), encode()],
      new Map([['0:level', exactLevel(-20, -2)]]),
    );
    expect(() => measure(pass, new Map(), summaries([level(-15, -1.5)]))).toThrow(
      /1 loudness summaries, 2 expected/,
    );
  });
});

describe('chain validation', () => {
  it('requires exactly one encode, last', () => {
    expect(() => buildProcessingPlan([normalize(-16)])).toThrow(InvalidChainError);
    expect(() => buildProcessingPlan([encode(), normalize(-16), encode()])).toThrow(
      InvalidChainError,
    );
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
    const pass = buildProcessingPlan([encode()]).nextPass(new Map());
    const args = renderFfmpegArgs(pass.invocation, {
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
    const pass = nextMeasurePass([normalize(-16), encode()]);
    const args = renderFfmpegArgs(pass.invocation, { inputPath: '/a.wav' });
    expect(args.slice(-3)).toEqual(['-f', 'null', '-']);
    expect(args).not.toContain('-c:a');
  });
});
