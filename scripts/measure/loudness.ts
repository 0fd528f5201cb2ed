/**
 * Integrated loudness (LUFS) as ffmpeg's own loudnorm filter reports it in its JSON print: the
 * check of a loudness target in tests, independent of the audio worker's parser of its ebur128
 * log, so a defect in that parser cannot also hide in the check of it.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { toolCommand } from '../infra/provision';

const run = promisify(execFile);

export async function integratedLoudness(
  path: string,
  ffmpegPath = toolCommand('ffmpeg'),
): Promise<number> {
  const args = ['-nostdin', '-hide_banner', '-i', `file:${path}`];
  const analysis = ['-af', 'loudnorm=print_format=json', '-f', 'null', '-'];
  const { stderr } = await run(ffmpegPath, [...args, ...analysis], {
    maxBuffer: 16 * 1024 * 1024,
    timeout: 120_000,
  });
  // The JSON is the last brace-delimited block ffmpeg writes.
  const json = stderr.slice(stderr.lastIndexOf('{'), stderr.lastIndexOf('}') + 1);
  const integrated = Number.parseFloat((JSON.parse(json) as { input_i: string }).input_i);
  if (!Number.isFinite(integrated)) throw new Error(`no integrated loudness for ${path}`);
  return integrated;
}
