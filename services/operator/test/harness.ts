import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import {
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { connectNats, createLogger, type NatsConnection, provisionTopology } from '@tamp/kit';
import { createTopology, type Pipeline, type Topology } from '@tamp/proto';
import { pollUntil } from '@tamp/scripts/infra/kubernetes/processes';
import { freePort, stopProcess, tcpOpen } from '@tamp/scripts/infra/processes';
import { PROJECT_ROOT, toolPath } from '@tamp/scripts/infra/provision';
import { Registry } from 'prom-client';
import { afterAll, beforeAll } from 'vitest';
import { stringify } from 'yaml';
import { CHART_DIR, helm } from '../../../test/deploy/helm';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import { type TestControlPlane, useControlPlane } from '../../../test/support/kubernetes';
import { assertStaysTrue } from '../../../test/support/stays-true';
import { JetStreamBacklog } from '../src/adapters/jetstream-backlog';
import { KubernetesApi, loadKubeConfig } from '../src/adapters/kubernetes';
import { createOperatorMetrics } from '../src/application/metrics';
import { Operator } from '../src/application/operator';
import type { WorkerPool, WorkerPoolSpec } from '../src/domain/worker-pool';

export const CRD_FILE = join(PROJECT_ROOT, 'k8s/crds/workerpools.tamp.dev.yaml');
/** The chart's names for a release called `tamp`: the operator's ServiceAccount and Lease. */
export const OPERATOR_NAME = 'tamp-operator';

/** Short leases so fail-over is measured in seconds (the chart's default is 15 s). */
export const TEST_LEASE = { durationSeconds: 4, renewDeadlineMs: 3_000, retryPeriodMs: 500 };

export interface PoolEvent {
  reason: string;
  type: string;
  message: string;
  reportingInstance?: string;
}

/**
 * A test file's world: a real control plane with the WorkerPool CRD, real NATS with the
 * file's own topology (provisioned as the services do), and operator processes started from
 * services/operator/src/main.ts under the chart's own RBAC: each test namespace gets the
 * chart's ServiceAccount, Role and RoleBinding, and the operator authenticates with that
 * ServiceAccount's token, so nothing here runs with more rights than an installed operator.
 */
export function useOperatorWorld() {
  const cluster = useControlPlane();
  const infrastructure = isolatedInfrastructure();
  const topology = createTopology(infrastructure.namespace);
  const operators: Array<{ stop(): Promise<void> }> = [];
  let nats: NatsConnection | undefined;
  let js: JetStreamClient;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    await cluster.kubectl(['apply', '-f', CRD_FILE]);
    await cluster.kubectl([
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      'crd/workerpools.tamp.dev',
    ]);
    const logger = createLogger('operator-test', 'silent');
    nats = await connectNats({ url: infrastructure.natsUrl, name: 'operator-test', logger });
    await provisionTopology(nats, topology, 1);
    js = jetstream(nats);
    jsm = await jetstreamManager(nats);
  });
  afterAll(async () => {
    await Promise.all(operators.map((operator) => operator.stop()));
    await nats?.close();
  });

  return {
    cluster,
    infrastructure,
    topology,
    get jsm() {
      return jsm;
    },

    /** A namespace with the chart's operator RBAC, and a kubeconfig holding its token. */
    async namespace(prefix = 'op'): Promise<{ namespace: string; kubeconfig: string }> {
      const namespace = await cluster.namespace(prefix);
      const rendered = await helm([
        'template',
        'tamp',
        CHART_DIR,
        '--namespace',
        namespace,
        '--show-only',
        'templates/operator-rbac.yaml',
      ]);
      if (rendered.code !== 0) throw new Error(rendered.stderr);
      await cluster.kubectl(['apply', '-f', '-'], rendered.stdout);
      const token = (
        await cluster.kubectl(['-n', namespace, 'create', 'token', OPERATOR_NAME, '--duration=2h'])
      ).trim();
      const kubeconfig = join(cluster.current.kubeconfigPath, `../operator-${namespace}.yaml`);
      await writeTokenKubeconfig(cluster, kubeconfig, token, namespace);
      return { namespace, kubeconfig };
    },

    async createDeployment(namespace: string, name: string, replicas: number): Promise<void> {
      await cluster.kubectl(
        ['apply', '-f', '-'],
        JSON.stringify(deployment(namespace, name, replicas)),
      );
    },

    async applyPool(
      namespace: string,
      name: string,
      spec: Partial<WorkerPoolSpec> & Pick<WorkerPoolSpec, 'deployment' | 'pipeline'>,
    ): Promise<void> {
      const pool = {
        apiVersion: 'tamp.dev/v1alpha1',
        kind: 'WorkerPool',
        metadata: { name, namespace },
        spec,
      };
      await cluster.kubectl(['apply', '-f', '-'], JSON.stringify(pool));
    },

    async pool(namespace: string, name: string): Promise<WorkerPool> {
      return JSON.parse(
        await cluster.kubectl(['-n', namespace, 'get', 'workerpool', name, '-o', 'json']),
      ) as WorkerPool;
    },

    /** spec.replicas of a Deployment; undefined when it does not exist. */
    async replicas(namespace: string, name: string): Promise<number | undefined> {
      const { status, body } = await cluster.api<{ spec: { replicas: number } }>(
        'GET',
        `/apis/apps/v1/namespaces/${namespace}/deployments/${name}/scale`,
      );
      // A Scale leaves out replicas: 0.
      return status === 404 ? undefined : (body.spec.replicas ?? 0);
    },

    async events(namespace: string, pool: string): Promise<PoolEvent[]> {
      const { body } = await cluster.api<{
        items: Array<PoolEvent & { involvedObject: { kind: string; name: string } }>;
      }>('GET', `/api/v1/namespaces/${namespace}/events`);
      return body.items.filter(
        (event) => event.involvedObject.kind === 'WorkerPool' && event.involvedObject.name === pool,
      );
    },

    /**
     * The pool's event reasons once at least `count` were recorded (events follow the scale
     * they announce), after a second in which no other may arrive: an extra event (a second
     * scale announced, a warning repeated) is what this settle window is there to catch.
     */
    async eventReasons(namespace: string, pool: string, count: number): Promise<string[]> {
      const seen = await pollUntil(
        `${count} events of ${pool}`,
        async () => {
          const events = await this.events(namespace, pool);
          return events.length >= count ? events.length : undefined;
        },
        10_000,
      );
      await assertStaysTrue(async () => (await this.events(namespace, pool)).length === seen, {
        forMs: 1_000,
        intervalMs: 200,
        what: `no event of ${pool} after the ${seen} awaited`,
      });
      return (await this.events(namespace, pool)).map((event) => event.reason).sort();
    },

    /** `kubectl get workerpools` as a person would read it. */
    async table(namespace: string): Promise<string> {
      return cluster.kubectl(['-n', namespace, 'get', 'workerpools']);
    },

    /**
     * Jobs queued for a pipeline (nothing consumes them: the Deployment's pods never run). They
     * go out in one flush, not one acknowledged publish after another: an operator polling every
     * second on a loaded machine would otherwise see a part of them and scale up twice.
     */
    async queueJobs(pipeline: Pipeline, count: number): Promise<void> {
      const job = new TextEncoder().encode('{}');
      await Promise.all(
        Array.from({ length: count }, () => js.publish(topology.subjects.jobs[pipeline], job)),
      );
    },

    /** Takes jobs off the queue without acknowledging them: they stay in the backlog. */
    async startJobs(pipeline: Pipeline, count: number): Promise<void> {
      const consumer = topology.consumers[`worker-${pipeline}`];
      const stream = await js.consumers.get(consumer.stream, consumer.durableName);
      const messages = await stream.fetch({ max_messages: count, expires: 2_000 });
      for await (const _ of messages) {
        // Fetched and left unacknowledged until the ack wait: counted as in progress.
      }
    },

    /** As workers finishing every job: the queue is empty. */
    async drainJobs(pipeline: Pipeline): Promise<void> {
      await jsm.streams.purge(topology.streams.jobs.name, {
        filter: topology.subjects.jobs[pipeline],
      });
      const consumer = topology.consumers[`worker-${pipeline}`];
      // Purging drops waiting messages; unacknowledged deliveries go with their messages.
      await pollUntil(
        'an empty consumer',
        async () => {
          const info = await jsm.consumers.info(consumer.stream, consumer.durableName);
          return info.num_pending + info.num_ack_pending === 0 ? true : undefined;
        },
        10_000,
      );
    },

    async startOperator(options: {
      kubeconfig: string;
      namespace: string;
      env?: Record<string, string>;
    }): Promise<OperatorProcess> {
      const operator = await OperatorProcess.start({
        NATS_URL: infrastructure.natsUrl,
        NATS_NAMESPACE: infrastructure.namespace,
        KUBECONFIG: options.kubeconfig,
        WATCH_NAMESPACE: options.namespace,
        LEASE_NAME: OPERATOR_NAME,
        LEASE_DURATION_SECONDS: String(TEST_LEASE.durationSeconds),
        LEASE_RENEW_DEADLINE_MS: String(TEST_LEASE.renewDeadlineMs),
        LEASE_RETRY_PERIOD_MS: String(TEST_LEASE.retryPeriodMs),
        REQUEST_TIMEOUT_MS: '2000',
        ...options.env,
      });
      operators.push(operator);
      return operator;
    },

    /**
     * The operator in this process, wired as services/operator/src/service.ts wires it, with
     * the reconcilers reading `clock`: how a test moves through a stabilization window without
     * waiting it out. Same RBAC (the namespace's ServiceAccount token) and same NATS topology
     * as startOperator; leases and poll intervals keep real time.
     */
    async startOperatorInProcess(options: {
      kubeconfig: string;
      namespace: string;
      clock: () => Date;
    }): Promise<InProcessOperator> {
      const operator = await InProcessOperator.start({
        natsUrl: infrastructure.natsUrl,
        topology,
        ...options,
      });
      operators.push(operator);
      return operator;
    },
  };
}

