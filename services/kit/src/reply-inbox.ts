import {
  createInbox,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from '@nats-io/nats-core';

/** Why a request got no answer. */
export type NoAnswer = 'no-responders' | 'timed-out' | 'went-silent';

export class NoAnswerError extends Error {
  constructor(
    readonly reason: NoAnswer,
    subject: string,
  ) {
    super(`${subject}: ${reason}`);
    this.name = 'NoAnswerError';
  }
}

export interface ReplyWait {
  /** The longest wait for the answer. */
  timeoutMs: number;
  /**
   * The longest silence: no answer and no heartbeat for this long means the responder died or
   * stalled with the request, and the wait ends long before `timeoutMs`.
   */
  silenceMs: number;
}

/**
 * Requests whose responder says "still working" with empty messages until it answers: the
 * caller of a long call can tell a busy responder from a dead one. A SIGKILLed service's
 * subscription outlives it for a moment on the NATS server, and a request delivered there is
 * answered by no one; `nats.request` can only wait out its whole time-out for it. nats.js's
 * `requestMany` has no "silent since the start" stop, so the replies are muxed here, on one
 * subscription per connection, as nats.js does for its own requests.
 */
export class ReplyInbox {
  private readonly prefix = createInbox();
  private readonly waiting = new Map<string, PendingReply>();
  private subscription: Subscription | undefined;
  private sent = 0;

  constructor(private readonly nats: NatsConnection) {}

  request(subject: string, payload: string, headers: MsgHdrs, wait: ReplyWait): Promise<Msg> {
    this.subscription ??= this.nats.subscribe(`${this.prefix}.*`, {
      callback: (error, message) => {
        if (error === null) this.waiting.get(tokenOf(message.subject))?.receive(message);
      },
    });
    const token = (this.sent++).toString(36);
    return new Promise<Msg>((resolve, reject) => {
      const pending = new PendingReply(subject, wait, {
        resolve,
        reject,
        settled: () => this.waiting.delete(token),
      });
      this.waiting.set(token, pending);
      try {
        this.nats.publish(subject, payload, { reply: `${this.prefix}.${token}`, headers });
      } catch (error) {
        pending.settle(() => reject(error));
      }
    });
  }
}

interface Settlement {
  resolve(message: Msg): void;
  reject(error: unknown): void;
  settled(): void;
}

class PendingReply {
  private readonly deadline: NodeJS.Timeout;
  private silence: NodeJS.Timeout;
  private lastHeard = Date.now();
  private done = false;

  constructor(
    private readonly subject: string,
    private readonly wait: ReplyWait,
    private readonly settlement: Settlement,
  ) {
    this.deadline = setTimeout(() => this.fail('timed-out'), wait.timeoutMs);
    this.silence = this.watchSilence(wait.silenceMs);
  }

  receive(message: Msg): void {
    if (message.data.length > 0) {
      this.settle(() => this.settlement.resolve(message));
    } else if (message.headers?.code === 503) {
      this.fail('no-responders');
    } else {
      this.lastHeard = Date.now();
    }
  }

  settle(outcome: () => void): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.deadline);
    clearTimeout(this.silence);
    this.settlement.settled();
    outcome();
  }

  private fail(reason: NoAnswer): void {
    this.settle(() => this.settlement.reject(new NoAnswerError(reason, this.subject)));
  }

  /**
   * The check runs in a setImmediate after the timer: when this process itself was stalled,
   * heartbeats that arrived meanwhile are still unread when timers run, and the poll phase
   * before setImmediate reads them, so a caller's own pause is not taken for the responder's.
   */
  private watchSilence(afterMs: number): NodeJS.Timeout {
    return setTimeout(
      () =>
        setImmediate(() => {
          if (this.done) return;
          const quietMs = Date.now() - this.lastHeard;
          if (quietMs >= this.wait.silenceMs) this.fail('went-silent');
          else this.silence = this.watchSilence(this.wait.silenceMs - quietMs);
        }),
      afterMs,
    );
  }
}

function tokenOf(subject: string): string {
  return subject.slice(subject.lastIndexOf('.') + 1);
}
