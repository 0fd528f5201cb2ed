import { existsSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { type LaunchedServer, launch, stopProcess, waitUntil } from '../processes';

const RELAY_SCRIPT = fileURLToPath(new URL('./netns-relay.mjs', import.meta.url));

/**
 * Makes addresses inside the cluster's network namespace reachable on the host's loopback,
 * through a relay process inside the namespace and a Unix socket in the data folder. No route,
 * interface or address is added to the host's network.
 */
export class NetnsRelay {
  readonly #servers: Server[] = [];
  readonly #sockets = new Set<Socket>();
  #relay: LaunchedServer | undefined;

  private constructor(readonly socketPath: string) {}

  static async start(options: {
    netnsPath: string;
    socketPath: string;
    logDir: string;
    launched: LaunchedServer[];
  }): Promise<NetnsRelay> {
    const relay = new NetnsRelay(options.socketPath);
    relay.#relay = launch(
      options.launched,
      options.logDir,
      'netns-relay',
      'nsenter',
      [`--net=${options.netnsPath}`, '--', process.execPath, RELAY_SCRIPT, options.socketPath],
      {},
    );
    await waitUntil(relay.#relay, async () => existsSync(options.socketPath), 10_000);
    return relay;
  }

  get pid(): number | undefined {
    return this.#relay?.child.pid;
  }

  /**
   * Listens on a free 127.0.0.1 port (or `localPort`) and forwards each connection to
   * `host:port` inside the namespace. Returns the local port.
   */
  async expose(host: string, port: number, localPort = 0): Promise<number> {
    const target = `${host.includes(':') ? `[${host}]` : host}:${port}\n`;
    const server = createServer((incoming) => {
      this.#sockets.add(incoming);
      incoming.once('close', () => this.#sockets.delete(incoming));
      const outgoing = connect(this.socketPath, () => {
        outgoing.write(target);
        incoming.pipe(outgoing);
        outgoing.pipe(incoming);
      });
      outgoing.on('error', () => incoming.destroy());
      incoming.on('error', () => outgoing.destroy());
      incoming.on('close', () => outgoing.destroy());
      outgoing.on('close', () => incoming.destroy());
    });
    this.#servers.push(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(localPort, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (typeof address !== 'object' || address === null) throw new Error('no local address');
    return address.port;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await Promise.all(
      this.#servers.map(
        (server) =>
          new Promise<void>((resolve) => {
            server.close(() => resolve());
          }),
      ),
    );
    this.#servers.length = 0;
    if (this.#relay !== undefined) await stopProcess(this.#relay.child);
  }
}
