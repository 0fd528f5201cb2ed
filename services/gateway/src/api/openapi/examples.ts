import {
  AUDIO_AUTO_ENCODINGS,
  compressionRatio,
  describeOperations,
  describePresets,
  type JobRequestBodies,
  mintedAt,
  PIPELINE_DEFINITIONS,
  PIPELINES,
  type Pipeline,
  type PublicJob,
  type PublicUpload,
  type PublicUsage,
  type PublicWebhookEvent,
  type publicJobList,
  storageKeys,
} from '@tamp/proto';
import type { z } from 'zod';
import { capitalized } from '../routes/job-creation';

/**
 * The document's examples. Each one is valid for its schema (test/openapi.test.ts parses every
 * one with the proto schema the document names, and sends every request body to a gateway), so
 * the reference page's "Try it out" starts from a request that passes validation.
 */

export interface NamedExample<Value = unknown> {
  summary: string;
  value: Value;
}
export type NamedExamples<Value = unknown> = Record<string, NamedExample<Value>>;

/**
 * Ids in their documented format (docs/decisions.md#ids). They belong to no account, so a
 * request that names one is answered UPLOAD_NOT_FOUND or JOB_NOT_FOUND, never a validation error.
 */
export const EXAMPLE_IDS = {
  account: 'acct_01JQ7Z9X2W4V6T8S0R2Q4P6N8M',
  audioUpload: 'upl_01JQ7ZJ2A4B6C8D0E2F4G6H8JK',
  imageUpload: 'upl_01JQ7ZK3M9V4T8R2N6P5W0XAYB',
  textUpload: 'upl_01JQ7ZK9D3F5G7H9J1K3M5N7P9',
  job: 'job_01JQ7ZM0B5C8D2E4F6G8H0JKMN',
  laterJob: 'job_01JQ7ZP4R6S8T0V2W4X6Y8Z0AB',
} as const;

/** Times that agree with the ids: an id's ULID says when it was minted. */
const at = (id: string, plusMs = 0) => new Date(mintedAt(id) + plusMs).toISOString();
const JOB_CREATED_AT = at(EXAMPLE_IDS.job);
const JOB_COMPLETED_AT = at(EXAMPLE_IDS.job, 3_200);

const WEBHOOK_URL = 'https://example.com/hooks/tamp';

const IMAGE_OUTPUT_KEY = storageKeys.result(EXAMPLE_IDS.account, EXAMPLE_IDS.job, 'webp');
const IMAGE_SIZES = { inputSize: 2_400_000, outputSize: 431_870 };

const completedImageJob: PublicJob = {
  id: EXAMPLE_IDS.job,
  status: 'completed',
  result: {
    outputUrl:
      `https://storage.example.com/tamp/${IMAGE_OUTPUT_KEY}` +
      '?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=3600&X-Amz-Signature=3f9a…',
    metrics: {
      ...IMAGE_SIZES,
      compressionRatio: compressionRatio(IMAGE_SIZES.inputSize, IMAGE_SIZES.outputSize),
      operationsApplied: ['resize', 'encode'],
      processingMs: 412,
      width: 2560,
      height: 1707,
      format: 'webp',
    },
  },
};

const TEXT_IN = 'Dear   team,\n\n\nthe   report is   attached .  Thanks!!  ';
const TEXT_OUT = 'Dear team,\n\nthe report is attached. Thanks!';
const textBytes = (text: string) => Buffer.byteLength(text, 'utf8');

const completedTextJob: PublicJob = {
  id: EXAMPLE_IDS.job,
  status: 'completed',
  result: {
    outputText: TEXT_OUT,
    metrics: {
      inputSize: textBytes(TEXT_IN),
      outputSize: textBytes(TEXT_OUT),
      compressionRatio: compressionRatio(textBytes(TEXT_IN), textBytes(TEXT_OUT)),
      operationsApplied: ['trim'],
      processingMs: 3,
      tokensIn: 17,
      tokensOut: 11,
    },
  },
};

const createdJob: PublicJob = { id: EXAMPLE_IDS.job, status: 'created' };

