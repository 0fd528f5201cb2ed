import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * What a Kubernetes Service does for the gateway's replicas, on loopback: each connection to
 * `port` goes to the next of `backendPorts`, skipping one that refuses it (a replica that died
 * and is being restarted). A connection already proxied ends with its replica, as it would in a
 * cluster; the client retries. Hand-written because it is the whole of the need: a TCP splice
 * with round robin and a retry on refusal, which no proxy package does smaller.
 */
export interface RoundRobinProxy {
  stop(): Promise<void>;
}

export async function startRoundRobinProxy(
  port: number,
  backendPorts: readonly number[],
): Promise<RoundRobinProxy> {
  let next = 0;
  const clients = new Set<Socket>();
  const server: Server = createServer((client) => {
    clients.add(client);
    client.once('close', () => clients.delete(client));
    client.pause();
    const first = next;
    next = (next + 1) % backendPorts.length;
    connectTo(client, first, backendPorts.length);
  });

  function connectTo(client: Socket, index: number, triesLeft: number): void {
    const backend = connect({ host: '127.0.0.1', port: backendPorts[index]! });
    const refused = (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNREFUSED' && triesLeft > 1 && !client.destroyed) {
        connectTo(client, (index + 1) % backendPorts.length, triesLeft - 1);
      } else {
        client.destroy();
      }
    };
    backend.once('error', refused);
    backend.once('connect', () => {
      backend.off('error', refused);
      backend.on('error', () => client.destroy());
      client.on('error', () => backend.destroy());
      backend.once('close', () => client.destroy());
      client.once('close', () => backend.destroy());
      backend.pipe(client);
      client.pipe(backend);
      client.resume();
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return {
    stop: () =>
      new Promise<void>((resolve) => {
        for (const client of clients) client.destroy();
        server.close(() => resolve());
      }),
  };
}
