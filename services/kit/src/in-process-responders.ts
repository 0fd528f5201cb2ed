import type { Msg, MsgCallback, MsgHdrs, Payload } from '@nats-io/nats-core';
import { NoAnswerError } from './reply-inbox';

/** A responder's callback, as a NATS subscription calls it. */
export type Responder = MsgCallback<Msg>;

/**
 * Request/reply between services that run in one process (`runServices`): a request whose
 * subject a responder of this process serves is handed to it in memory, and its answer back,
 * with no NATS message, socket write or server hop. Both sides see the same message as over
 * NATS (subject, JSON body, headers with the deadline and trace context), so the endpoint code
 * is the same. Only request/reply goes this way: streams, events and notifications are
 * JetStream's and the server's business still, as their durability and fan-out are.
 *
 * The responders are also subscribed on NATS, so other processes (a second replica, the admin
 * CLI, tests) reach them as before; a caller here simply prefers the responder next to it, as
 * topology-aware routing prefers a local endpoint.
 */
export class InProcessResponders {
  private readonly bySubject = new Map<string, Responder>();

  /** Serves `subject` in memory until the returned function is called. */
  add(subject: string, responder: Responder): () => void {
    this.bySubject.set(subject, responder);
    return () => {
      if (this.bySubject.get(subject) === responder) this.bySubject.delete(subject);
    };
  }

  /**
   * The answer of this process's responder of `subject`, or undefined when there is none here
   * (the caller goes over NATS then). Empty messages (heartbeats) are not the answer; past
   * `timeoutMs` the wait ends as a NATS request's would, with NoAnswerError('timed-out').
   */
  request(
    subject: string,
    payload: string,
    headers: MsgHdrs,
    timeoutMs: number,
  ): Promise<Msg> | undefined {
    const responder = this.bySubject.get(subject);
    if (responder === undefined) return undefined;
    return new Promise<Msg>((resolve, reject) => {
      let settled = false;
      const settle = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        outcome();
      };
      const timer = setTimeout(
        () => settle(() => reject(new NoAnswerError('timed-out', subject))),
        timeoutMs,
      );
      const request = new InProcessMessage(subject, payload, headers, (body) => {
        const answer = textOf(body);
        if (answer.length > 0) settle(() => resolve(new InProcessMessage(subject, answer)));
        return true;
      });
      try {
        responder(null, request);
      } catch (error) {
        settle(() => reject(error));
      }
    });
  }
}

/** A message handed over in memory: the parts of nats.js's Msg that Tamp's code reads. */
class InProcessMessage implements Msg {
  readonly sid = 0;
  readonly reply: string | undefined;

  constructor(
    readonly subject: string,
    private readonly body: string,
    readonly headers?: MsgHdrs,
    /** A request's way back to its caller; an answer has none. */
    private readonly onRespond?: (payload?: Payload) => boolean,
  ) {
    // Responders answer only messages with a reply subject; this one names no real inbox.
    this.reply = onRespond === undefined ? undefined : `_INPROCESS.${subject}`;
  }

  get data(): Uint8Array {
    return new TextEncoder().encode(this.body);
  }

  respond(payload?: Payload): boolean {
    return this.onRespond?.(payload) ?? false;
  }

  json<T>(): T {
    return JSON.parse(this.body) as T;
  }

  string(): string {
    return this.body;
  }
}

function textOf(payload: Payload | undefined): string {
  if (payload === undefined) return '';
  return typeof payload === 'string' ? payload : new TextDecoder().decode(payload);
}