/** Each pipeline's request bodies: a preset, and a chain of operations. */
const JOB_REQUESTS: { [P in Pipeline]: NamedExamples<JobRequestBodies[P]> } = {
  audio: {
    preset: {
      summary: 'A preset',
      value: { audioId: EXAMPLE_IDS.audioUpload, preset: 'podcast' },
    },
    operations: {
      summary: 'Operations, and a webhook when the job finishes',
      value: {
        audioId: EXAMPLE_IDS.audioUpload,
        operations: [
          { type: 'trim-silence', params: { aggressiveness: 0.6 } },
          { type: 'normalize', params: { targetLevel: -16 } },
          { type: 'encode', params: { format: 'mp3', bitrate: 64 } },
        ],
        webhookUrl: WEBHOOK_URL,
      },
    },
    auto: {
      summary: `auto: Opus for speech (${AUDIO_AUTO_ENCODINGS.speech.bitrate} kbps mono, voip) or music (${AUDIO_AUTO_ENCODINGS.musicStereo.bitrate} kbps stereo, audio), never larger than the input`,
      value: {
        audioId: EXAMPLE_IDS.audioUpload,
        operations: [{ type: 'encode', params: { format: 'auto' } }],
      },
    },
  },
  image: {
    preset: {
      summary: 'A preset',
      value: { imageId: EXAMPLE_IDS.imageUpload, preset: 'medium' },
    },
    operations: {
      summary: 'Operations: a 1200 px thumbnail as AVIF (always queued)',
      value: {
        imageId: EXAMPLE_IDS.imageUpload,
        operations: [
          { type: 'resize', params: { width: 1200, height: 1200, fit: 'cover' } },
          { type: 'encode', params: { format: 'avif', quality: 60 } },
        ],
      },
    },
    auto: {
      summary:
        'auto: the smallest of AVIF, WebP and JPEG (lossless for graphics) reaching SSIM 0.95, never larger than the input',
      value: {
        imageId: EXAMPLE_IDS.imageUpload,
        operations: [
          { type: 'resize', params: { width: 2048, height: 2048 } },
          {
            type: 'encode',
            params: { format: 'auto', ssim: 0.95, accept: ['avif', 'webp', 'jpeg'] },
          },
        ],
      },
    },
  },
  text: {
    inlineText: {
      summary: 'Inline text and a preset (inline path when at most 50 KB)',
      value: { text: TEXT_IN, preset: 'medium' },
    },
    file: {
      summary: 'An uploaded .pdf or .txt and operations (always queued)',
      value: {
        fileId: EXAMPLE_IDS.textUpload,
        operations: [{ type: 'trim', params: { intensity: 70 } }, { type: 'json-to-toon' }],
      },
    },
  },
};

/** The 200 of the pipelines with an inline path; audio is always queued. */
const INLINE_JOBS: Partial<Record<Pipeline, PublicJob>> = {
  image: completedImageJob,
  text: completedTextJob,
};

const upload: PublicUpload = {
  id: EXAMPLE_IDS.imageUpload,
  uploadUrl:
    `https://storage.example.com/tamp/${storageKeys.upload(EXAMPLE_IDS.account, EXAMPLE_IDS.imageUpload)}` +
    '?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=900&X-Amz-Signature=8c1e…',
  contentType: 'image/jpeg',
  uploadUrlExpiresIn: 900,
  expiresAt: at(EXAMPLE_IDS.imageUpload, 24 * 60 * 60 * 1000),
};

const jobList: z.input<typeof publicJobList> = {
  items: [
    {
      id: EXAMPLE_IDS.laterJob,
      type: 'audio',
      status: 'processing',
      name: 'episode-12.wav',
      createdAt: at(EXAMPLE_IDS.laterJob),
    },
    {
      id: EXAMPLE_IDS.job,
      type: 'image',
      status: 'completed',
      name: 'holiday.jpg',
      metrics: {
        ...IMAGE_SIZES,
        compressionRatio: compressionRatio(IMAGE_SIZES.inputSize, IMAGE_SIZES.outputSize),
      },
      createdAt: JOB_CREATED_AT,
      completedAt: JOB_COMPLETED_AT,
    },
  ],
  nextCursor: 'eyJiZWZvcmUiOiJqb2JfMDFKUTdaTTBCNUM4RDJFNEY2RzhIMEpLTU4ifQ',
};

/** The calendar month of the example job: the period of an account without a billing anchor. */
function monthOf(instant: string): { start: string; end: string } {
  const date = new Date(instant);
  const start = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
  const end = Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
  return { start: new Date(start).toISOString(), end: new Date(end).toISOString() };
}

