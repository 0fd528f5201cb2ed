import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import {
  GenericContainer,
  getContainerRuntimeClient,
  type StartedTestContainer,
} from 'testcontainers';
import { allStarted, secret, startDependencies } from './dependencies.js';
import { DEFAULT_IMAGES, imagesFromEnvironment, type TampImages } from './images.js';
import { createPlacement, type NetworkMode, type Placement } from './placement.js';
import {
  type Installation,
  serviceEnvironment,
  TAMP_SERVICE_NAMES,
  type TampService,
} from './services.js';
import { startWebhookReceiver, type WebhookReceiver } from './webhook-receiver.js';

/** An account of the running Tamp: what a customer gets when they sign up. */
export interface TampAccount {
  accountId: string;
  apiKey: string;
  /** Signs the account's webhook deliveries (verify them with it). */
  webhookSecret: string;
}

export interface AccountOptions {
  /** `free`, `pro`, … (the plans of Tamp's billing); `pro` by default. */
  plan?: string;
  /** Credits granted on top of the plan's allowance; 100 000 by default. */
  credits?: number;
}

/** A dependency of Tamp, as the test reaches it (for inspecting what Tamp stored). */
export interface TampDependencies {
  natsUrl: string;
  mongoUrl: string;
  s3: { endpoint: string; accessKey: string; secretKey: string; region: string; bucket: string };
}

/**
 * A real Tamp for integration tests: NATS (JetStream), FerretDB, MinIO and every Tamp service
 * (gateway, upload, job, billing, webhook, the image, text and audio workers), each in its own
 * container with the environment the Helm chart gives it, and an account to use it with.
 *
 * ```ts
 * const tamp = await new TampContainer().start();
 * // tamp.baseUrl, tamp.apiKey, tamp.webhookSecret
 * await tamp.stop();
 * ```
 */
export class TampContainer {
  private images: TampImages;
  private networkMode: NetworkMode;
  private extraCidrs: string[] = [];
  private account: AccountOptions = {};
  private readonly extraEnv: Partial<Record<TampService, Record<string, string>>> = {};
  private startupTimeoutMs = 180_000;

  /** Images from `images`, then the environment (see imagesFromEnvironment), then defaults. */
  constructor(images: Partial<TampImages> = {}) {
    this.images = { ...DEFAULT_IMAGES, ...imagesFromEnvironment(), ...images };
    const mode = process.env.TAMP_TESTCONTAINERS_NETWORK;
    this.networkMode = mode === 'host' ? 'host' : 'bridge';
  }

  withImages(images: Partial<TampImages>): this {
    this.images = { ...this.images, ...images };
    return this;
  }

  /** `bridge` (default) or `host`; TAMP_TESTCONTAINERS_NETWORK=host chooses host too. */
  withNetworkMode(mode: NetworkMode): this {
    this.networkMode = mode;
    return this;
  }

  /**
   * Further CIDRs whose plain-http webhook receivers Tamp may call, besides the network its
   * containers are on (where `startWebhookReceiver()` puts receivers).
   */
  withWebhookAllowedCidrs(...cidrs: string[]): this {
    this.extraCidrs.push(...cidrs);
    return this;
  }

  /** The account `start()` creates. */
  withAccount(options: AccountOptions): this {
    this.account = { ...this.account, ...options };
    return this;
  }

  /** Further variables of one service (docs/configuration.md lists them). */
  withServiceEnvironment(service: TampService, env: Record<string, string>): this {
    this.extraEnv[service] = { ...this.extraEnv[service], ...env };
    return this;
  }

  /** How long each container may take to be ready (3 minutes by default). */
  withStartupTimeout(startupTimeoutMs: number): this {
    this.startupTimeoutMs = startupTimeoutMs;
    return this;
  }

