import { describe, expect, it } from 'vitest';
import { MeasurementParseError } from './errors';
import { createProgressParser } from './ffmpeg-progress';
import {
  ebur128SummariesCollector,
  ebur128SummaryCollector,
  parseProbeOutput,
  silenceDetectCollector,
} from './measurement-parsers';

const feed = <T>(collector: { accept(l: string): void; finish(): T }, text: string): T => {
  for (const line of text.split('\n')) collector.accept(line);
  return collector.finish();
};

const EBUR128_LOG = `size=N/A time=00:00:20.76 bitrate=N/A speed= 411x
[Parsed_ebur128_0 @ 0x55f87ee334c0] Summary:

  Integrated loudness:
    I:         -20.4 LUFS
    Threshold: -30.6 LUFS

  Loudness range:
    LRA:         5.8 LU
    Threshold: -41.8 LUFS
    LRA low:   -25.7 LUFS
    LRA high:  -19.9 LUFS

  Sample peak:
    Peak:       -1.1 dBFS`;

describe('ebur128SummaryCollector', () => {
  it('reads integrated loudness, range and peak from the summary', () => {
    expect(feed(ebur128SummaryCollector(), EBUR128_LOG)).toEqual({
      kind: 'loudness',
      integratedLufs: -20.4,
      loudnessRangeLu: 5.8,
      peakDb: -1.1,
    });
  });

  it('ignores momentary lines printed before the summary', () => {
    const log = `[Parsed_ebur128_0 @ 0x1] t: 0.1 TARGET:-23 LUFS M: -120.7 S:-120.7 I: -70.0 LUFS LRA: 0.0 LU\n${EBUR128_LOG}`;
    expect(feed(ebur128SummaryCollector(), log).integratedLufs).toBe(-20.4);
  });

  it('reports silence as not measurable', () => {
    const silent = EBUR128_LOG.replace('-20.4 LUFS', '-70.0 LUFS').replace(
      '-1.1 dBFS',
      '-inf dBFS',
    );
    expect(feed(ebur128SummaryCollector(), silent)).toMatchObject({
      integratedLufs: null,
      peakDb: null,
    });
  });

  it('fails loudly when no summary was printed', () => {
    expect(() => feed(ebur128SummaryCollector(), 'Conversion failed!')).toThrow(
      MeasurementParseError,
    );
  });
});

describe('ebur128SummariesCollector', () => {
  it('reads every summary of a pass in the order the filters appear in the graph', () => {
    const second = EBUR128_LOG.replace('Parsed_ebur128_0', 'Parsed_ebur128_12')
      .replace('-20.4 LUFS', '-16.1 LUFS')
      .replace('-1.1 dBFS', '-1.5 dBFS');
    const first = EBUR128_LOG.replace('Parsed_ebur128_0', 'Parsed_ebur128_7');
    const levels = feed(ebur128SummariesCollector(), `${second}\n${first}`);
    expect(levels.map((level) => [level.integratedLufs, level.peakDb])).toEqual([
      [-20.4, -1.1],
      [-16.1, -1.5],
    ]);
  });
});

describe('silenceDetectCollector', () => {
  it('pairs starts and ends and keeps a silence that runs to the end open', () => {
    const log = [
      '[silencedetect @ 0x5] silence_start: 0',
      '[silencedetect @ 0x5] silence_end: 2.012 | silence_duration: 2.012',
      'unrelated line with silence_start: 99',
      '[silencedetect @ 0x5] silence_start: 8.29583',
      '[silencedetect @ 0x5] silence_end: 10.6088 | silence_duration: 2.31295',
      '[silencedetect @ 0x5] silence_start: 15.5',
    ].join('\n');
    expect(feed(silenceDetectCollector(), log).intervals).toEqual([
      { startSec: 0, endSec: 2.012 },
      { startSec: 8.29583, endSec: 10.6088 },
      { startSec: 15.5, endSec: null },
    ]);
  });

  it('reads the instance names ffmpeg 7 and later print (Parsed_silencedetect_<n>)', () => {
    const log = [
      '[Parsed_silencedetect_1 @ 0x7f] silence_start: 1',
      '[Parsed_silencedetect_1 @ 0x7f] silence_end: 2.000021 | silence_duration: 1.000021',
      '[Parsed_volume_2 @ 0x7f] silence_start: 5',
    ].join('\n');
    expect(feed(silenceDetectCollector(), log).intervals).toEqual([
      { startSec: 1, endSec: 2.000021 },
    ]);
  });

  it('clamps the small negative start ffmpeg reports for a silence at time zero', () => {
    const log =
      '[silencedetect @ 0x5] silence_start: -0.00133\n[silencedetect @ 0x5] silence_end: 1';
    expect(feed(silenceDetectCollector(), log).intervals).toEqual([{ startSec: 0, endSec: 1 }]);
  });
});

describe('parseProbeOutput', () => {
  it('reads duration, rate, channels, codec and bitrate', () => {
    const json = JSON.stringify({
      streams: [{ codec_type: 'audio', codec_name: 'opus', sample_rate: '48000', channels: 2 }],
      format: { duration: '12.5', bit_rate: '24000', format_name: 'ogg' },
    });
    expect(parseProbeOutput(json)).toEqual({
      durationSec: 12.5,
      sampleRate: 48000,
      channels: 2,
      codec: 'opus',
      bitRate: 24000,
      formatName: 'ogg',
      carriesMetadata: false,
    });
  });

  it('tells tags and cover art the pipeline drops from the encoder name every file has', () => {
    const probe = (format: Record<string, unknown>, streamTags?: Record<string, string>) =>
      parseProbeOutput(
        JSON.stringify({
          streams: [{ codec_type: 'audio', sample_rate: '44100', channels: 1, tags: streamTags }],
          format: { duration: '1', format_name: 'mp3', ...format },
        }),
      );
    expect(probe({ nb_streams: 1, tags: { encoder: 'Lavf59.27.100' } })).toHaveProperty(
      'carriesMetadata',
      false,
    );
    expect(probe({ nb_streams: 1 }, { encoder: 'LAME3.100' })).toHaveProperty(
      'carriesMetadata',
      false,
    );
    expect(probe({ tags: { title: 'Secret', encoder: 'Lavf' } })).toHaveProperty(
      'carriesMetadata',
      true,
    );
    expect(probe({ nb_streams: 2 })).toHaveProperty('carriesMetadata', true);
  });

  it('explains what is missing', () => {
    expect(parseProbeOutput('{}')).toEqual({ problem: 'the file contains no audio stream' });
    expect(parseProbeOutput('not json')).toHaveProperty('problem');
    const noDuration = JSON.stringify({
      streams: [{ codec_type: 'audio', sample_rate: '8000', channels: 1 }],
      format: { duration: 'N/A' },
    });
    expect(parseProbeOutput(noDuration)).toEqual({
      problem: 'the duration of the audio cannot be determined',
    });
  });
});

describe('progress parser', () => {
  it('emits a snapshot per block with the output time and speed', () => {
    const parser = createProgressParser();
    const snapshots = [
      'out_time_us=N/A',
      'progress=continue',
      'out_time_us=1500000',
      'out_time=00:00:01.500000',
      'speed=210x',
      'progress=continue',
      'out_time=00:01:02.250000',
      'progress=end',
    ]
      .map((line) => parser.accept(line))
      .filter((snapshot) => snapshot !== null);
    expect(snapshots).toEqual([
      { outTimeSec: 0, speed: null, done: false },
      { outTimeSec: 1.5, speed: 210, done: false },
      { outTimeSec: 62.25, speed: 210, done: true },
    ]);
  });
});