const usage: PublicUsage = {
  period: monthOf(JOB_CREATED_AT),
  audio: { requests: 12, inputBytes: 184_549_376, minutes: 96.25 },
  text: { requests: 240, inputBytes: 3_145_728, characters: 3_088_120 },
  image: { requests: 1_310, inputBytes: 2_936_012_800, megapixels: 15_720.512 },
  video: { requests: 0, inputBytes: 0, minutes: 0 },
};

/** What each operation's examples are: its request body's, and the `data` of each success. */
export interface OperationExamples {
  /** Path and query parameters, by name: what "Try it out" fills in. */
  parameters?: Record<string, unknown>;
  /** By name; the reference page's "Try it out" starts from the first. */
  requestBody?: NamedExamples;
  /** By status as the document writes it ('200', '202'): the payload inside `data`. */
  responses: Record<string, NamedExamples>;
}

const one = (summary: string, value: unknown): NamedExamples => ({ example: { summary, value } });

function pipelineExamples(pipeline: Pipeline): Record<string, OperationExamples> {
  const name = capitalized(pipeline);
  const definition = PIPELINE_DEFINITIONS[pipeline];
  const inlineJob = INLINE_JOBS[pipeline];
  return {
    [`create${name}Job`]: {
      requestBody: JOB_REQUESTS[pipeline],
      responses: {
        ...(inlineJob && { '200': one('Completed inline', inlineJob) }),
        '202': one('Queued', createdJob),
      },
    },
    // The catalogues as the routes answer them: the same proto functions.
    [`list${name}Presets`]: {
      responses: { '200': one(`The ${pipeline} presets`, describePresets(definition)) },
    },
    [`list${name}Operations`]: {
      responses: { '200': one(`The ${pipeline} operations`, describeOperations(definition)) },
    },
  };
}

/** Every operation's examples, by operationId. */
export const OPERATION_EXAMPLES: Record<string, OperationExamples> = {
  createUpload: {
    requestBody: one('A 2.4 MB JPEG', { filename: 'holiday.jpg', size: 2_400_000 }),
    responses: { '200': one('The upload URL', upload) },
  },
  ...Object.fromEntries(
    PIPELINES.flatMap((pipeline) => Object.entries(pipelineExamples(pipeline))),
  ),
  getJob: {
    parameters: { id: EXAMPLE_IDS.job },
    responses: {
      '200': {
        completed: { summary: 'Completed', value: completedImageJob },
        processing: {
          summary: 'Still running',
          value: { id: EXAMPLE_IDS.job, status: 'processing' },
        },
        failed: {
          summary: 'Failed (credits refunded)',
          value: {
            id: EXAMPLE_IDS.job,
            status: 'failed',
            error: 'The file is not a decodable image',
          },
        },
      },
    },
  },
  listJobs: { responses: { '200': one('A page with more after it', jobList) } },
  getCurrentUsage: { responses: { '200': one('This month so far', usage) } },
};

/** One delivery of each event the webhook service sends. */
export const WEBHOOK_EXAMPLES: Record<
  PublicWebhookEvent['event'],
  NamedExample<PublicWebhookEvent>
> = {
  'job.completed': {
    summary: 'An image job completed',
    value: {
      event: 'job.completed',
      job: {
        id: EXAMPLE_IDS.job,
        type: 'image',
        status: 'completed',
        result: {
          outputKey: IMAGE_OUTPUT_KEY,
          metrics: {
            ...IMAGE_SIZES,
            compressionRatio: compressionRatio(IMAGE_SIZES.inputSize, IMAGE_SIZES.outputSize),
          },
        },
        error: null,
        createdAt: JOB_CREATED_AT,
        completedAt: JOB_COMPLETED_AT,
      },
    },
  },
  'job.failed': {
    summary: 'An audio job failed after its attempts',
    value: {
      event: 'job.failed',
      job: {
        id: EXAMPLE_IDS.laterJob,
        type: 'audio',
        status: 'failed',
        result: null,
        error: 'The file is not a decodable WAV',
        createdAt: at(EXAMPLE_IDS.laterJob),
        completedAt: at(EXAMPLE_IDS.laterJob, 45_000),
      },
    },
  },
};
