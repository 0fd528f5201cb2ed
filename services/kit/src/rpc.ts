import {
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  headers as natsHeaders,
} from '@nats-io/nats-core';
import { type Span, SpanKind } from '@opentelemetry/api';
import {
  type EndpointDefinition,
  exponentialDelayMs,
  isErrorCode,
  jitteredDelayMs,
  ServiceError,
  type Topology,
} from '@tamp/proto';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { InProcessResponders, Responder } from './in-process-responders';
import { NoAnswerError, ReplyInbox } from './reply-inbox';
import { extractTraceContext, injectTraceContext, inSpan, markFailed } from './tracing';
import { asServiceError } from './transient-errors';

const replyEnvelope = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), data: z.unknown() }),
  z.object({
    ok: z.literal(false),
    error: z.object({ code: z.string(), message: z.string(), details: z.unknown().optional() }),
  }),
]);

type AnyEndpoint = EndpointDefinition<z.ZodType, z.ZodType>;
export type EndpointRequest<Endpoint extends AnyEndpoint> = z.input<Endpoint['request']>;
export type EndpointResponse<Endpoint extends AnyEndpoint> = z.output<Endpoint['response']>;

export const DEFAULT_RPC_TIMEOUT_MS = 5_000;

/**
 * The header carrying a request's deadline (Unix milliseconds) from service to service: one
 * budget per public request, set by the gateway, so every call made on its behalf stops in
 * time for the gateway to answer before the client gives up.
 */
export const DEADLINE_HEADER = 'Tamp-Deadline';

/**
 * The header asking the responder to send an empty "still working" message every so many
 * milliseconds until it answers. A caller sets it; callers without it (`nats.request`, which
 * takes the first message as the answer) get none.
 */
export const HEARTBEAT_HEADER = 'Tamp-Heartbeat';

export interface RpcTiming {
  /** How often a responder says it is still working. */
  heartbeatMs: number;
  /**
   * How long a caller waits without answer or heartbeat before it takes the responder for dead:
   * a request that died with its service is UNAVAILABLE after this, not after the call's whole
   * time-out. Several heartbeats long, so a responder busy for a moment is not given up on.
   */
  silenceMs: number;
  /**
   * How long a call whose request reached nobody ("no responders") keeps sending it again
   * (within its own time-out): a service's subscription is missing while its NATS client moves
   * to another server (a NATS pod drained or restarted; kit's reconnectTimeWait is 1 s) or
   * while its only replica restarts. Past it the call fails as UndeliveredCallError.
   */
  noRespondersGraceMs: number;
}

export const DEFAULT_RPC_TIMING: RpcTiming = {
  heartbeatMs: 1_000,
  silenceMs: 5_000,
  noRespondersGraceMs: 5_000,
};

/** The first pause before a request that reached nobody is sent again; doubled per retry. */
const NO_RESPONDERS_FIRST_PAUSE_MS = 50;

/**
 * UNAVAILABLE for a call whose request NATS delivered to nobody, each time it was sent: the
 * callee cannot have acted on it, so its caller knows the call had no effect (the gateway
 * answers such a creation "not-created" rather than "unknown").
 */
export class UndeliveredCallError extends ServiceError {
  constructor(service: string) {
    super('UNAVAILABLE', `The ${service} service is unavailable; retry shortly`);
  }
}

export interface CallOptions {
  /** Upper bound of this call's wait; default DEFAULT_RPC_TIMEOUT_MS. */
  timeoutMs?: number;
  /** The request's deadline: the wait is shortened to it, and the callee is told. */
  deadline?: number;
}

/** What a handler learns about the call besides its body. */
export interface CallMeta {
  /** The caller's deadline, when it sent one. */
  deadline: number | undefined;
}

/**
 * Typed request/reply over core NATS for the contracts in `proto/src/contracts/` (one file per service). Each side
 * validates what it receives, once: the server the request, the caller the response (what a
 * side sends is already typed). A ServiceError thrown by a handler reaches the caller as the
 * same ServiceError; a missing or silent service is UNAVAILABLE, never a hang.
 */
