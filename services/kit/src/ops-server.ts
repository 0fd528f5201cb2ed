import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MetricsSource } from './metrics';

export type ReadinessCheck = () => Promise<void> | void;

/** What a service adds to its process's readiness. */
export interface ReadinessChecks {
  addReadinessCheck(name: string, check: ReadinessCheck): void;
}

const CHECK_TIMEOUT_MS = 2_000;

/**
 * Liveness, readiness and metrics on their own port, apart from any public traffic, so probes
 * and scrapes never compete with (or are exposed like) the API.
 */
export class OpsServer implements ReadinessChecks {
  private readonly checks = new Map<string, ReadinessCheck>();
  private ready = false;
  private draining = false;
  private server: Server | undefined;

  constructor(private readonly registry: MetricsSource) {}

  addReadinessCheck(name: string, check: ReadinessCheck): void {
    this.checks.set(name, check);
  }

  /** The checks of one of several services in the process, named `<service>.<check>`. */
  scoped(service: string): ReadinessChecks {
    return {
      addReadinessCheck: (name, check) => this.addReadinessCheck(`${service}.${name}`, check),
    };
  }

  markReady(): void {
    this.ready = true;
  }

  /** Readiness goes false first on shutdown, so load balancers stop sending work. */
  markDraining(): void {
    this.draining = true;
  }

  async listen(port: number, host: string): Promise<number> {
    this.server = createServer((request, response) => {
      void this.handle(request.url ?? '/').then(({ status, body, contentType }) => {
        response.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-store' });
        response.end(body);
      });
    });
    await new Promise<void>((resolve, reject) => {
      this.server?.once('error', reject);
      this.server?.listen(port, host, () => resolve());
    });
    return (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    const server = this.server;
    if (server === undefined) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(
    url: string,
  ): Promise<{ status: number; body: string; contentType: string }> {
    const path = url.split('?')[0];
    if (path === '/healthz') return json(200, { status: 'ok' });
    if (path === '/readyz') return this.readiness();
    if (path === '/metrics') {
      return {
        status: 200,
        body: await this.registry.metrics(),
        contentType: this.registry.contentType,
      };
    }
    return json(404, { status: 'not found' });
  }

  private async readiness() {
    if (this.draining) return json(503, { status: 'draining' });
    if (!this.ready) return json(503, { status: 'starting' });
    const failures: Record<string, string> = {};
    await Promise.all(
      [...this.checks].map(async ([name, check]) => {
        try {
          await withTimeout(Promise.resolve(check()), CHECK_TIMEOUT_MS, name);
        } catch (error) {
          failures[name] = error instanceof Error ? error.message : String(error);
        }
      }),
    );
    return Object.keys(failures).length === 0
      ? json(200, { status: 'ready' })
      : json(503, { status: 'unready', failures });
  }
}

function json(status: number, body: unknown) {
  return { status, body: JSON.stringify(body), contentType: 'application/json' };
}

function withTimeout<T>(promise: Promise<T>, ms: number, name: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${name} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
