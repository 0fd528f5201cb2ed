import { randomUUID } from 'node:crypto';
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { asServiceError } from '@tamp/kit';
import { type ErrorCode, ServiceError } from '@tamp/proto';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

/** Echo a well-formed incoming X-Request-Id; anything else gets a fresh one. */
export function requestIdFor(request: {
  headers: Record<string, string | string[] | undefined>;
}): string {
  const incoming = request.headers['x-request-id'];
  return typeof incoming === 'string' && REQUEST_ID_PATTERN.test(incoming)
    ? incoming
    : randomUUID();
}

/**
 * Seconds a client should wait before retrying: a dependency down or the system saturated, or a
 * creation with the same Idempotency-Key still being settled.
 */
const RETRY_AFTER_SECONDS: Partial<Record<ErrorCode, number>> = {
  UNAVAILABLE: 5,
  IDEMPOTENCY_KEY_IN_USE: 2,
};

export function sendError(
  reply: FastifyReply,
  code: ErrorCode,
  message: string,
  details?: unknown,
): FastifyReply {
  const error = new ServiceError(code, message, details);
  const retryAfter = RETRY_AFTER_SECONDS[code];
  if (retryAfter !== undefined && !reply.hasHeader('retry-after')) {
    reply.header('retry-after', String(retryAfter));
  }
  return reply.status(error.httpStatus).send({ success: false, error: error.toJSON() });
}

/**
 * The envelope every response wears: `{ success: true, data }` or `{ success: false, error }`,
 * with X-Request-Id on both. Framework errors (bad JSON, body too large, schema failures) are
 * translated into the documented codes here, in one place.
 */
export const envelopePlugin = fp(
  async (app: FastifyInstance) => {
    // What Node would answer with a bare status or a closed socket reaches the hooks below (an
    // expectation other than 100-continue) or is answered here (CONNECT) in the envelope.
    app.server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) =>
      app.server.emit('request', request, response),
    );
    app.server.on('connect', answerConnect);

    app.addHook('onRequest', async (request, reply) => {
      reply.header('x-request-id', request.id);
      // RFC 9112 §3.2: an HTTP/1.1 request without Host is answered 400, and, as Node would,
      // its connection is not trusted with another request.
      if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
        reply.header('connection', 'close');
        return sendError(reply, 'VALIDATION_ERROR', 'An HTTP/1.1 request needs a Host header');
      }
      const expectation = request.headers.expect;
      if (expectation !== undefined && expectation.toLowerCase() !== '100-continue') {
        return sendError(
          reply,
          'EXPECTATION_FAILED',
          `Expect: ${expectation} cannot be met; only 100-continue is supported`,
        );
      }
    });

    // Known path, wrong method → 405 with Allow: every route pattern and its methods.
    const routes = new Map<string, { pattern: RegExp; methods: Set<string> }>();
    app.addHook('onRoute', (route) => {
      if (route.url.includes('*')) return;
      let entry = routes.get(route.url);
      if (entry === undefined) {
        const source = route.url
          .split('/')
          .map((part) =>
            part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
          )
          .join('/');
        entry = { pattern: new RegExp(`^${source}/?$`), methods: new Set() };
        routes.set(route.url, entry);
      }
      for (const method of [route.method].flat()) entry.methods.add(method);
    });

    /** No route matched: 405 with Allow when the path exists under another method, else 404. */
    const answerUnmatched = (request: FastifyRequest, reply: FastifyReply) => {
      const path = request.url.split('?')[0] ?? '/';
      const allowed = new Set<string>();
      for (const { pattern, methods } of routes.values()) {
        if (pattern.test(path)) for (const method of methods) allowed.add(method);
      }
      if (allowed.size > 0 && !allowed.has(request.method)) {
        const allow = [...allowed].sort().join(', ');
        reply.header('allow', allow);
        return sendError(
          reply,
          'METHOD_NOT_ALLOWED',
          `${request.method} is not allowed on ${path}; allowed: ${allow}`,
        );
      }
      return sendError(reply, 'NOT_FOUND', `No route ${request.method} ${path}`);
    };
    app.setNotFoundHandler(answerUnmatched);

    app.setErrorHandler((caught: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      // An unknown method that may carry a body (QUERY) fails fastify's content-type check
      // before the not-found route runs: it is still just a method this path does not have.
      if (request.is404) return answerUnmatched(request, reply);
      // The request's body never arrived whole: the client went away, or the server already
      // answered 408 when HTTP_REQUEST_TIMEOUT_MS passed. Nobody reads this answer; it is
      // counted as the client's failure (4xx), not as a dependency's (503).
      if (request.raw.readableAborted) {
        request.log.info({ err: caught }, 'request body cut off');
        return sendError(reply, 'REQUEST_TIMEOUT', 'The request did not arrive completely');
      }
      const error = asServiceError(caught) as FastifyError | ServiceError;
      if (error instanceof ServiceError) {
        if (error !== caught) request.log.warn({ err: caught }, 'dependency unavailable');
        // An error that knows better than the code's default how soon to retry (shedding).
        if ('retryAfterSeconds' in error)
          reply.header('retry-after', String(error.retryAfterSeconds));
        return sendError(reply, error.code, error.message, error.details);
      }
      if (error.validation !== undefined) {
        return sendError(
          reply,
          'VALIDATION_ERROR',
          'The request is invalid',
          error.validation.map((issue) => ({
            path: `${error.validationContext ?? 'body'}${issue.instancePath.replaceAll('/', '.')}`.replace(
              /\.$/,
              '',
            ),
            message: issue.message ?? 'is invalid',
          })),
        );
      }
      switch (error.code) {
        case 'FST_ERR_CTP_BODY_TOO_LARGE':
          return sendError(
            reply,
            'PAYLOAD_TOO_LARGE',
            'The request body is too large for this endpoint',
          );
        case 'FST_ERR_CTP_INVALID_JSON_BODY':
        case 'FST_ERR_CTP_EMPTY_JSON_BODY':
          return sendError(reply, 'VALIDATION_ERROR', 'The request body is not valid JSON');
        case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
          return sendError(reply, 'VALIDATION_ERROR', 'Request bodies must be application/json');
      }
      if (error.statusCode === 400 && error instanceof SyntaxError) {
        return sendError(reply, 'VALIDATION_ERROR', 'The request body is not valid JSON');
      }
      request.log.error({ err: error }, 'unhandled error');
      return sendError(reply, 'INTERNAL', `Internal error; quote request id ${request.id}`);
    });
  },
  { name: 'envelope' },
);