export class Rpc {
  private readonly replies: ReplyInbox;

  constructor(
    readonly nats: NatsConnection,
    readonly topology: Topology,
    private readonly logger: Logger,
    private readonly timing: RpcTiming = DEFAULT_RPC_TIMING,
    /** Responders of services running in this process (`runServices`): called in memory. */
    private readonly inProcess?: InProcessResponders,
  ) {
    this.replies = new ReplyInbox(nats);
  }

  subject(endpoint: AnyEndpoint): string {
    return this.topology.subjects.service(endpoint.service, endpoint.name);
  }

  /**
   * A request outside the typed endpoints (inline work), with this caller's heartbeat timing:
   * answered, or rejected with NoAnswerError once silent or past `timeoutMs`.
   */
  request(subject: string, payload: string, headers: MsgHdrs, timeoutMs: number): Promise<Msg> {
    const inMemory = this.inProcess?.request(subject, payload, headers, timeoutMs);
    if (inMemory !== undefined) return inMemory;
    headers.set(HEARTBEAT_HEADER, String(this.timing.heartbeatMs));
    return this.replies.request(subject, payload, headers, {
      timeoutMs,
      silenceMs: this.timing.silenceMs,
    });
  }

  /** One CLIENT span per call; the server's span is its child (context in the headers). */
  call<Endpoint extends AnyEndpoint>(
    endpoint: Endpoint,
    request: EndpointRequest<Endpoint>,
    options: CallOptions = {},
  ): Promise<EndpointResponse<Endpoint>> {
    return inSpan(
      spanName(endpoint),
      { kind: SpanKind.CLIENT, attributes: rpcAttributes(endpoint) },
      () => this.callInSpan(endpoint, request, options),
    );
  }

  private async callInSpan<Endpoint extends AnyEndpoint>(
    endpoint: Endpoint,
    request: EndpointRequest<Endpoint>,
    options: CallOptions,
  ): Promise<EndpointResponse<Endpoint>> {
    const headers = natsHeaders();
    injectTraceContext(headers);
    let timeout = options.timeoutMs ?? DEFAULT_RPC_TIMEOUT_MS;
    if (options.deadline !== undefined) {
      timeout = Math.min(timeout, options.deadline - Date.now());
      headers.set(DEADLINE_HEADER, String(options.deadline));
    }
    if (timeout <= 0) {
      throw new ServiceError('UNAVAILABLE', 'The request ran out of time; retry shortly');
    }
    let reply: Msg;
    try {
      reply = await this.requestUntilDelivered(
        this.subject(endpoint),
        JSON.stringify(request),
        headers,
        timeout,
      );
    } catch (error) {
      const reason = error instanceof NoAnswerError ? error.reason : undefined;
      this.logger.warn(
        { err: error, reason, endpoint: this.subject(endpoint) },
        'service call failed',
      );
      if (reason === 'no-responders') throw new UndeliveredCallError(endpoint.service);
      const what = reason === 'went-silent' ? 'stopped answering' : 'is unavailable';
      throw new ServiceError(
        'UNAVAILABLE',
        `The ${endpoint.service} service ${what}; retry shortly`,
      );
    }
    const envelope = replyEnvelope.parse(reply.json());
    if (!envelope.ok) {
      const { code, message, details } = envelope.error;
      throw new ServiceError(isErrorCode(code) ? code : 'INTERNAL', message, details);
    }
    return endpoint.response.parse(envelope.data) as EndpointResponse<Endpoint>;
  }

