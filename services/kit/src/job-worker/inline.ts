import { tmpdir } from 'node:os';
import type { Msg, NatsConnection, Subscription } from '@nats-io/nats-core';
import { type InlineWorkReply, inlineWorkReply, jobWorkMessage, LIMITS } from '@tamp/proto';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { jobWorkerMetrics } from './metrics';
import { describeError, isPermanentError, type ProcessJob } from './types';
import { withJobWorkspace } from './workspace';

export interface InlineWorkOptions {
  nats: NatsConnection;
  /** `topology.subjects.inline.<pipeline>`. */
  subject: string;
  /** Queue group: one worker of the service answers each request. Use the service name. */
  queue: string;
  processJob: ProcessJob;
  logger: Logger;
  metrics: Registry;
  /** Requests processed at once; the others wait their turn. Default 4. */
  concurrency?: number;
  tempDir?: string;
  /**
   * The job service stops waiting after LIMITS.inlineReplyTimeoutMs and queues the job
   * instead, so work still running then is aborted and left unanswered.
   */
  timeoutMs?: number;
}

export interface InlineWorkServer {
  /** Stops taking requests; running ones get `graceMs` to answer, then are abandoned unanswered. */
  stop(options?: { graceMs?: number }): Promise<void>;
}

/**
 * Serves `work.<pipeline>.inline`: the request is a JobWorkMessage, the reply an
 * InlineWorkReply, computed by the same `processJob` as queued work. A failure answers
 * `failed` with the error text, flagged `retryable` unless it is permanent (the queued worker's
 * rule), so the job service queues a job that another attempt may still complete. Work that
 * is aborted (timeout, shutdown) gets no answer, so the job service falls back to the queue.
 */
export function serveInlineWork(options: InlineWorkOptions): InlineWorkServer {
  const logger = options.logger.child({ inline: options.subject });
  const metrics = jobWorkerMetrics(options.metrics);
  const concurrency = options.concurrency ?? 4;
  const tempDir = options.tempDir ?? tmpdir();
  const timeoutMs = options.timeoutMs ?? LIMITS.inlineReplyTimeoutMs;
  const running = new Map<Promise<void>, AbortController>();
  const waiting: (() => void)[] = [];
  let active = 0;

  const acquire = async () => {
    if (active < concurrency) {
      active++;
      return;
    }
    await new Promise<void>((resolve) => waiting.push(resolve));
  };
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else active--;
  };

  const respond = (msg: Msg, reply: InlineWorkReply) => {
    if (msg.reply) msg.respond(JSON.stringify(inlineWorkReply.parse(reply)));
  };

  const handle = async (msg: Msg, controller: AbortController) => {
    let body: unknown;
    try {
      body = msg.json();
    } catch {
      body = undefined;
    }
    const parsed = jobWorkMessage.safeParse(body);
    if (!parsed.success) {
      respond(msg, {
        status: 'failed',
        error: 'The inline work request is invalid',
        retryable: false,
      });
      metrics.processed.inc({ mode: 'inline', outcome: 'rejected' });
      return;
    }
    const work = parsed.data;
    const log = logger.child({ jobId: work.jobId, pipeline: work.pipeline });
    await acquire();
    const startedAt = performance.now();
    metrics.inFlight.inc({ mode: 'inline' });
    const timer = setTimeout(
      () => controller.abort(new Error('inline processing timed out')),
      timeoutMs,
    );
    let outcome: 'completed' | 'failed' | 'retried' | 'handed_back' = 'failed';
    try {
      const result = await withJobWorkspace(tempDir, work.jobId, (workDir) =>
        options.processJob(work, {
          workDir,
          signal: controller.signal,
          heartbeat: () => {},
          attempt: 1,
          mode: 'inline',
          logger: log,
        }),
      );
      if (controller.signal.aborted) {
        outcome = 'handed_back';
        return;
      }
      respond(msg, { status: 'completed', ...result });
      outcome = 'completed';
    } catch (error) {
      if (controller.signal.aborted) {
        log.warn({ reason: String(controller.signal.reason) }, 'inline work abandoned');
        outcome = 'handed_back';
        return;
      }
      const retryable = !isPermanentError(error);
      log.warn({ err: error, retryable }, 'inline job failed');
      respond(msg, { status: 'failed', error: describeError(error), retryable });
      // A retryable failure is not the job's end: the job service queues it for another try.
      if (retryable) outcome = 'retried';
    } finally {
      clearTimeout(timer);
      release();
      metrics.inFlight.dec({ mode: 'inline' });
      metrics.processed.inc({ mode: 'inline', outcome });
      metrics.duration.observe({ mode: 'inline', outcome }, (performance.now() - startedAt) / 1000);
    }
  };

  const subscription: Subscription = options.nats.subscribe(options.subject, {
    queue: options.queue,
    callback: (error, msg) => {
      if (error !== null) {
        logger.error({ err: error }, 'inline subscription error');
        return;
      }
      const controller = new AbortController();
      const done: Promise<void> = handle(msg, controller)
        .catch((crash) => logger.error({ err: crash }, 'inline handling crashed'))
        .finally(() => running.delete(done));
      running.set(done, controller);
    },
  });
  logger.info({ queue: options.queue, concurrency }, 'serving inline work');

  let stopped: Promise<void> | undefined;
  const stop = async (graceMs: number) => {
    if (!subscription.isClosed())
      await subscription.drain().catch(() => subscription.unsubscribe());
    let graceTimer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...running.keys()]),
      new Promise((resolve) => {
        graceTimer = setTimeout(resolve, graceMs);
      }),
    ]);
    clearTimeout(graceTimer);
    for (const controller of running.values()) {
      controller.abort(new Error('The worker is shutting down'));
    }
  };

  return {
    stop(stopOptions = {}) {
      stopped ??= stop(stopOptions.graceMs ?? timeoutMs);
      return stopped;
    },
  };
}
