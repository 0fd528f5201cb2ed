/**
 * Silence trimming is done in two passes instead of with ffmpeg's `silenceremove`:
 * in ffmpeg 5.1 (Debian 12) `silenceremove` with `stop_periods=-1` and a kept `stop_silence`
 * also deletes short pauses between words, and ffmpeg 6.1 changed the filter's semantics
 * again. `silencedetect` has been stable for years, so we detect silent intervals first and
 * then cut exactly the parts we decided to cut.
 */

export interface SilentInterval {
  startSec: number;
  /** `null` when the silence runs to the end of the stream and ffmpeg reported no end. */
  endSec: number | null;
}

export interface CutInterval {
  startSec: number;
  endSec: number;
}

/** Gentlest and most aggressive silence thresholds (dBFS sample peak). */
export const SILENCE_THRESHOLD_DB_AT_GENTLEST = -60;
export const SILENCE_THRESHOLD_DB_AT_MOST_AGGRESSIVE = -25;

/** Never keep more than this much of a shortened silence (seconds). */
const MAX_KEPT_SILENCE_SEC = 0.25;

/**
 * Linear in dB: 0 → -60 dBFS (only near-digital silence counts), 0.5 → -42.5 dBFS,
 * 1 → -25 dBFS (quiet room tone and breaths count as silence).
 */
export function silenceThresholdDb(aggressiveness: number): number {
  const clamped = Math.min(1, Math.max(0, aggressiveness));
  return (
    SILENCE_THRESHOLD_DB_AT_GENTLEST +
    (SILENCE_THRESHOLD_DB_AT_MOST_AGGRESSIVE - SILENCE_THRESHOLD_DB_AT_GENTLEST) * clamped
  );
}

/**
 * How much of each long silence survives: half of minSilenceDuration, at most 250 ms.
 * Keeping some silence avoids clipping word tails and onsets that sit just under the
 * threshold, and leaves a natural pause between sentences.
 */
export function keptSilenceSec(minSilenceDurationMs: number): number {
  return Math.min(MAX_KEPT_SILENCE_SEC, minSilenceDurationMs / 1000 / 2);
}

/**
 * Each silence at least `minSilenceSec` long is shortened to `keepSec`: half of the kept part
 * stays after the preceding sound, half before the next one. A silence that runs to the end
 * (endSec null) keeps only its first half-pad.
 */
export function silenceCuts(
  silences: readonly SilentInterval[],
  minSilenceSec: number,
  keepSec: number,
): CutInterval[] {
  const halfKeep = keepSec / 2;
  const cuts: CutInterval[] = [];
  for (const silence of silences) {
    if (silence.endSec !== null && silence.endSec - silence.startSec < minSilenceSec) continue;
    const startSec = silence.startSec + halfKeep;
    const endSec = silence.endSec === null ? Number.POSITIVE_INFINITY : silence.endSec - halfKeep;
    if (endSec - startSec <= 0) continue;
    const previous = cuts.at(-1);
    if (previous && startSec <= previous.endSec) {
      previous.endSec = Math.max(previous.endSec, endSec);
    } else {
      cuts.push({ startSec, endSec });
    }
  }
  return cuts;
}

/** Seconds removed by the cuts, given the stream's duration (needed for an open-ended cut). */
export function removedSeconds(cuts: readonly CutInterval[], durationSec: number): number {
  return cuts.reduce(
    (sum, cut) => sum + Math.max(0, Math.min(cut.endSec, durationSec) - cut.startSec),
    0,
  );
}

const formatSec = (value: number): string => Number(value.toFixed(4)).toString();

/** Leaves of the decision tree test this many intervals linearly. */
const LEAF_SIZE = 4;

function betweenAny(cuts: readonly CutInterval[]): string {
  return cuts
    .map((cut) =>
      Number.isFinite(cut.endSec)
        ? `between(t,${formatSec(cut.startSec)},${formatSec(cut.endSec)})`
        : `gte(t,${formatSec(cut.startSec)})`,
    )
    .join('+');
}

function insideAnyCut(cuts: readonly CutInterval[]): string {
  if (cuts.length <= LEAF_SIZE) return betweenAny(cuts);
  const middle = Math.floor(cuts.length / 2);
  const pivot = cuts[middle]!.startSec;
  return `if(lt(t,${formatSec(pivot)}),${insideAnyCut(cuts.slice(0, middle))},${insideAnyCut(cuts.slice(middle))})`;
}

/**
 * An `aselect` expression that is 1 for frames to keep. The cuts are sorted and disjoint, so
 * the expression is a balanced binary search on `t`: ffmpeg evaluates it once per frame and a
 * long recording with thousands of pauses costs log(n) comparisons per frame, not n.
 */
export function keepFramesExpression(cuts: readonly CutInterval[]): string {
  if (cuts.length === 0) return '1';
  return `not(${insideAnyCut(cuts)})`;
}
