import type { KeepInputFacts } from '@tamp/kit';
import {
  AUTO_AUDIO_FORMAT,
  type AudioEncodeOperation,
  type AudioFormat,
  audioOutputFormats,
} from '@tamp/proto';
import type { ProcessingOperation } from './audio-operations';
import type { AudioProbe } from './measurement-parsers';

/**
 * What never larger (docs/decisions.md#never-larger-than-the-input) means for an audio job, in
 * the terms of the rule every pipeline shares (keepsInput in @tamp/kit):
 * - only an MP3 input can be kept: WAV is no output format;
 * - the chain must be the encode alone: a trim, a level or a speed-up asked for is a promise
 *   the input does not keep; a fixed encode must ask for the input's channels (auto's channels
 *   are its own choice, not the client's);
 * - tags beyond the encoder's name and cover art are dropped by the pipeline, so such an input
 *   is rewritten even when that is larger.
 */
export function keepInputFacts(job: {
  input: AudioProbe;
  processing: readonly ProcessingOperation[];
  encode: AudioEncodeOperation;
  inputSize: number;
  outputSize: number;
}): KeepInputFacts<AudioFormat> {
  const { input, processing, encode } = job;
  const auto = encode.params.format === AUTO_AUDIO_FORMAT;
  return {
    inputSize: job.inputSize,
    outputSize: job.outputSize,
    inputFormat: input.formatName === 'mp3' && input.codec === 'mp3' ? 'mp3' : null,
    accepted: audioOutputFormats(encode.params),
    sameContent: processing.length === 0 && (auto || encode.params.channels === input.channels),
    inputNeedsRewrite: input.carriesMetadata,
  };
}
