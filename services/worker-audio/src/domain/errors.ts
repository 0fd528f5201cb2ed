/**
 * Typed failures of the audio worker. `permanent` tells the job runner whether retrying the
 * same input can ever succeed (a corrupt or too-long file will not; a crashed or missing
 * ffmpeg might after a restart).
 */
export abstract class AudioProcessingError extends Error {
  abstract readonly code: string;
  abstract readonly permanent: boolean;

  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

export class ToolNotFoundError extends AudioProcessingError {
  readonly code = 'AUDIO_TOOL_NOT_FOUND';
  readonly permanent = false;
  constructor(readonly tool: string) {
    super(`${tool} could not be started; is it installed and on PATH (or set via env)?`);
  }
}

export class ToolFailedError extends AudioProcessingError {
  readonly code = 'AUDIO_TOOL_FAILED';
  readonly permanent = false;
  constructor(
    readonly tool: string,
    readonly exitCode: number | null,
    readonly exitSignal: NodeJS.Signals | null,
    /** The last part of the tool's stderr, bounded. */
    readonly stderrTail: string,
  ) {
    const how = exitSignal ? `was killed by ${exitSignal}` : `exited with code ${exitCode}`;
    super(`${tool} ${how}: ${lastLines(stderrTail, 3)}`);
  }
}

export class ProcessingAbortedError extends AudioProcessingError {
  readonly code = 'AUDIO_PROCESSING_ABORTED';
  readonly permanent = false;
  constructor(readonly tool: string) {
    super(`${tool} was stopped because processing was aborted`);
  }
}

export class InvalidAudioInputError extends AudioProcessingError {
  readonly code = 'INVALID_AUDIO';
  readonly permanent = true;
  constructor(
    readonly reason: string,
    readonly stderrTail = '',
  ) {
    super(`The input is not a readable audio file: ${reason}`);
  }
}

export class AudioTooLongError extends AudioProcessingError {
  readonly code = 'AUDIO_TOO_LONG';
  readonly permanent = true;
  constructor(
    readonly durationSec: number,
    readonly maxDurationSec: number,
  ) {
    super(`The audio is ${durationSec.toFixed(1)} s long; the limit is ${maxDurationSec} s`);
  }
}

export class MeasurementFailedError extends AudioProcessingError {
  readonly code = 'AUDIO_MEASUREMENT_FAILED';
  readonly permanent = false;
  constructor(
    readonly step: string,
    reason: string,
    readonly stderrTail: string,
  ) {
    super(`${step} failed: ${reason}`);
  }
}

/** ffmpeg printed a measurement this worker cannot read. */
export class MeasurementParseError extends Error {
  readonly code = 'MEASUREMENT_PARSE_FAILED';
  override readonly name = 'MeasurementParseError';
}

function lastLines(text: string, count: number): string {
  const lines = text.trim().split('\n').filter(Boolean);
  return lines.slice(-count).join(' | ') || '(no output)';
}