/**
 * Errors fastify raises before routing (a path that is not valid percent-encoding, a parameter
 * longer than the router allows): answered like any other, in the envelope.
 */
export function frameworkError(error: FastifyError, _request: FastifyRequest, reply: FastifyReply) {
  reply.header('x-request-id', _request.id);
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return sendError(reply, 'URI_TOO_LONG', 'The request path is too long');
  }
  return sendError(reply, 'NOT_FOUND', 'No such route');
}

/**
 * A path whose percent-encoding is not UTF-8 (`/v1/jobs/%FF%FE`) is routed as the literal text
 * it is, so an id that does not parse is reported as unknown (JOB_NOT_FOUND, after
 * authentication) like any other, not as a 400 from the router.
 */
export function rewriteUndecodablePath(request: { url?: string }): string {
  const url = request.url ?? '/';
  const queryAt = url.indexOf('?');
  const path = queryAt === -1 ? url : url.slice(0, queryAt);
  try {
    decodeURIComponent(path);
    return url;
  } catch {
    return path.replaceAll('%', '%25') + (queryAt === -1 ? '' : url.slice(queryAt));
  }
}

/** What Node's HTTP server refuses before any framework sees the request. */
const CLIENT_ERRORS: Record<string, { code: ErrorCode; message: string }> = {
  HPE_HEADER_OVERFLOW: {
    code: 'HEADERS_TOO_LARGE',
    message: 'The request line and headers are too large',
  },
  // Raised by Node when HTTP_HEADERS_TIMEOUT_MS or HTTP_REQUEST_TIMEOUT_MS passes.
  ERR_HTTP_REQUEST_TIMEOUT: {
    code: 'REQUEST_TIMEOUT',
    message: 'The request was not received in time',
  },
};

/**
 * Node answers a request its parser cannot read, or that did not arrive in time, with a bare
 * status line; this answers it with the error envelope instead, then closes the connection,
 * which cannot be trusted further. When an answer has already begun on the connection, nothing
 * more can be said: it is closed.
 */
export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (!socket.writable || inFlight?.headersSent === true) {
    socket.destroy();
    return;
  }
  const known = CLIENT_ERRORS[error.code ?? ''] ?? {
    code: 'VALIDATION_ERROR',
    message: 'The request is not valid HTTP',
  };
  endWithError(socket, known.code, known.message);
}

/**
 * CONNECT asks for a tunnel, which this server does not make; Node would close the socket
 * without a word. No method is allowed on a CONNECT target (a host and port, not a path).
 */
function answerConnect(_request: IncomingMessage, socket: Duplex): void {
  endWithError(socket, 'METHOD_NOT_ALLOWED', 'CONNECT is not supported: this is not a proxy', {
    allow: '',
  });
}

/** The error envelope written straight to a socket that no framework response owns. */
function endWithError(
  socket: Duplex,
  code: ErrorCode,
  message: string,
  headers: Record<string, string> = {},
): void {
  const error = new ServiceError(code, message);
  const body = JSON.stringify({ success: false, error: error.toJSON() });
  const head = Object.entries({
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(body)),
    'X-Request-Id': randomUUID(),
    Connection: 'close',
    ...headers,
  })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${error.httpStatus} ${STATUS_CODES[error.httpStatus]}\r\n${head}\r\n${body}`,
  );
}
