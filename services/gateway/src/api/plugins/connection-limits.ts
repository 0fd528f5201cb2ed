import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { sendError } from './envelope';

/**
 * How long a connection over its address's limit is kept: long enough for a client that just
 * connected to send its request and read why it is refused, short enough that refused
 * connections cannot pile up in its place.
 */
const REFUSED_CONNECTION_GRACE_MS = 1_000;

/**
 * Bounds the connections the server holds: `maxConnections` in all (Node drops new ones
 * beyond it, before a byte is read) and `maxConnectionsPerAddress` per peer address, so one
 * client cannot take every slot, holding connections open without finishing its requests
 * (the time limits bound how long each is held, this bounds how many).
 *
 * Counted per socket peer, not per client as `request.ip` sees it through X-Forwarded-For: a
 * connection costs from the moment it is accepted, before any request (or header) is read.
 * Behind an ingress or a load balancer the peers are the proxies, so there the limit is off
 * (0) and clients are limited at the proxy. A connection over the limit is answered 429
 * RATE_LIMITED with `Connection: close` as soon as its request arrives, and closed after
 * REFUSED_CONNECTION_GRACE_MS if none does; it does not count against its address.
 */
export const connectionLimitsPlugin = fp(
  async (
    app: FastifyInstance,
    options: { maxConnections: number; maxConnectionsPerAddress: number },
  ) => {
    const { maxConnectionsPerAddress } = options;
    app.server.maxConnections = options.maxConnections;
    if (maxConnectionsPerAddress === 0) return;

    const openByAddress = new Map<string, number>();
    const refused = new WeakSet<Socket>();

    app.server.on('connection', (socket: Socket) => {
      const address = socket.remoteAddress ?? 'unknown';
      const open = openByAddress.get(address) ?? 0;
      if (open >= maxConnectionsPerAddress) {
        refused.add(socket);
        const closing = setTimeout(() => socket.destroy(), REFUSED_CONNECTION_GRACE_MS);
        socket.once('close', () => clearTimeout(closing));
        return;
      }
      openByAddress.set(address, open + 1);
      socket.once('close', () => {
        const left = (openByAddress.get(address) ?? 1) - 1;
        if (left === 0) openByAddress.delete(address);
        else openByAddress.set(address, left);
      });
    });

    app.addHook('onRequest', async (request, reply) => {
      if (!refused.has(request.raw.socket)) return;
      reply.header('connection', 'close');
      reply.header('retry-after', '1');
      return sendError(
        reply,
        'RATE_LIMITED',
        `Too many connections from one address (at most ${maxConnectionsPerAddress}); ` +
          'reuse connections or retry after one closes',
      );
    });
  },
  { name: 'connection-limits', dependencies: ['envelope'] },
);