/**
 * Resolves once `operator` has finished `count` more reconciles than when called (every poll
 * of a pool makes one, whatever it does): how a test knows the operator has looked again at a
 * pool it must leave alone, instead of sleeping for some polls' worth of time.
 */
export async function moreReconciles(
  operator: { reconciles(): Promise<number> },
  count: number,
  timeoutMs = 30_000,
): Promise<void> {
  const before = await operator.reconciles();
  await pollUntil(
    `${count} more reconciles`,
    async () => ((await operator.reconciles()) >= before + count ? true : undefined),
    timeoutMs,
    50,
  );
}

/**
 * The operator's reconcilers' clock in a test: it follows the system clock until the test sets
 * it, then reads exactly the time it was set to until it is set again. A test passes a
 * stabilization window in a step instead of waiting it out, and each reconcile it waits for
 * is planned at the very moment it set (however long the reconcile takes to come round).
 */
export class TestClock {
  private fixedMs: number | undefined;

  readonly now = (): Date => new Date(this.fixedMs ?? Date.now());

  /** From now on the clock reads `at`. It never moves backwards. */
  setTo(at: number): void {
    if (at < this.now().getTime()) throw new Error('a TestClock only moves forward');
    this.fixedMs = at;
  }
}

/** One sample of a metric in Prometheus text: the first series whose labels include `labels`. */
function sampleOf(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const matches = Object.entries(labels).every(([key, value]) =>
      line.includes(`${key}="${value}"`),
    );
    if (matches) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

/** Reconciles finished so far, whatever they did: the sum of tamp_operator_reconciles_total. */
function reconcilesIn(text: string): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('tamp_operator_reconciles_total{')) {
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return total;
}