  async start(): Promise<StartedTampContainer> {
    const placement = await createPlacement(this.networkMode);
    const instance = secret(8);
    const started: Array<[string, StartedTestContainer]> = [];
    const logs = new Map<string, string[]>();
    const run = async (name: string, container: GenericContainer) => {
      const lines: string[] = [];
      logs.set(name, lines);
      const running = await container
        .withLabels(instanceLabels(instance, name))
        .withStartupTimeout(this.startupTimeoutMs)
        .withLogConsumer((stream) => keepLastLines(stream, lines))
        .start();
      started.push([name, running]);
      return running;
    };
    try {
      const dependencies = await startDependencies(placement, this.images, run);
      const s3Public = `http://${placement.reach(dependencies.minio, dependencies.ports.minio)}`;
      const installation: Installation = {
        natsUrl: dependencies.natsUrl,
        mongoUrl: dependencies.mongoUrl,
        s3: { ...dependencies.s3, publicEndpoint: s3Public },
        adminToken: secret(24),
        cursorSecret: secret(32),
        encryptionKey: randomBytes(32).toString('base64'),
        webhookCidrs: [...placement.receiverCidrs, ...this.extraCidrs],
      };
      const gatewayPorts = {
        port: await placement.port(8080),
        adminPort: await placement.port(8081),
      };
      const services = new Map<TampService, StartedTestContainer>();
      await allStarted(
        TAMP_SERVICE_NAMES.map(async (service) => {
          const opsPort = await placement.port(9090);
          const listening = { host: placement.listenHost, opsPort, ...gatewayPorts };
          const published =
            service === 'gateway' ? [opsPort, listening.port, listening.adminPort] : [opsPort];
          const container = placement
            .place(new GenericContainer(serviceImage(this.images, service)), service, published)
            .withEnvironment({
              ...serviceEnvironment(service, installation, listening),
              ...this.extraEnv[service],
            })
            .withWaitStrategy(placement.waitForHttp('/readyz', opsPort));
          services.set(service, await run(service, container));
        }),
      );
      const gateway = services.get('gateway')!;
      const adminUrl = `http://${placement.reach(gateway, gatewayPorts.adminPort)}`;
      return new StartedTampContainer({
        baseUrl: `http://${placement.reach(gateway, gatewayPorts.port)}`,
        adminUrl,
        adminToken: installation.adminToken,
        account: await createAccount(adminUrl, installation.adminToken, this.account),
        placement,
        instance,
        images: this.images,
        services,
        containers: started.map(([, container]) => container),
        logs,
        dependencies: {
          natsUrl: `nats://${placement.reach(dependencies.nats, dependencies.ports.nats)}`,
          mongoUrl: `mongodb://${placement.reach(dependencies.ferretdb, dependencies.ports.ferretdb)}/`,
          s3: { ...dependencies.s3, endpoint: s3Public, region: 'us-east-1', bucket: 'tamp' },
        },
      });
    } catch (error) {
      // The start's own error is the one to report; a failure to clean up adds nothing to it.
      await stopAll(
        started.map(([, container]) => container),
        placement,
        instance,
      ).catch(() => {});
      throw new Error(`Tamp did not start: ${describe(error)}${logTails(logs)}`, { cause: error });
    }
  }
}

/** A running Tamp: where it answers, an account to call it with, and its containers. */
export class StartedTampContainer {
  /** The public API, e.g. `http://localhost:32768` (without `/v1`). */
  readonly baseUrl: string;
  /** The admin API (accounts, keys, credits), guarded by `adminToken`. */
  readonly adminUrl: string;
  readonly adminToken: string;
  /** The servers Tamp depends on, as the test reaches them. */
  readonly dependencies: TampDependencies;
  readonly networkMode: NetworkMode;
  readonly images: TampImages;
  /** The account `start()` created. */
  readonly account: TampAccount;
  private readonly placement: Placement;
  /** The label value every container of this Tamp carries. */
  private readonly instance: string;
  private readonly services: ReadonlyMap<TampService, StartedTestContainer>;
  private readonly containers: StartedTestContainer[];
  private readonly receivers: WebhookReceiver[] = [];
  private readonly recentLogs: ReadonlyMap<string, readonly string[]>;

  constructor(parts: {
    baseUrl: string;
    adminUrl: string;
    adminToken: string;
    account: TampAccount;
    placement: Placement;
    instance: string;
    images: TampImages;
    services: ReadonlyMap<TampService, StartedTestContainer>;
    containers: StartedTestContainer[];
    logs: ReadonlyMap<string, readonly string[]>;
    dependencies: TampDependencies;
  }) {
    this.baseUrl = parts.baseUrl;
    this.adminUrl = parts.adminUrl;
    this.adminToken = parts.adminToken;
    this.account = parts.account;
    this.placement = parts.placement;
    this.instance = parts.instance;
    this.networkMode = parts.placement.mode;
    this.images = parts.images;
    this.services = parts.services;
    this.containers = parts.containers;
    this.recentLogs = parts.logs;
    this.dependencies = parts.dependencies;
    this.stop = this.stop.bind(this);
  }

  /** The API key of the account `start()` created (`Authorization: Bearer <apiKey>`). */
  get apiKey(): string {
    return this.account.apiKey;
  }

