import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import {
  type GenericContainer,
  getContainerRuntimeClient,
  Network,
  type StartedNetwork,
  type StartedTestContainer,
  Wait,
  type WaitStrategy,
} from 'testcontainers';

/**
 * Where the containers of one Tamp run and how they reach each other:
 * - `bridge` (what Docker gives everyone): a network of their own, each container under an
 *   alias (`nats`, `gateway`, …) on its usual port, and the ports the test needs published on
 *   the host's random ports.
 * - `host`: every container in the host's network namespace, each server listening on
 *   127.0.0.1 on a free port of its own. For engines without bridge networking (podman as a
 *   machine's own engine, rootless setups) and hosts where containers must not get addresses
 *   of their own; nothing listens beyond loopback.
 */
export type NetworkMode = 'bridge' | 'host';

export interface Placement {
  readonly mode: NetworkMode;
  /** Address servers listen on inside their containers. */
  readonly listenHost: string;
  /** The port a server listens on: its usual one on a bridge, a free one on the host. */
  port(usual: number): Promise<number>;
  /** How other containers reach `alias`'s `port`, as `host:port`. */
  address(alias: string, port: number): string;
  /** Puts a container on the network as `alias`, reachable from the test on `ports`. */
  place(container: GenericContainer, alias: string, ports: readonly number[]): GenericContainer;
  /** Where the test reaches a started container's `port`, as `host:port`. */
  reach(container: StartedTestContainer, port: number): string;
  /** Ready once `GET <path>` on `port` answers 2xx (and fails at once if the container exits). */
  waitForHttp(path: string, port: number): WaitStrategy;
  /** Where webhook receivers on this network have their addresses (Tamp's allow-list). */
  readonly receiverCidrs: readonly string[];
  stop(): Promise<void>;
}

export async function createPlacement(mode: NetworkMode): Promise<Placement> {
  return mode === 'host' ? new HostPlacement() : BridgePlacement.create();
}

class BridgePlacement implements Placement {
  readonly mode = 'bridge';
  readonly listenHost = '0.0.0.0';

  private constructor(
    private readonly network: StartedNetwork,
    readonly receiverCidrs: readonly string[],
  ) {}

  static async create(): Promise<BridgePlacement> {
    const network = await new Network().start();
    try {
      const client = await getContainerRuntimeClient();
      const inspected = await client.network.getById(network.getId()).inspect();
      const subnets = (inspected.IPAM?.Config ?? []).flatMap((config) => config.Subnet ?? []);
      if (subnets.length === 0) throw new Error(`network ${network.getName()} has no subnet`);
      return new BridgePlacement(network, subnets);
    } catch (error) {
      await network.stop();
      throw error;
    }
  }

  async port(usual: number): Promise<number> {
    return usual;
  }

  address(alias: string, port: number): string {
    return `${alias}:${port}`;
  }

  place(container: GenericContainer, alias: string, ports: readonly number[]): GenericContainer {
    return container
      .withNetwork(this.network)
      .withNetworkAliases(alias)
      .withExposedPorts(...ports);
  }

  reach(container: StartedTestContainer, port: number): string {
    return `${container.getHost()}:${container.getMappedPort(port)}`;
  }

  waitForHttp(path: string, port: number): WaitStrategy {
    return Wait.forHttp(path, port, { abortOnContainerExit: true }).forStatusCodeMatching(
      (status) => status >= 200 && status < 300,
    );
  }

  async stop(): Promise<void> {
    await this.network.stop();
  }
}

class HostPlacement implements Placement {
  readonly mode = 'host';
  readonly listenHost = '127.0.0.1';
  readonly receiverCidrs = ['127.0.0.1/32'];
  private readonly taken = new Set<number>();

  async port(): Promise<number> {
    for (;;) {
      const port = await freeLoopbackPort();
      if (!this.taken.has(port)) {
        this.taken.add(port);
        return port;
      }
    }
  }

  address(_alias: string, port: number): string {
    return `127.0.0.1:${port}`;
  }

  place(container: GenericContainer): GenericContainer {
    return container.withNetworkMode('host');
  }

  reach(_container: StartedTestContainer, port: number): string {
    return `127.0.0.1:${port}`;
  }

  waitForHttp(path: string, port: number): WaitStrategy {
    return new LoopbackHttpWait(`http://127.0.0.1:${port}${path}`);
  }

  async stop(): Promise<void> {}
}

/**
 * A loopback port nothing listens on, below the kernel's ephemeral range: a port from that
 * range (what listening on port 0 returns) can become the local end of any outgoing connection
 * before the server binds it.
 */
async function freeLoopbackPort(): Promise<number> {
  const firstEphemeral = await readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').then(
    (range) => Number(range.trim().split(/\s+/)[0]),
    () => 32_768,
  );
  const high = Math.max(12_000, Math.min(firstEphemeral, 30_000));
  for (let tries = 0; tries < 200; tries++) {
    const candidate = 10_000 + Math.floor(Math.random() * (high - 10_000));
    if (await listensOn(candidate)) return candidate;
  }
  throw new Error('no free port on 127.0.0.1 below the ephemeral range');
}

function listensOn(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer()
      .once('error', () => resolve(false))
      .listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

type WaitedContainer = Parameters<WaitStrategy['waitUntilReady']>[0];

/**
 * testcontainers' HTTP wait reads a published port, which a container on the host's network
 * has none of: this one asks the loopback address itself.
 */
class LoopbackHttpWait implements WaitStrategy {
  private startupTimeoutMs = 60_000;
  private startupTimeoutSet = false;

  constructor(private readonly url: string) {}

  async waitUntilReady(container: WaitedContainer): Promise<void> {
    const deadline = Date.now() + this.startupTimeoutMs;
    let last = 'no answer yet';
    for (;;) {
      const answer = await fetch(this.url, { signal: AbortSignal.timeout(1_000) }).then(
        async (response) => {
          await response.body?.cancel();
          return response;
        },
        (error: Error) => error,
      );
      if (answer instanceof Response && answer.ok) return;
      last = answer instanceof Response ? `HTTP ${answer.status}` : answer.message;
      const { State } = await container.inspect();
      if (!State.Running) {
        throw new Error(
          `the container exited (code ${State.ExitCode}) before ${this.url} answered`,
        );
      }
      if (Date.now() > deadline) {
        throw new Error(`${this.url} not ready within ${this.startupTimeoutMs} ms (${last})`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  withStartupTimeout(startupTimeoutMs: number): WaitStrategy {
    this.startupTimeoutMs = startupTimeoutMs;
    this.startupTimeoutSet = true;
    return this;
  }

  isStartupTimeoutSet(): boolean {
    return this.startupTimeoutSet;
  }

  getStartupTimeout(): number {
    return this.startupTimeoutMs;
  }
}
