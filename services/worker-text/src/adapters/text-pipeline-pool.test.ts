import { once } from 'node:events';
import type { Worker } from 'node:worker_threads';
import type { TextOperation } from '@tamp/proto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { largeDocument } from '../../test/support/large-document';
import {
  generateCharacterSoup,
  generateDocument,
  seededRandom,
} from '../../test/support/random-document';
import { runTextPipeline } from '../domain/pipeline';
import { startTextPipelinePool, type TextPipelinePool } from './text-pipeline-pool';

/** The spec's presets plus each operation alone. */
const OPERATION_LISTS: readonly (readonly TextOperation[])[] = [
  [{ type: 'trim', params: { intensity: 30 } }],
  [{ type: 'trim', params: { intensity: 70 } }],
  [
    { type: 'trim', params: { intensity: 80 } },
    { type: 'json-to-toon', params: {} },
  ],
  [{ type: 'json-to-toon', params: {} }],
];

let pool: TextPipelinePool;
beforeAll(async () => {
  pool = await startTextPipelinePool({ threads: 2 });
});
afterAll(async () => {
  await pool?.close();
});

const noSignal = () => new AbortController().signal;

describe('text pipeline pool', () => {
  it('gives exactly the in-thread pipeline result', async () => {
    const random = seededRandom(42);
    const texts = [
      '',
      largeDocument(200_000, 7),
      ...Array.from({ length: 12 }, () => generateDocument(random, { strayMarkers: true }).text),
      ...Array.from({ length: 4 }, () => generateCharacterSoup(random)),
    ];
    const cases = texts.flatMap((text) =>
      OPERATION_LISTS.map((operations) => ({ text, operations })),
    );
    // All at once, so both threads and the queue are used.
    const results = await Promise.all(
      cases.map(({ text, operations }) => pool.run(text, operations, noSignal())),
    );
    cases.forEach(({ text, operations }, i) => {
      expect(results[i]).toEqual(runTextPipeline(text, operations));
    });
  });

  it('rejects with the error the pipeline throws', async () => {
    const operations: TextOperation[] = [{ type: 'trim', params: { intensity: 101 } }];
    await expect(pool.run('text', operations, noSignal())).rejects.toThrow(
      'trim intensity must be between 0 and 100, got 101',
    );
  });

  it('rejects at once for an already aborted signal', async () => {
    const controller = new AbortController();
    controller.abort(new Error('The worker is shutting down'));
    await expect(pool.run('text', [], controller.signal)).rejects.toMatchObject({
      name: 'AbortError',
    });
  });

  it('ends the thread of a running job when its signal aborts', async () => {
    const threads: Worker[] = [];
    const onThread = (thread: Worker) => threads.push(thread);
    process.on('worker', onThread);
    const single = await startTextPipelinePool({ threads: 1 }).finally(() =>
      process.off('worker', onThread),
    );
    try {
      expect(threads).toHaveLength(1);
      const thread = threads[0]!;
      const exited = once(thread, 'exit');
      const controller = new AbortController();
      const idle = thread.performance.eventLoopUtilization();
      // Several seconds of work: still running when the abort comes.
      const running = single.run(
        largeDocument(5_000_000),
        [
          { type: 'trim', params: { intensity: 80 } },
          { type: 'json-to-toon', params: {} },
        ],
        controller.signal,
      );
      // The abort must find the job in the thread: wait until the thread has been busy (its
      // event loop, idle before, active for 100 ms since the job was sent).
      await vi.waitFor(
        () => expect(thread.performance.eventLoopUtilization(idle).active).toBeGreaterThan(100),
        { timeout: 10_000, interval: 20 },
      );
      controller.abort(new Error('inline processing timed out'));
      await expect(running).rejects.toMatchObject({ name: 'AbortError' });
      // Without termination the thread would finish the job and then idle on: no exit.
      await exited;
      // The pool replaced the thread and keeps working.
      expect((await single.run('a  b', OPERATION_LISTS[0]!, noSignal())).text).toBe('a b');
    } finally {
      await single.close();
    }
  });
});