  get accountId(): string {
    return this.account.accountId;
  }

  /** The secret that signs this account's webhook deliveries. */
  get webhookSecret(): string {
    return this.account.webhookSecret;
  }

  /** Another account (its own key, secret and credits), through the admin API. */
  createAccount(options: AccountOptions = {}): Promise<TampAccount> {
    return createAccount(this.adminUrl, this.adminToken, options);
  }

  /**
   * A webhook receiver in a container on Tamp's network, which Tamp may deliver to: its `url`
   * goes into a job's `webhookUrl`, and `deliveries()` lists what it received. Stopped with
   * the stack.
   */
  async startWebhookReceiver(): Promise<WebhookReceiver> {
    const alias = `webhook-receiver-${this.receivers.length + 1}`;
    const receiver = await startWebhookReceiver(
      this.placement,
      serviceImage(this.images, 'gateway'),
      alias,
      instanceLabels(this.instance, alias),
    );
    this.receivers.push(receiver);
    return receiver;
  }

  /** The container of one service, to restart it or read its logs. */
  service(name: TampService): StartedTestContainer {
    const container = this.services.get(name);
    if (container === undefined) throw new Error(`no service ${name}`);
    return container;
  }

  /**
   * Kills one service's container outright (SIGKILL: no graceful stop, work in flight is
   * abandoned); `service(name).restart()` starts it again and waits until it is ready.
   */
  async kill(name: TampService): Promise<void> {
    const client = await getContainerRuntimeClient();
    await client.container.getById(this.service(name).getId()).kill({ signal: 'SIGKILL' });
  }

  /** The last lines each container wrote, for a failing test's message. */
  logs(): string {
    return logTails(this.recentLogs);
  }

  /** Removes every container and the network. */
  async stop(): Promise<void> {
    const receivers = this.receivers.splice(0);
    await Promise.all(receivers.map((receiver) => receiver.stop()));
    await stopAll(this.containers, this.placement, this.instance);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

async function createAccount(
  adminUrl: string,
  adminToken: string,
  options: AccountOptions,
): Promise<TampAccount> {
  const response = await fetch(`${adminUrl}/admin/accounts`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ plan: options.plan ?? 'pro', credits: options.credits ?? 100_000 }),
  });
  const body = (await response.json()) as { data?: TampAccount };
  if (response.status !== 201 || body.data === undefined) {
    throw new Error(`creating an account: ${response.status} ${JSON.stringify(body)}`);
  }
  return body.data;
}

export function serviceImage(images: TampImages, service: TampService): string {
  return `${images.repository}-${service}:${images.tag}`;
}

const INSTANCE_LABEL = 'dev.tamp.testcontainers.instance';

function instanceLabels(instance: string, name: string): Record<string, string> {
  return { [INSTANCE_LABEL]: instance, 'dev.tamp.testcontainers.name': name };
}

/**
 * Stops the containers, then removes any other container of the instance still running: one
 * whose start failed after it was created (testcontainers leaves a container whose published
 * ports never showed), or a receiver that did not start.
 */
async function stopAll(
  containers: StartedTestContainer[],
  placement: Placement,
  instance: string,
): Promise<void> {
  // Nothing to drain in a test's Tamp: killed at once, removed with their volumes.
  const results = await Promise.allSettled(
    containers.map((container) => container.stop({ timeout: 0 })),
  );
  const client = await getContainerRuntimeClient();
  const left = (await client.container.list()).filter(
    (container) => container.Labels?.[INSTANCE_LABEL] === instance,
  );
  results.push(
    ...(await Promise.allSettled(
      left.map((container) => client.container.getById(container.Id).remove({ force: true })),
    )),
  );
  await placement.stop();
  const failed = results.filter((result) => result.status === 'rejected');
  if (failed.length > 0) {
    throw new Error(`stopping Tamp: ${failed.map((result) => describe(result.reason)).join('; ')}`);
  }
}

function keepLastLines(stream: Readable, lines: string[]): void {
  let partial = '';
  stream.on('data', (chunk: Buffer | string) => {
    const text = partial + chunk.toString();
    const complete = text.split('\n');
    partial = complete.pop() ?? '';
    lines.push(...complete);
    if (lines.length > 40) lines.splice(0, lines.length - 40);
  });
}

function logTails(logs: ReadonlyMap<string, readonly string[]>): string {
  return [...logs]
    .filter(([, lines]) => lines.length > 0)
    .map(([name, lines]) => `\n--- ${name} (last lines) ---\n${lines.slice(-15).join('\n')}`)
    .join('');
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
