import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { once } from 'node:events';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** Test-only: real HTTP receivers on loopback that record what reached them. */

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export type ReceiverHandler = (
  request: IncomingMessage,
  response: ServerResponse,
  body: Buffer,
) => void;

export interface LoopbackReceiver {
  /** `http://<host>:<port>` with IPv6 hosts bracketed. */
  origin: string;
  port: number;
  requests: RecordedRequest[];
  /** TCP connections accepted, whether or not a request followed. */
  connectionCount(): number;
  /** Resolves once every accepted connection has been closed, or rejects after `withinMs`. */
  allConnectionsClosed(withinMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(
  handler: ReceiverHandler,
  options: { host?: string; port?: number } = {},
): Promise<LoopbackReceiver> {
  const host = options.host ?? '127.0.0.1';
  const requests: RecordedRequest[] = [];
  const openSockets = new Set<Socket>();
  let connections = 0;
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      requests.push({
        method: request.method ?? '',
        url: request.url ?? '',
        headers: request.headers,
        body,
      });
      handler(request, response, body);
    });
  });
  server.on('connection', (socket: Socket) => {
    connections += 1;
    openSockets.add(socket);
    socket.on('close', () => openSockets.delete(socket));
  });
  server.listen(options.port ?? 0, host);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const shownHost = host.includes(':') ? `[${host}]` : host;
  return {
    origin: `http://${shownHost}:${port}`,
    port,
    requests,
    connectionCount: () => connections,
    allConnectionsClosed: (withinMs = 5_000) =>
      waitUntil(() => openSockets.size === 0, withinMs, 'receiver connections to close'),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Receivers started on demand, each answering its `count`th request with `answer(count)` (null:
 * never answers); `closeAll` closes every one started.
 */
export function receiverPool(): {
  start(answer?: (count: number) => number | null): Promise<LoopbackReceiver>;
  closeAll(): Promise<void>;
} {
  const started: LoopbackReceiver[] = [];
  return {
    async start(answer = () => 200) {
      let count = 0;
      const receiver = await startReceiver((_request, response) => {
        count += 1;
        const status = answer(count);
        if (status === null) return; // never answers
        response.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
      });
      started.push(receiver);
      return receiver;
    },
    async closeAll() {
      for (const receiver of started) await receiver.close();
    },
  };
}

/**
 * Watches outgoing connection attempts in this process: `announced` counts undici deciding to
 * connect (before its connector runs), `sockets` counts sockets made by `net.connect`.
 */
export function watchConnectionAttempts(): {
  announced(): number;
  sockets(): number;
  stop(): void;
} {
  let announced = 0;
  let sockets = 0;
  const onAnnounce = () => {
    announced += 1;
  };
  const onSocket = () => {
    sockets += 1;
  };
  subscribe('undici:client:beforeConnect', onAnnounce);
  subscribe('net.client.socket', onSocket);
  return {
    announced: () => announced,
    sockets: () => sockets,
    stop: () => {
      unsubscribe('undici:client:beforeConnect', onAnnounce);
      unsubscribe('net.client.socket', onSocket);
    },
  };
}

async function waitUntil(condition: () => boolean, withinMs: number, what: string): Promise<void> {
  const giveUpAt = Date.now() + withinMs;
  while (!condition()) {
    if (Date.now() > giveUpAt) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
