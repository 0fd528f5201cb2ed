/**
 * Parses ffmpeg's `-progress pipe:1` output: blocks of `key=value` lines, each block closed
 * by `progress=continue` or `progress=end`.
 */
export interface ProgressSnapshot {
  /** Seconds of output produced so far (output timeline, after tempo changes and cuts). */
  outTimeSec: number;
  /** Processing speed relative to real time, when ffmpeg knows it. */
  speed: number | null;
  done: boolean;
}

export interface ProgressParser {
  /** Returns a snapshot when the line closes a block, otherwise null. */
  accept(line: string): ProgressSnapshot | null;
}

function parseClock(value: string): number | null {
  const match = /^(-?\d+):(\d{2}):(\d{2}(?:\.\d+)?)$/.exec(value.trim());
  if (!match) return null;
  const [, hours = '0', minutes = '0', seconds = '0'] = match;
  return Number(hours) * 3600 + Number(minutes) * 60 + Number(seconds);
}

export function createProgressParser(): ProgressParser {
  let outTimeSec = 0;
  let speed: number | null = null;
  return {
    accept(line) {
      const separator = line.indexOf('=');
      if (separator < 0) return null;
      const key = line.slice(0, separator).trim();
      const value = line.slice(separator + 1).trim();
      switch (key) {
        case 'out_time_us': {
          // ffmpeg prints N/A before the first frame; keep the last known value.
          const micros = Number(value);
          if (Number.isFinite(micros) && micros >= 0) outTimeSec = micros / 1e6;
          return null;
        }
        case 'out_time': {
          const seconds = parseClock(value);
          if (seconds !== null && seconds >= 0) outTimeSec = seconds;
          return null;
        }
        case 'speed': {
          const parsed = Number.parseFloat(value);
          speed = Number.isFinite(parsed) ? parsed : null;
          return null;
        }
        case 'progress':
          return { outTimeSec, speed, done: value === 'end' };
        default:
          return null;
      }
    },
  };
}
