import {
  type Msg,
  type NatsConnection,
  headers as natsHeaders,
  type Subscription,
} from '@nats-io/nats-core';
import { context as otelContext } from '@opentelemetry/api';
import { type EndpointDefinition, isErrorCode, ServiceError, type Topology } from '@tamp/proto';
import type { Logger } from 'pino';
import { z } from 'zod';
import { extractTraceContext, injectTraceContext } from './tracing';
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
 * Typed request/reply over core NATS for the contracts in `proto/src/services.ts`. Both ends
 * validate with the endpoint's schemas; a ServiceError thrown by a handler reaches the caller
 * as the same ServiceError; a missing or silent service is UNAVAILABLE, never a hang.
 */
export class Rpc {
  constructor(
    readonly nats: NatsConnection,
    readonly topology: Topology,
    private readonly logger: Logger,
  ) {}

  subject(endpoint: AnyEndpoint): string {
    return this.topology.subjects.service(endpoint.service, endpoint.name);
  }

  async call<Endpoint extends AnyEndpoint>(
    endpoint: Endpoint,
    request: EndpointRequest<Endpoint>,
    options: CallOptions = {},
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
      reply = await this.nats.request(
        this.subject(endpoint),
        JSON.stringify(endpoint.request.parse(request)),
        { timeout, headers },
      );
    } catch (error) {
      this.logger.warn({ err: error, endpoint: this.subject(endpoint) }, 'service call failed');
      throw new ServiceError(
        'UNAVAILABLE',
        `The ${endpoint.service} service is unavailable; retry shortly`,
      );
    }
    const envelope = replyEnvelope.parse(reply.json());
    if (!envelope.ok) {
      const { code, message, details } = envelope.error;
      throw new ServiceError(isErrorCode(code) ? code : 'INTERNAL', message, details);
    }
    return endpoint.response.parse(envelope.data) as EndpointResponse<Endpoint>;
  }

  /** Serves an endpoint in the service's queue group; each request is handled concurrently. */
  serve<Endpoint extends AnyEndpoint>(
    endpoint: Endpoint,
    handler: (
      request: z.output<Endpoint['request']>,
      meta: CallMeta,
    ) => Promise<z.input<Endpoint['response']>>,
  ): Subscription {
    return this.nats.subscribe(this.subject(endpoint), {
      queue: endpoint.service,
      callback: (error, message) => {
        if (error !== null) {
          this.logger.error({ err: error }, 'subscription error');
          return;
        }
        void this.handle(endpoint, handler, message);
      },
    });
  }

  private async handle<Endpoint extends AnyEndpoint>(
    endpoint: Endpoint,
    handler: (
      request: z.output<Endpoint['request']>,
      meta: CallMeta,
    ) => Promise<z.input<Endpoint['response']>>,
    message: Msg,
  ): Promise<void> {
    const respond = (body: z.infer<typeof replyEnvelope>) => {
      if (message.reply) message.respond(JSON.stringify(body));
    };
    let payload: unknown;
    try {
      payload = message.json();
    } catch {
      respond({ ok: false, error: { code: 'VALIDATION_ERROR', message: 'Request is not JSON' } });
      return;
    }
    const parsed = endpoint.request.safeParse(payload);
    if (!parsed.success) {
      respond({
        ok: false,
        error: {
          code: 'VALIDATION_ERROR',
          message: 'The request is invalid',
          details: parsed.error.issues.map((issue) => ({
            path: issue.path.join('.'),
            message: issue.message,
          })),
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
      const result = await otelContext.with(extractTraceContext(message.headers), () =>
        handler(parsed.data as z.output<Endpoint['request']>, { deadline }),
      );
      respond({ ok: true, data: endpoint.response.parse(result) });
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

function deadlineOf(message: Msg): number | undefined {
  const value = Number(message.headers?.get(DEADLINE_HEADER));
  return Number.isFinite(value) && value > 0 ? value : undefined;
}
