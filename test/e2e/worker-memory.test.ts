import {
  formatTable,
  type ImageJobFigures,
  type MemoryFigures,
  mb,
  measureImageJob,
  measureWorkerMemory,
} from '@tamp/scripts/measure/worker-memory';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeSettingsFor } from '../../services/worker-image/src/domain/encode-settings';
import {
  decoderMemoryClass,
  type ImageMemoryPlan,
  imageMemoryDemand,
  planWithinMemory,
} from '../../services/worker-image/src/domain/memory-model';
import { startTestStack, type TestStack } from '../support/stack';

/**
 * The memory bounds, measured through the whole stack (the same measurement as
 * `node --import tsx scripts/measure/worker-memory.ts`): a ~100 MB WAV and a ~25 MB JPEG keep
 * their worker under 400 MB (VmRSS sampled from /proc every 100 ms, and VmHWM), and worker-image
 * does not grow over 500 consecutive mixed jobs (RSS within 1.5× of its RSS after the first 50).
 *
 * The services run from the bundle a container runs (scripts/build/bundle.ts), not through
 * tsx. The full measurement takes about 5 minutes on 2 cores (the WAV alone is ~90 s of
 * ffmpeg), over the suite's per-file budget, so it runs only when asked:
 * MEASURE_WORKER_MEMORY=1 npx vitest run test/e2e/worker-memory.test.ts
 *
 * Every run (npm test) checks worker-image on a smaller image instead: one 12 MP JPEG, whose
 * need the memory model (services/worker-image/src/domain/memory-model.ts) puts at ~130 MiB.
 * The worker must grow by no more than that figure, which it reserves from its budget before
 * decoding: the accounting that keeps the full-size job under 400 MB (the budget, 320 MiB, plus
 * the idle worker) holds only if the model's figures do.
 */
const LIMIT = 400 * 1024 * 1024;
const MiB = 1024 * 1024;

const enabled = process.env.MEASURE_WORKER_MEMORY === '1';

/** 12 MP of noisy photo at q98, the content the model's figures were measured on. */
const CI_JPEG = { width: 4000, height: 3000, quality: 98 };
/** The chill preset's chain, spelled out so the model is asked about exactly this job. */
const CI_ENCODE = { format: 'webp', quality: 85, effort: 4 } as const;
/** IMAGE_MEMORY_BUDGET_MB's default (services/worker-image/src/config.ts), in bytes. */
const DEFAULT_IMAGE_BUDGET_BYTES = 320 * MiB;

describe('worker-image memory on a 12 MP JPEG (every run)', () => {
  let stack: TestStack;
  let image: ImageJobFigures;
  let model: ImageMemoryPlan;

  beforeAll(async () => {
    stack = await startTestStack({ runtime: 'bundle' });
    const account = await stack.createAccount({ plan: 'pro' });
    image = await measureImageJob(stack, {
      apiKey: account.apiKey,
      jpeg: CI_JPEG,
      chain: { operations: [{ type: 'encode', params: CI_ENCODE }] },
      log: (line) => console.info(line),
    });
    model = planWithinMemory(
      imageMemoryDemand({
        decoder: decoderMemoryClass('jpeg', image.input.progressive),
        input: image.input,
        frames: 1,
        resizes: [],
        steps: [],
      }),
      encodeSettingsFor(CI_ENCODE),
      DEFAULT_IMAGE_BUDGET_BYTES,
    );
    console.info(
      `model: ${mb(model.estimatedBytes)} for the job; worker grew by ${mb(image.memory.hwm - image.memory.startRss)} (VmHWM ${mb(image.memory.hwm)} over ${mb(image.memory.startRss)} before the job)`,
    );
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  });

  it('grows worker-image by no more than the memory model predicts, and keeps it under 400 MB', () => {
    expect(image.status, image.error).toBe('completed');
    expect(image.input).toMatchObject({ width: CI_JPEG.width, height: CI_JPEG.height });
    // A clear figure: the whole requested encoder mode, well above the noise of a process' RSS.
    expect(model.steppedDown).toBe(false);
    expect(model.estimatedBytes).toBeGreaterThan(100 * MiB);
    expect(image.memory.samples).toBeGreaterThan(3);
    const grown = image.memory.hwm - image.memory.startRss;
    expect(grown, mb(grown)).toBeLessThanOrEqual(model.estimatedBytes);
    // And the job was measured at all: most of the predicted memory was really used.
    expect(grown, mb(grown)).toBeGreaterThan(model.estimatedBytes / 2);
    expect(image.memory.peakRss, mb(image.memory.peakRss)).toBeLessThan(LIMIT);
    expect(image.memory.hwm, mb(image.memory.hwm)).toBeLessThan(LIMIT);
  });
});

describe.runIf(enabled)('worker memory', () => {
  let stack: TestStack;
  let figures: MemoryFigures;

  beforeAll(async () => {
    // As deployed: built bundles on plain node (tsx adds ~60 MiB to every process).
    stack = await startTestStack({
      runtime: 'bundle',
      // 500 jobs and their long-polls in a couple of minutes: lift the pro plan's request rate.
      env: { PLANS_JSON: JSON.stringify({ pro: { rateLimitPerMinute: 100_000 } }) },
    });
    const account = await stack.createAccount({ plan: 'pro' });
    figures = await measureWorkerMemory(stack, {
      apiKey: account.apiKey,
      log: (line) => console.info(line),
    });
    console.info(formatTable(figures));
  }, 600_000);

  afterAll(async () => {
    await stack?.stop();
  });

  it('processes a just-under-100 MiB WAV with worker-audio (and its ffmpeg) under 400 MB', () => {
    const { audio } = figures;
    expect(audio.inputBytes).toBeGreaterThan(100 * 1_000_000);
    expect(audio.inputBytes).toBeLessThan(100 * 1024 * 1024);
    expect(audio.status, audio.error).toBe('completed');
    expect(audio.memory.samples).toBeGreaterThan(10);
    expect(audio.memory.peakRss, mb(audio.memory.peakRss)).toBeLessThan(LIMIT);
    expect(audio.memory.hwm, mb(audio.memory.hwm)).toBeLessThan(LIMIT);
    expect(audio.memory.peakTreeRss, mb(audio.memory.peakTreeRss)).toBeLessThan(LIMIT);
    expect(audio.memory.peakChildHwm, mb(audio.memory.peakChildHwm)).toBeLessThan(LIMIT);
  });

  it('processes a ~25 MB JPEG with worker-image under 400 MB', () => {
    const { image } = figures;
    expect(image.inputBytes).toBeGreaterThan(20 * 1_000_000);
    expect(image.status, image.error).toBe('completed');
    expect(image.memory.samples).toBeGreaterThan(3);
    expect(image.memory.peakRss, mb(image.memory.peakRss)).toBeLessThan(LIMIT);
    expect(image.memory.hwm, mb(image.memory.hwm)).toBeLessThan(LIMIT);
  });

  it('keeps worker-image RSS after 500 mixed jobs within 1.5× of its RSS after 50', () => {
    const { series } = figures;
    expect(series.failed).toEqual([]);
    expect(series.completed).toBe(500);
    expect(series.inline).toBeGreaterThan(0);
    expect(series.queued).toBeGreaterThan(0);
    expect(series.restarts).toBe(0);
    expect(series.ratio).toBeLessThanOrEqual(1.5);
  });
});