  /**
   * `request`, sent again while NATS answers "no responders" and the grace lasts. Safe for
   * every endpoint: that answer means the server delivered the request to no subscriber.
   */
  private async requestUntilDelivered(
    subject: string,
    payload: string,
    headers: MsgHdrs,
    timeoutMs: number,
  ): Promise<Msg> {
    const startedAt = Date.now();
    const giveUpAt = startedAt + timeoutMs;
    const graceEndsAt = startedAt + Math.min(timeoutMs, this.timing.noRespondersGraceMs);
    for (let retry = 0; ; retry++) {
      try {
        return await this.request(subject, payload, headers, giveUpAt - Date.now());
      } catch (error) {
        if (!(error instanceof NoAnswerError) || error.reason !== 'no-responders') throw error;
        const pauseMs = jitteredDelayMs(
          exponentialDelayMs(NO_RESPONDERS_FIRST_PAUSE_MS, retry),
          Math.random,
        );
        if (Date.now() + pauseMs >= graceEndsAt) throw error;
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
    }
  }

  /** Serves an endpoint in the service's queue group; each request is handled concurrently. */
  serve<Endpoint extends AnyEndpoint>(
    endpoint: Endpoint,
    handler: EndpointHandler<Endpoint>,
  ): Responding {
    return this.respondTo(this.subject(endpoint), endpoint.service, (error, message) => {
      if (error !== null) {
        this.logger.error({ err: error }, 'subscription error');
        return;
      }
      void this.handle(endpoint, handler, message);
    });
  }

  /**
   * Answers requests on `subject` in `queue`: over NATS, and in memory for callers in this
   * process when it runs several services (InProcessResponders). Every request/reply server of
   * Tamp subscribes through here (typed endpoints, inline work).
   */
  respondTo(subject: string, queue: string, responder: Responder): Responding {
    const subscription = this.nats.subscribe(subject, { queue, callback: responder });
    const removeInProcess = this.inProcess?.add(subject, responder) ?? (() => {});
    return {
      isClosed: () => subscription.isClosed(),
      drain: () => {
        removeInProcess();
        return subscription.drain();
      },
      unsubscribe: () => {
        removeInProcess();
        subscription.unsubscribe();
      },
    };
  }

  /** One SERVER span per request, child of the caller's span; error replies mark it failed. */
  private handle<Endpoint extends AnyEndpoint>(
    endpoint: Endpoint,
    handler: EndpointHandler<Endpoint>,
    message: Msg,
  ): Promise<void> {
    const stopHeartbeats = sendHeartbeats(message);
    return inSpan(
      spanName(endpoint),
      {
        kind: SpanKind.SERVER,
        attributes: rpcAttributes(endpoint),
        parent: extractTraceContext(message.headers),
      },
      (span) => this.handleInSpan(endpoint, handler, message, span),
    ).finally(stopHeartbeats);
  }

  private async handleInSpan<Endpoint extends AnyEndpoint>(
    endpoint: Endpoint,
    handler: EndpointHandler<Endpoint>,
    message: Msg,
    span: Span,
  ): Promise<void> {
    const respond = (body: z.infer<typeof replyEnvelope>) => {
      if (!body.ok) {
        span.setAttribute('tamp.error_code', body.error.code);
        markFailed(span, new Error(`${body.error.code}: ${body.error.message}`));
      }
      if (message.reply) message.respond(JSON.stringify(body));
    };
    const parsed = readMessage(message, endpoint.request);
    if (!parsed.ok) {
      respond({
        ok: false,
        error: {
          code: 'VALIDATION_ERROR',
          message: 'The request is invalid',
          details: parsed.issues,
        },
      });
      return;
    }
    const deadline = deadlineOf(message);
    if (deadline !== undefined && deadline <= Date.now()) {
      // The caller has stopped waiting: doing the work now would only have side effects.
      respond({
        ok: false,
        error: { code: 'UNAVAILABLE', message: 'The request ran out of time' },
      });
      return;
    }
    try {
      const result = await handler(parsed.value as z.output<Endpoint['request']>, { deadline });
      respond({ ok: true, data: result });
    } catch (caught) {
      const error = asServiceError(caught);
      if (error instanceof ServiceError) {
        if (error !== caught) {
          this.logger.warn(
            { err: caught, endpoint: this.subject(endpoint) },
            'dependency unavailable',
          );
        }
        respond({ ok: false, error: error.toJSON() });
        return;
      }
      this.logger.error(
        { err: error, endpoint: this.subject(endpoint) },
        'endpoint handler failed',
      );
      respond({ ok: false, error: { code: 'INTERNAL', message: 'Internal error' } });
    }
  }
}

/** A served subject: drained (requests already delivered are still handled) or dropped. */
export interface Responding {
  isClosed(): boolean;
  drain(): Promise<void>;
  unsubscribe(): void;
}

export type EndpointHandler<Endpoint extends AnyEndpoint> = (
  request: z.output<Endpoint['request']>,
  meta: CallMeta,
) => Promise<z.input<Endpoint['response']>>;

/**
 * A service's endpoints, served together and stopped together: the one stop rule of every
 * service. Stopping drains each subscription (requests already delivered are still handled),
 * then waits for the handlers under way, so their answers leave before the connection closes.
 */
export class EndpointGroup {
  private readonly subscriptions: Responding[] = [];
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(private readonly rpc: Rpc) {}

