import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { creditCost, type Pipeline } from '@tamp/proto';
import { type ApiClient, uploadBytes } from '../bench/bench-stack';
import { photo } from '../fixtures/media';
import { generateLongWav } from '../fixtures/speech';

/**
 * One kind of job a load run creates: its endpoint and body, whether the contract answers it
 * inline (200) or queues it (202), and what it costs. Uploads are made once per kind and fed to
 * every job of the kind (an upload may feed several jobs), so a run measures job creation and
 * processing, not MinIO's PUT throughput.
 */
export interface JobKind {
  name: string;
  pipeline: Pipeline;
  mode: 'inline' | 'queued';
  path: `/v1/${Pipeline}`;
  body: Record<string, unknown>;
  /** Credits one job of this kind reserves. */
  credits: number;
  /** The bytes the job works on (the upload, or the text as UTF-8): the same work run bare. */
  input: Buffer;
}

export const JOB_KIND_NAMES = [
  'text-inline',
  'text-queued',
  'image-inline',
  'image-avif',
  'audio-1s',
  'audio-3s',
  'audio-20s',
] as const;
export type JobKindName = (typeof JOB_KIND_NAMES)[number];

/** The audio kinds, and the seconds of generated speech each uploads. */
const SPEECH_SECONDS = { 'audio-1s': 1, 'audio-3s': 3, 'audio-20s': 20 } as const satisfies Partial<
  Record<JobKindName, number>
>;

/**
 * What making these kinds' inputs runs besides Node (tools profiles, see provisionTools): the
 * audio kinds speak their input with espeak-ng, which the stack itself never runs.
 */
export function workloadTools(names: readonly string[]): string[] {
  return names.some((name) => name in SPEECH_SECONDS) ? ['speech'] : [];
}

/** A paragraph of prose repeated to a size: trim has real work to do, the result is checkable. */
export function prose(bytes: number): string {
  const paragraph =
    'Tamp  compresses   audio, images and text…  It keeps every word,\tnumber (42) and emoji 🙂 in order.\n\n\n';
  return paragraph.repeat(Math.ceil(bytes / Buffer.byteLength(paragraph))).slice(0, bytes);
}

async function speechSeconds(seconds: number): Promise<Buffer> {
  const directory = await mkdtemp(join(tmpdir(), 'tamp-load-audio-'));
  try {
    const path = join(directory, 'speech.wav');
    await generateLongWav(path, seconds, { channels: 1 });
    return await readFile(path);
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}

/** Makes the inputs (real media, generated here), uploads them, and returns every job kind. */
export async function prepareWorkload(
  client: ApiClient,
  apiKey: string,
  names: readonly JobKindName[] = JOB_KIND_NAMES,
): Promise<JobKind[]> {
  const wanted = new Set(names);
  const kinds: JobKind[] = [];
  const inlineText = prose(2_000);
  const queuedText = prose(55_000);
  if (wanted.has('text-inline')) {
    kinds.push(textKind('text-inline', 'inline', inlineText));
  }
  if (wanted.has('text-queued')) kinds.push(textKind('text-queued', 'queued', queuedText));
  if (wanted.has('image-inline')) {
    const bytes = await photo(640, 480);
    const imageId = await uploadBytes(client, apiKey, 'load.jpg', bytes);
    kinds.push(
      uploadKind('image-inline', 'image', 'inline', { imageId, preset: 'thumbnail' }, bytes),
    );
  }
  if (wanted.has('image-avif')) {
    const bytes = await photo(64, 48);
    kinds.push(
      avifKind('image-avif', await uploadBytes(client, apiKey, 'small.jpg', bytes), bytes),
    );
  }
  for (const [name, seconds] of Object.entries(SPEECH_SECONDS) as [JobKindName, number][]) {
    if (!wanted.has(name)) continue;
    const bytes = await speechSeconds(seconds);
    kinds.push(podcastKind(name, await uploadBytes(client, apiKey, `${name}.wav`, bytes), bytes));
  }
  return kinds;
}

/**
 * One queued job per worker pipeline that keeps a worker busy for a second or more: the
 * stream's own queued jobs take milliseconds, too short for a fault to be sure of catching a
 * worker in the middle of one (the CI run at 307b740 missed the image worker for 30 s).
 */
export async function prepareLongJobs(
  client: ApiClient,
  apiKey: string,
): Promise<Record<Pipeline, JobKind>> {
  const image = await photo(2_400, 1_600);
  const speech = await speechSeconds(LONG_SPEECH_SECONDS);
  return {
    image: avifKind('image-long', await uploadBytes(client, apiKey, 'long.jpg', image), image),
    text: textKind('text-long', 'queued', prose(LONG_TEXT_BYTES)),
    audio: podcastKind('audio-long', await uploadBytes(client, apiKey, 'long.wav', speech), speech),
  };
}

/** Sizes of the long jobs: each takes one to a few seconds of one core with the static tools. */
const LONG_SPEECH_SECONDS = 60;
const LONG_TEXT_BYTES = 3_000_000;

function textKind(name: string, mode: 'inline' | 'queued', text: string): JobKind {
  return {
    name,
    pipeline: 'text',
    mode,
    path: '/v1/text',
    body: { text, preset: 'medium' },
    credits: creditCost('text', Buffer.byteLength(text)),
    input: Buffer.from(text, 'utf8'),
  };
}

/** A queued AVIF encode of an uploaded image. */
function avifKind(name: string, imageId: string, bytes: Buffer): JobKind {
  const operations = [{ type: 'encode', params: { format: 'avif', quality: 50 } }];
  return uploadKind(name, 'image', 'queued', { imageId, operations }, bytes);
}

/** A queued `podcast` job of an uploaded recording. */
function podcastKind(name: string, audioId: string, bytes: Buffer): JobKind {
  return uploadKind(name, 'audio', 'queued', { audioId, preset: 'podcast' }, bytes);
}

/** A job on an uploaded file: its path and cost follow from the pipeline and the bytes. */
function uploadKind(
  name: string,
  pipeline: 'image' | 'audio',
  mode: JobKind['mode'],
  body: Record<string, unknown>,
  bytes: Buffer,
): JobKind {
  return {
    name,
    pipeline,
    mode,
    path: `/v1/${pipeline}`,
    body,
    credits: creditCost(pipeline, bytes.length),
    input: bytes,
  };
}