/** The operator's parts in the test's own process (see startOperatorInProcess). */
export class InProcessOperator {
  private stopped: Promise<void> | undefined;

  private constructor(
    private readonly operator: Operator,
    private readonly backlog: JetStreamBacklog,
    private readonly registry: Registry,
  ) {}

  static async start(options: {
    kubeconfig: string;
    namespace: string;
    natsUrl: string;
    topology: Topology;
    clock: () => Date;
  }): Promise<InProcessOperator> {
    const kubeConfig = loadKubeConfig(options.kubeconfig)!;
    const logger = createLogger('operator', process.env.TEST_LOG_LEVEL ?? 'silent');
    const registry = new Registry();
    const backlog = new JetStreamBacklog({
      url: options.natsUrl,
      topology: options.topology,
      timeoutMs: 2_000,
      logger,
    });
    const operator = new Operator({
      api: new KubernetesApi(kubeConfig, options.namespace, 2_000),
      backlog,
      election: {
        leaseName: OPERATOR_NAME,
        identity: `in-process_${randomUUID()}`,
        leaseDurationSeconds: TEST_LEASE.durationSeconds,
        renewDeadlineMs: TEST_LEASE.renewDeadlineMs,
        retryPeriodMs: TEST_LEASE.retryPeriodMs,
      },
      concurrency: 4,
      metrics: createOperatorMetrics(registry),
      logger,
      clock: options.clock,
    });
    backlog.start();
    await operator.start();
    return new InProcessOperator(operator, backlog, registry);
  }

  async metric(name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
    return sampleOf(await this.registry.metrics(), name, labels);
  }

  async reconciles(): Promise<number> {
    return reconcilesIn(await this.registry.metrics());
  }

