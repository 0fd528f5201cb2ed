import { type JetStreamClient, jetstream } from '@nats-io/jetstream';
import { headers as natsHeaders } from '@nats-io/nats-core';
import {
  DEADLINE_HEADER,
  destinationOf,
  inProducerSpan,
  type Logger,
  type NatsConnection,
  type Rpc,
} from '@tamp/kit';
import {
  type InlineWorkReply,
  inlineWorkReply,
  type JobEvent,
  type JobNotification,
  type JobWorkMessage,
  jobEvent,
  jobWorkMessage,
  messageIds,
  type Topology,
} from '@tamp/proto';

/**
 * Everything the job service sends over NATS: work on JOBS (dedup id = job id), terminal events
 * on EVENTS (dedup id = `<jobId>:<event>`), long-poll notifications, and inline work requests.
 * Bodies are validated against proto before they leave, as receivers validate them on arrival.
 */
export class JobMessaging {
  private readonly js: JetStreamClient;

  constructor(
    private readonly nats: NatsConnection,
    private readonly topology: Topology,
    private readonly logger: Logger,
    /** Its heartbeat timing and reply inbox serve the inline requests too. */
    private readonly rpc: Rpc,
  ) {
    this.js = jetstream(nats);
  }

  async publishWork(work: JobWorkMessage): Promise<void> {
    const body = jobWorkMessage.parse(work);
    const subject = this.topology.subjects.jobs[body.pipeline];
    const headers = natsHeaders();
    await inProducerSpan(destinationOf(this.topology, subject), headers, () =>
      this.js.publish(subject, JSON.stringify(body), {
        msgID: messageIds.job(body.jobId),
        headers,
      }),
    );
  }

  /** True when EVENTS stored the event now; false when it had it already (a redo it dropped). */
  async publishEvent(event: JobEvent): Promise<boolean> {
    const body = jobEvent.parse(event);
    const subject =
      body.event === 'job.completed'
        ? this.topology.subjects.events.completed
        : this.topology.subjects.events.failed;
    const headers = natsHeaders();
    const ack = await inProducerSpan(destinationOf(this.topology, subject), headers, () =>
      this.js.publish(subject, JSON.stringify(body), {
        msgID: messageIds.event(body.jobId, body.event),
        headers,
      }),
    );
    return !ack.duplicate;
  }

  /** Core publish: a long-poll that misses it still re-reads the job when its wait ends. */
  notify(notification: JobNotification): void {
    try {
      this.nats.publish(
        this.topology.subjects.jobNotification(notification.jobId),
        JSON.stringify(notification),
      );
    } catch (error) {
      this.logger.warn({ err: error, jobId: notification.jobId }, 'job notification not sent');
    }
  }

  /**
   * Runs work on an inline worker. `null` when no worker answered in time (no responders,
   * timeout) or the answer was unusable: the caller then queues the job instead of failing it.
   * A `failed` answer is returned as is; its `retryable` tells the caller which of the two to do.
   */
  async requestInline(
    work: JobWorkMessage & { pipeline: 'image' | 'text' },
    timeoutMs: number,
  ): Promise<Exclude<InlineWorkReply, { status: 'declined' }> | null> {
    const body = jobWorkMessage.parse(work);
    let payload: unknown;
    try {
      // The worker drops the request if it could not start before this: nobody waits then.
      const headers = natsHeaders();
      headers.set(DEADLINE_HEADER, String(Date.now() + timeoutMs));
      // A worker that dies with the request is given up on once silent, like an Rpc callee.
      const reply = await inProducerSpan('work.inline', headers, () =>
        this.rpc.request(
          this.topology.subjects.inline[work.pipeline],
          JSON.stringify(body),
          headers,
          timeoutMs,
        ),
      );
      payload = reply.json();
    } catch (error) {
      this.logger.info(
        { err: error, jobId: work.jobId, pipeline: work.pipeline },
        'no inline worker answered; queueing the job',
      );
      return null;
    }
    // Tolerate a worker that answers through kit's Rpc envelope (`{ ok, data }`).
    if (typeof payload === 'object' && payload !== null && 'ok' in payload) {
      const envelope = payload as { ok: unknown; data?: unknown };
      payload = envelope.ok === true ? envelope.data : undefined;
    }
    const parsed = inlineWorkReply.safeParse(payload);
    if (!parsed.success) {
      this.logger.error(
        { jobId: work.jobId, issues: parsed.error.issues },
        'inline worker reply is invalid; queueing the job',
      );
      return null;
    }
    if (parsed.data.status === 'declined') {
      this.logger.info(
        { jobId: work.jobId, pipeline: work.pipeline, reason: parsed.data.reason },
        'inline worker declined (saturated); queueing the job',
      );
      return null;
    }
    return parsed.data;
  }
}