  serve<Endpoint extends AnyEndpoint>(
    endpoint: Endpoint,
    handler: EndpointHandler<Endpoint>,
  ): this {
    const tracked: EndpointHandler<Endpoint> = (request, meta) => {
      const running = handler(request, meta);
      const settled: Promise<unknown> = running.then(
        () => this.inFlight.delete(settled),
        () => this.inFlight.delete(settled),
      );
      this.inFlight.add(settled);
      return running;
    };
    this.subscriptions.push(this.rpc.serve(endpoint, tracked));
    return this;
  }

  /** Resolves once the server has every subscription: callers may use the endpoints then. */
  async ready(): Promise<this> {
    await this.rpc.nats.flush();
    return this;
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.subscriptions.map((subscription) =>
        subscription.isClosed() ? undefined : subscription.drain().catch(() => undefined),
      ),
    );
    await Promise.all(this.inFlight);
  }
}

export type ReadMessage<T> =
  | { ok: true; value: T }
  | { ok: false; body: unknown; issues: { path: string; message: string }[] };

/** A NATS or JetStream message's JSON body validated by `schema`: the receiving side's one check. */
export function readMessage<Schema extends z.ZodType>(
  message: { json<T>(): T },
  schema: Schema,
): ReadMessage<z.output<Schema>> {
  let body: unknown;
  try {
    body = message.json();
  } catch {
    return { ok: false, body: undefined, issues: [{ path: '', message: 'not JSON' }] };
  }
  const parsed = schema.safeParse(body);
  if (parsed.success) return { ok: true, value: parsed.data };
  return {
    ok: false,
    body,
    issues: parsed.error.issues.map((issue) => ({
      path: issue.path.join('.'),
      message: issue.message,
    })),
  };
}

/** `job.create-job`: the endpoint, without the namespace that prefixes its subject. */
function spanName(endpoint: AnyEndpoint): string {
  return `${endpoint.service}.${endpoint.name}`;
}

function rpcAttributes(endpoint: AnyEndpoint) {
  return { 'rpc.system': 'nats', 'rpc.service': endpoint.service, 'rpc.method': endpoint.name };
}

/** Bounds of the interval a caller may ask for: not a flood, not so rare it means nothing. */
const HEARTBEAT_BOUNDS_MS = { min: 50, max: 10_000 };

/**
 * Empty messages to the caller while its request is handled, when the caller asked for them
 * (HEARTBEAT_HEADER); every request/reply server of Tamp sends them (Rpc, inline work). Returns
 * the function that stops them, to call once the answer is sent.
 */
export function sendHeartbeats(message: Msg): () => void {
  const asked = Number(message.headers?.get(HEARTBEAT_HEADER));
  if (!message.reply || !Number.isFinite(asked) || asked <= 0) return () => {};
  const intervalMs = Math.min(Math.max(asked, HEARTBEAT_BOUNDS_MS.min), HEARTBEAT_BOUNDS_MS.max);
  const timer = setInterval(() => message.respond(), intervalMs);
  return () => clearInterval(timer);
}

function deadlineOf(message: Msg): number | undefined {
  const value = Number(message.headers?.get(DEADLINE_HEADER));
  return Number.isFinite(value) && value > 0 ? value : undefined;
}