  /** Finishes reconciles under way, releases the lease, stops watching: a graceful stop. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      await this.operator.stop();
      await this.backlog.stop();
    })();
    return this.stopped;
  }
}

export type OperatorWorld = ReturnType<typeof useOperatorWorld>;

/** The operator as its own process, exactly as `node services/operator/src/main.ts` runs. */
export class OperatorProcess {
  readonly lines: string[] = [];

  private constructor(
    private readonly child: ChildProcess,
    readonly opsPort: number,
  ) {
    for (const stream of [child.stdout, child.stderr]) {
      if (stream === null) continue;
      createInterface({ input: stream }).on('line', (line) => {
        this.lines.push(line);
        if (this.lines.length > 2_000) this.lines.shift();
      });
    }
  }

  static async start(env: Record<string, string>): Promise<OperatorProcess> {
    const opsPort = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', 'services/operator/src/main.ts'], {
      cwd: PROJECT_ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: '/nonexistent',
        LOG_LEVEL: 'info',
        OPS_HOST: '127.0.0.1',
        OPS_PORT: String(opsPort),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const operator = new OperatorProcess(child, opsPort);
    try {
      await pollUntil('the operator to be ready', () => operator.ok('/readyz'), 60_000);
    } catch (error) {
      await operator.stop();
      throw new Error(`${String(error)}\n${operator.lines.slice(-30).join('\n')}`);
    }
    return operator;
  }

  get pid(): number {
    return this.child.pid!;
  }

  get exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** The identity it campaigns with, from its own start-up log line. */
  get identity(): string | undefined {
    for (const line of this.lines) {
      const match = /"identity":"([^"]+)"/.exec(line);
      if (match !== null) return match[1];
    }
    return undefined;
  }

  async ok(path: string): Promise<true | undefined> {
    try {
      const response = await fetch(`http://127.0.0.1:${this.opsPort}${path}`, {
        signal: AbortSignal.timeout(1_000),
      });
      return response.ok ? true : undefined;
    } catch {
      return undefined;
    }
  }

  /** One sample of a metric (first series whose labels include `labels`). */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
    return sampleOf(await this.metricsText(), name, labels);
  }

  /** Reconciles finished so far, whatever they did (each pool's poll makes one). */
  async reconciles(): Promise<number> {
    return reconcilesIn(await this.metricsText());
  }

  private async metricsText(): Promise<string> {
    const response = await fetch(`http://127.0.0.1:${this.opsPort}/metrics`, {
      signal: AbortSignal.timeout(2_000),
    });
    return response.text();
  }

  /** SIGTERM: a graceful stop (releases the lease); SIGKILL after 15 s. */
  async stop(): Promise<void> {
    await stopProcess(this.child, 15_000);
  }

  /** SIGKILL: the process dies without releasing anything, as on a node failure. */
  async kill(): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill('SIGKILL');
    await exited;
  }
}

/**
 * A NATS server of the test's own, to stop and start again (the shared one must stay up), on
 * loopback; with JetStream (file storage in `storeDir`, so a restart keeps the backlog) or
 * without.
 */
export class TestNatsServer {
  private child: ChildProcess | undefined;

  constructor(
    readonly port: number,
    private readonly storeDir: string | undefined,
  ) {}

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const args = ['-a', '127.0.0.1', '-p', String(this.port)];
    if (this.storeDir !== undefined) args.push('-js', '-sd', this.storeDir);
    this.child = spawn(toolPath('nats-server'), args, { stdio: 'ignore' });
    await pollUntil(
      'nats-server to listen',
      async () => (await tcpOpen(this.port)) || undefined,
      20_000,
    );
  }

  async stop(): Promise<void> {
    if (this.child !== undefined) await stopProcess(this.child, 5_000);
    this.child = undefined;
  }
}

/** A kubeconfig that authenticates with a ServiceAccount token (as a pod's mounted token). */
async function writeTokenKubeconfig(
  cluster: TestControlPlane,
  path: string,
  token: string,
  namespace: string,
): Promise<void> {
  const ca = await readFile(cluster.current.credentials.caFile);
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'test',
        cluster: {
          server: cluster.current.server,
          'certificate-authority-data': ca.toString('base64'),
        },
      },
    ],
    users: [{ name: 'operator', user: { token } }],
    contexts: [{ name: 'test', context: { cluster: 'test', user: 'operator', namespace } }],
    'current-context': 'test',
  };
  await writeFile(path, stringify(config), { mode: 0o600 });
}

/** A Deployment whose pods are created but never scheduled (the control plane has no node). */
function deployment(namespace: string, name: string, replicas: number) {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: 'worker', image: 'registry.invalid/worker:1' }] },
      },
    },
  };
}

export type { Topology };
export { pollUntil };
