import type { Msg } from '@nats-io/nats-core';
import {
  type InlineWorkReply,
  inlineWorkReply,
  type JobWorkMessage,
  jobWorkMessage,
  LIMITS,
} from '@tamp/proto';
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { DEADLINE_HEADER, type Responding, type Rpc, readMessage, sendHeartbeats } from '../rpc';
import { inConsumerSpan } from '../tracing';
import { jobWorkerMetrics } from './metrics';
import type { ResourceGate } from './resource-gate';
import { describeError, isPermanentError, type ProcessJob } from './types';
import { withJobWorkspace } from './workspace';

export interface InlineWorkOptions {
  /** Serves the subject (over NATS, and in memory to a job service in the same process). */
  rpc: Rpc;
  /** `topology.subjects.inline.<pipeline>`. */
  subject: string;
  /** Queue group: one worker of the service answers each request. Use the service name. */
  queue: string;
  processJob: ProcessJob;
  logger: Logger;
  metrics: Registry;
  /** Requests processed at once; up to as many more wait their turn. */
  concurrency: number;
  /** Parent of the per-job temp directories. */
  tempDir: string;
  /** When the machine can carry no more, a request that would wait is declined at once. */
  resourceGate?: ResourceGate;
}

export interface InlineWorkServer {
  /** Stops taking requests; running ones get `graceMs` to answer, then are abandoned unanswered. */
  stop(options?: { graceMs?: number }): Promise<void>;
}

/**
 * Serves `work.<pipeline>.inline`: the request is a JobWorkMessage, the reply an
 * InlineWorkReply, computed by the same `processJob` as queued work. A failure answers
 * `failed`, flagged `retryable` unless it is permanent (the queued worker's rule), so the job
 * service queues a job that another attempt may still complete. Under load the answer is
 * `declined` at once (every slot busy and as many waiting, or the machine saturated), and a
 * request whose deadline passed while it waited is dropped unanswered: either way the job
 * service queues the job, instead of this worker running work nobody waits for any more.
 */
export function serveInlineWork(options: InlineWorkOptions): InlineWorkServer {
  const logger = options.logger.child({ inline: options.subject });
  const metrics = jobWorkerMetrics(options.metrics);
  const { concurrency, tempDir } = options;
  const limit = pLimit(concurrency);
  // The job service stops waiting after this (or the request's own deadline) and queues the
  // job instead, so work still running then is aborted unanswered.
  const timeoutMs = LIMITS.inlineReplyTimeoutMs;
  const running = new Map<Promise<void>, AbortController>();

  const respond = (msg: Msg, reply: InlineWorkReply) => {
    if (msg.reply) msg.respond(JSON.stringify(inlineWorkReply.parse(reply)));
  };

  const declineReason = (): string | null => {
    if (limit.activeCount < concurrency) return null;
    if (limit.pendingCount >= concurrency) return 'every inline slot is taken';
    const blockedBy = options.resourceGate?.blockedBy() ?? null;
    return blockedBy === null ? null : `the worker is saturated (${blockedBy})`;
  };

  const run = async (msg: Msg, work: JobWorkMessage, controller: AbortController) => {
    const deadline = Number(msg.headers?.get(DEADLINE_HEADER)) || Date.now() + timeoutMs;
    if (Date.now() >= deadline) {
      metrics.processed.inc({ mode: 'inline', outcome: 'skipped' });
      return;
    }
    const log = logger.child({ jobId: work.jobId, pipeline: work.pipeline });
    const startedAt = performance.now();
    metrics.inFlight.inc({ mode: 'inline' });
    const timer = setTimeout(
      () => controller.abort(new Error('inline processing timed out')),
      Math.min(timeoutMs, deadline - Date.now()),
    );
    let outcome: 'completed' | 'failed' | 'retried' | 'handed_back' = 'failed';
    try {
      const result = await withJobWorkspace(tempDir, work.jobId, (workspace) =>
        options.processJob(work, {
          workspace,
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
      metrics.inFlight.dec({ mode: 'inline' });
      metrics.processed.inc({ mode: 'inline', outcome });
      metrics.duration.observe({ mode: 'inline', outcome }, (performance.now() - startedAt) / 1000);
    }
  };

  const accept = (msg: Msg) => {
    const read = readMessage(msg, jobWorkMessage);
    if (!read.ok) {
      respond(msg, {
        status: 'failed',
        error: 'The inline work request is invalid',
        retryable: false,
      });
      metrics.processed.inc({ mode: 'inline', outcome: 'rejected' });
      return;
    }
    const reason = declineReason();
    if (reason !== null) {
      respond(msg, { status: 'declined', reason });
      metrics.processed.inc({ mode: 'inline', outcome: 'declined' });
      return;
    }
    const controller = new AbortController();
    // From acceptance on, also while waiting for a slot: the job service tells a worker at work
    // from one that died with the request.
    const stopHeartbeats = sendHeartbeats(msg);
    const done: Promise<void> = limit(() =>
      inConsumerSpan(options.queue, msg, () => run(msg, read.value, controller)),
    )
      .catch((crash: unknown) => logger.error({ err: crash }, 'inline handling crashed'))
      .finally(() => {
        stopHeartbeats();
        running.delete(done);
      });
    running.set(done, controller);
  };

  const subscription: Responding = options.rpc.respondTo(
    options.subject,
    options.queue,
    (error, msg) => {
      if (error !== null) {
        logger.error({ err: error }, 'inline subscription error');
        return;
      }
      accept(msg);
    },
  );
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
