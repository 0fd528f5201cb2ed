import { execFile as execFileCallback, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import {
  createTopology,
  creditCost,
  JOB_STATUSES,
  TERMINAL_STATUSES,
  WORKER_SERVICES,
} from '@tamp/proto';
import {
  RELEASE,
  startTampCluster,
  TAMP_NAMESPACE,
  type TampCluster,
} from '@tamp/scripts/cluster/tamp-cluster';
import { photo, speechWav } from '@tamp/scripts/fixtures/media';
import { generateLongWav, probeDurationSec } from '@tamp/scripts/fixtures/speech';
import { kubectl as kubectlWithTimeout } from '@tamp/scripts/infra/kubernetes/api';
import { mountsUnder } from '@tamp/scripts/infra/kubernetes/cluster';
import { CLUSTER_NETWORK } from '@tamp/scripts/infra/kubernetes/node-config';
import { isAlive, pollUntil, sleep } from '@tamp/scripts/infra/kubernetes/processes';
import type { BooksSource } from '@tamp/scripts/load/accounting';
import { MongoClient } from 'mongodb';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyTampDelivery } from '../../services/webhook/examples/verify-delivery';
import { type BudgetStatus, BudgetWatch } from '../support/disruption-budgets';
import {
  DUPLICATE_WINDOW_MS,
  expectCompletedOnceAfterOneCrash,
  jobDocument as jobDocumentIn,
  ledgerOf as ledgerIn,
} from '../support/exactly-once';
import {
  type DisruptedRun,
  expectNothingLostOrChargedTwice,
  loadDuring,
} from '../support/load-during';
import { PodLogKeeper } from '../support/pod-log-keeper';
import { assertStaysTrue } from '../support/stays-true';

const _execFile = promisify(execFileCallback);

/**
 * Tamp installed with Helm on a real Kubernetes cluster (scripts/infra/kubernetes; one node, or
 * TAMP_CLUSTER_NODES=2 for two and a drain), from images built here by buildah from docker/, its NATS a
 * cluster of three pods, used as an API client and an operator would: through the chart's
 * Services, a presigned upload, a webhook receiver pod, a worker pod killed mid-job, the NATS pod
 * leading the JOBS stream deleted under load, the second node drained under load (two nodes), a
 * rolling upgrade under load, and an uninstall. docs/kubernetes.md describes the same steps as commands.
 */
const CLUSTER_NODES = Number(process.env.TAMP_CLUSTER_NODES ?? 1);

/**
 * The receiver's fixed Service address, allow-listed in the chart's values as an operator would.
 * In the lower band of the /24 Service range (its first 16 addresses), which the API server
 * hands out to Services without a fixed address only once the rest is taken: 10.0.0.200 was
 * once already given to a dependency's Service when the receiver asked for it.
 */
const RECEIVER_IP = '10.0.0.10';
const RECEIVER_NAMESPACE = 'webhook-receiver';

interface Job {
  id: string;
  status: string;
  result?: { outputUrl?: string; outputText?: string; metrics?: Record<string, unknown> };
  error?: unknown;
}
interface Account {
  accountId: string;
  apiKey: string;
  webhookSecret: string;
}
interface Delivery {
  headers: Record<string, string>;
  body: string;
}

let tamp: TampCluster;
let dataDir: string;
/** The pods' logs, kept also for pods a disruption deleted. */
let podLogs: PodLogKeeper;
let account: Account;
let mongo: MongoClient;
/** Where a disrupted run's books are read: the public and admin APIs, FerretDB and NATS. */
let books: Omit<BooksSource, 'apiKey' | 'accountId'>;

async function api<T>(
  method: string,
  path: string,
  body?: unknown,
  base = tamp.publicUrl,
  token = account?.apiKey,
): Promise<{ status: number; data: T; raw: unknown }> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  const raw = (await response.json()) as { data: T };
  return { status: response.status, data: raw.data, raw };
}

const admin = <T>(method: string, path: string, body?: unknown) =>
  api<T>(method, path, body, tamp.adminUrl, tamp.adminToken);

async function upload(filename: string, bytes: Buffer): Promise<string> {
  const created = await api<{ id: string; uploadUrl: string; contentType: string }>(
    'POST',
    '/v1/upload',
    { filename, size: bytes.length },
  );
  expect(created.status, JSON.stringify(created.raw)).toBe(200);
  // Signed for the endpoint this client reaches (the chart's s3.publicEndpoint).
  expect(new URL(created.data.uploadUrl).origin).toBe(tamp.s3PublicUrl);
  const put = await fetch(created.data.uploadUrl, {
    method: 'PUT',
    headers: { 'content-type': created.data.contentType },
    body: bytes,
  });
  expect(put.status, await put.text()).toBe(200);
  return created.data.id;
}

async function waitForTerminal(id: string, timeoutMs: number): Promise<Job> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const wait = Math.max(1, Math.min(20, Math.floor((deadline - Date.now()) / 1000)));
    try {
      const response = await api<Job>('GET', `/v1/jobs/${id}?wait=${wait}`);
      if (response.status === 200 && ['completed', 'failed'].includes(response.data.status)) {
        return response.data;
      }
    } catch {
      // A gateway pod replaced mid-request during the rolling upgrade: ask again.
      await sleep(500);
    }
  }
  throw new Error(`job ${id} did not finish within ${timeoutMs} ms`);
}

async function download(url: string): Promise<Buffer> {
  expect(new URL(url).origin).toBe(tamp.s3PublicUrl);
  const response = await fetch(url, { signal: AbortSignal.timeout(60_000) });
  expect(response.status).toBe(200);
  return Buffer.from(await response.arrayBuffer());
}

const ledgerOf = (jobId: string) => ledgerIn(mongo.db('tamp'), jobId);

/** Each job reserved once and never refunded, throughout the duplicate window. */
function chargedOnceEach(jobIds: readonly string[]): Promise<void> {
  return assertStaysTrue(
    async () => {
      for (const id of jobIds) expect(await ledgerOf(id), id).toEqual({ reserve: 1, refund: 0 });
    },
    { forMs: DUPLICATE_WINDOW_MS, intervalMs: 500, what: 'one charge per job' },
  );
}

const jobDocument = (jobId: string) => jobDocumentIn(mongo.db('tamp'), jobId);

async function credits(): Promise<number> {
  const found = await mongo
    .db('tamp')
    .collection<{ _id: string; allowanceRemaining: number; grantedRemaining: number }>('accounts')
    .findOne({ _id: account.accountId });
  if (found === null) throw new Error('account not found');
  return found.allowanceRemaining + found.grantedRemaining;
}

/** The cluster address of a Service of the dependencies (k8s/dependencies). */
async function dependencyIp(service: string): Promise<string> {
  const jsonpath = 'jsonpath={.spec.clusterIP}';
  return (
    await tamp.kubectl(['-n', 'tamp-deps', 'get', 'service', service, '-o', jsonpath])
  ).trim();
}

/** The pods of `namespace`, or of every namespace for ''. */
async function pods(namespace: string): Promise<
  Array<{
    metadata: {
      name: string;
      labels: Record<string, string>;
      deletionTimestamp?: string;
      ownerReferences?: Array<{ kind: string }>;
    };
    spec: { nodeName?: string };
    status: {
      phase: string;
      podIP: string;
      conditions?: Array<{ type: string; status: string }>;
      containerStatuses?: Array<{ image: string; ready: boolean }>;
    };
  }>
> {
  const where = namespace === '' ? ['--all-namespaces'] : ['-n', namespace];
  return JSON.parse(await tamp.kubectl(['get', 'pods', ...where, '-o', 'json'])).items;
}

async function disruptionBudgets(): Promise<Array<{ name: string; status: BudgetStatus }>> {
  const list = JSON.parse(await tamp.kubectl(['get', 'pdb', '-A', '-o', 'json'])) as {
    items: Array<{
      metadata: { namespace: string; name: string };
      status?: { currentHealthy?: number; desiredHealthy?: number; expectedPods?: number };
    }>;
  };
  return list.items.map((item) => ({
    name: `${item.metadata.namespace}/${item.metadata.name}`,
    status: {
      currentHealthy: item.status?.currentHealthy ?? 0,
      desiredHealthy: item.status?.desiredHealthy ?? 0,
      expectedPods: item.status?.expectedPods ?? 0,
    },
  }));
}

interface Deployment {
  metadata: { name: string; generation: number };
  status: { updatedReplicas?: number };
  spec: { replicas: number; template: { metadata: { annotations?: Record<string, string> } } };
}

async function deployments(): Promise<Deployment[]> {
  return JSON.parse(await tamp.kubectl(['-n', TAMP_NAMESPACE, 'get', 'deployments', '-o', 'json']))
    .items;
}

async function deploymentGenerations(): Promise<Map<string, number>> {
  return new Map((await deployments()).map((d) => [d.metadata.name, d.metadata.generation]));
}

/** `helm upgrade` changing only a pod annotation: every Deployment rolls, nothing else changes. */
function rollEveryDeployment(): Promise<string> {
  return tamp.helm(
    [
      'upgrade',
      RELEASE,
      'charts/tamp',
      '--namespace',
      TAMP_NAMESPACE,
      '--reuse-values',
      '--set-string',
      `podAnnotations.rollout=upgrade-${Date.now()}`,
      '--wait',
      '--timeout',
      '10m',
    ],
    900_000,
  );
}

/** Every Deployment has a newer generation than before, fully rolled out with the annotation. */
async function expectEveryDeploymentRolled(before: Map<string, number>): Promise<void> {
  for (const deployment of await deployments()) {
    const name = deployment.metadata.name;
    expect(deployment.metadata.generation, name).toBeGreaterThan(before.get(name)!);
    expect(deployment.status.updatedReplicas, name).toBe(deployment.spec.replicas);
    expect(deployment.spec.template.metadata.annotations?.rollout).toMatch(/^upgrade-/);
  }
}

async function capturePods(moment: string): Promise<void> {
  const table = await tamp.kubectl(['get', 'pods', '-A', '-o', 'wide']);
  console.log(`kubectl get pods -A (${moment}):\n${table}`);
}

/**
 * Where a disrupted run's loose ends stand, printed before its books are asserted: creations of
 * unknown outcome (their admissions and the job pods' reconciler lines), and jobs that never
 * finished (their documents, the worker consumers' state, and every kept log line naming them,
 * also from pods the disruption replaced).
 */
async function explainDisruptedRun(run: DisruptedRun): Promise<void> {
  const db = mongo.db('tamp');
  const unsettled = run.creations.flatMap((creation) => creation.unsettled);
  for (const jobId of unsettled.slice(0, 10)) {
    const admission = await db.collection('admissions').findOne({ _id: jobId as never });
    const job = await db
      .collection('jobs')
      .findOne({ _id: jobId as never }, { projection: { status: 1, createdAt: 1, updatedAt: 1 } });
    console.log(
      `unsettled ${jobId}: admission ${JSON.stringify(admission)}, job ${JSON.stringify(job)}`,
    );
  }
  if (unsettled.length > 0) {
    const about = await componentLogLines(
      'job',
      /sweep failed|abandoned creation|not released/,
      40,
    );
    console.log(`job pods on abandoned creations:\n${about.join('\n')}`);
  }
  if (run.unfinishedJobIds.length === 0) return;
  console.log(`worker consumers: ${await workerConsumerStates()}`);
  for (const jobId of run.unfinishedJobIds.slice(0, 3)) {
    const job = await db
      .collection('jobs')
      .findOne({ _id: jobId as never }, { projection: { input: 0 } });
    const lines = await podLogs.linesMentioning(jobId);
    console.log(`unfinished ${jobId}: ${JSON.stringify(job)}\n${lines.join('\n')}`);
  }
}

async function workerConsumerStates(): Promise<string> {
  const nats = await connect({ servers: books.natsUrl, ignoreClusterUpdates: true });
  try {
    const manager = await jetstreamManager(nats);
    const { streams, consumers } = createTopology('');
    const states = [];
    for (const name of Object.values(WORKER_SERVICES)) {
      const info = await manager.consumers.info(streams.jobs.name, consumers[name].durableName);
      states.push(
        `${name} pending ${info.num_pending}, ack pending ${info.num_ack_pending}, redelivered ${info.num_redelivered}, waiting ${info.num_waiting}`,
      );
    }
    return states.join('; ');
  } catch (error) {
    return `not readable: ${String(error)}`;
  } finally {
    await nats.close();
  }
}

/**
 * The warnings, errors and NATS reconnections the pods of these components still hold (evicted
 * pods' are gone).
 */
async function printWarnings(components: string[]): Promise<void> {
  for (const component of components) {
    const warnings = await componentLogLines(component, /"level":(40|50|60)|NATS reconnected/, 100);
    console.log(`${component} pods' warnings:\n${warnings.join('\n')}`);
  }
}

/** The last `count` lines matching `pattern` that the pods of a component logged. */
async function componentLogLines(
  component: string,
  pattern: RegExp,
  count: number,
): Promise<string[]> {
  const logs = await tamp
    .kubectl([
      '-n',
      TAMP_NAMESPACE,
      'logs',
      '-l',
      `app.kubernetes.io/component=${component}`,
      '--prefix',
      '--tail=-1',
    ])
    .catch((error: unknown) => String(error));
  return logs
    .split('\n')
    .filter((line) => pattern.test(line))
    .slice(-count);
}

async function receivedDeliveries(): Promise<Delivery[]> {
  const port = await tamp.cluster.expose(RECEIVER_IP, 8080);
  const response = await fetch(`http://127.0.0.1:${port}/deliveries`);
  return (await response.json()) as Delivery[];
}

const UNFINISHED_STATUSES = JOB_STATUSES.filter((status) => !TERMINAL_STATUSES.includes(status));

/**
 * Waits (bounded) for the first Tamp pod to start terminating, then samples how many jobs are
 * queued or processing until the rollout ends, and returns the most seen. One sample at the first
 * termination can find none on a fast machine, where a queued job lives well under a second; the
 * rollout replaces pods for tens of seconds.
 */
async function mostUnfinishedJobsWhilePodsAreReplaced(rollout: Promise<unknown>): Promise<number> {
  await pollUntil(
    'a Tamp pod to start terminating',
    async () =>
      (await pods(TAMP_NAMESPACE)).some((pod) => pod.metadata.deletionTimestamp !== undefined)
        ? true
        : undefined,
    300_000,
    250,
  );
  let rolledOut = false;
  const settled = rollout.finally(() => {
    rolledOut = true;
  });
  const jobs = mongo.db('tamp').collection('jobs');
  let most = 0;
  for (let sample = 0; sample < 4_000 && !rolledOut; sample++) {
    const unfinished = await jobs.countDocuments({ status: { $in: UNFINISHED_STATUSES } });
    most = Math.max(most, unfinished);
    await sleep(250);
  }
  await settled;
  return most;
}

/** A receiver that keeps every delivery (raw body and headers) and lists them on GET. */
const RECEIVER_SCRIPT = `
const deliveries = [];
require('node:http').createServer((request, response) => {
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    if (request.method === 'GET') {
      response.setHeader('content-type', 'application/json');
      return response.end(JSON.stringify(deliveries));
    }
    deliveries.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
    response.statusCode = 204;
    response.end();
  });
}).listen(8080);
`;

function receiverManifests(image: string): string {
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: RECEIVER_NAMESPACE } },
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'receiver', namespace: RECEIVER_NAMESPACE, labels: { app: 'receiver' } },
      spec: {
        automountServiceAccountToken: false,
        // Its list of deliveries lives in memory: a drain of the other node must not move it.
        nodeSelector: { 'kubernetes.io/hostname': CLUSTER_NETWORK.nodeName },
        securityContext: {
          runAsNonRoot: true,
          runAsUser: 10001,
          seccompProfile: { type: 'RuntimeDefault' },
        },
        containers: [
          {
            name: 'receiver',
            image,
            imagePullPolicy: 'Never',
            command: ['node', '-e', RECEIVER_SCRIPT],
            ports: [{ containerPort: 8080 }],
            readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1 },
            securityContext: {
              allowPrivilegeEscalation: false,
              readOnlyRootFilesystem: true,
              capabilities: { drop: ['ALL'] },
            },
          },
        ],
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'receiver', namespace: RECEIVER_NAMESPACE },
      spec: {
        clusterIP: RECEIVER_IP,
        selector: { app: 'receiver' },
        ports: [{ port: 8080, targetPort: 8080 }],
      },
    },
  ]
    .map((object) => JSON.stringify(object))
    .join('\n');
}

describe(`Tamp on a real Kubernetes cluster of ${CLUSTER_NODES} node(s)`, () => {
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'tamp-cluster-test-'));
    const started = Date.now();
    tamp = await startTampCluster({
      dataDir,
      nodes: CLUSTER_NODES,
      log: (message) =>
        console.log(`[cluster ${((Date.now() - started) / 1000).toFixed(0)} s] ${message}`),
      values: {
        // As an operator would: plain http and the receiver's address allowed for webhooks.
        webhook: { allowHttp: true, allowedPrivateCidrs: [`${RECEIVER_IP}/32`] },
        // The default install's WorkerPools scale the workers from the JetStream backlog; the
        // audio pool gets a short window so the test sees the way back down.
        workerAudio: {
          autoscaling: {
            minReplicas: 1,
            maxReplicas: 3,
            targetBacklogPerReplica: 1,
            scaleDownStabilizationSeconds: 20,
            pollIntervalSeconds: 2,
          },
        },
      },
      beforeInstall: async (kubectl, images) => {
        const gateway = images.find((image) => image.name.includes('tamp-gateway'))!.name;
        await kubectl(['apply', '-f', '-'], receiverManifests(gateway));
      },
    });
    console.log(`cluster and Tamp ready in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    podLogs = new PodLogKeeper(tamp.cluster.podLogDirs, join(dataDir, 'kept-pod-logs'));
    podLogs.start();
    const mongoPort = await tamp.cluster.expose(await dependencyIp('ferretdb'), 27017);
    mongo = new MongoClient(`mongodb://127.0.0.1:${mongoPort}/`, { directConnection: true });
    const natsPort = await tamp.cluster.expose(await dependencyIp('nats'), 4222);
    books = {
      baseUrl: tamp.publicUrl,
      adminUrl: tamp.adminUrl,
      adminToken: tamp.adminToken,
      mongoUrl: `mongodb://127.0.0.1:${mongoPort}/?directConnection=true`,
      natsUrl: `nats://127.0.0.1:${natsPort}`,
    };
    const created = await admin<Account>('POST', '/admin/accounts', {
      plan: 'pro',
      credits: 100_000,
    });
    expect(created.status, JSON.stringify(created.raw)).toBe(201);
    account = created.data;
  }, 3_600_000);

  afterAll(async () => {
    await podLogs?.stop();
    await mongo?.close();
    await tamp?.stop();
    if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
  }, 300_000);

  it('runs every Tamp pod Running and Ready from the images built here, and passes helm test', async () => {
    await capturePods('after helm install --wait');
    const tampPods = await pods(TAMP_NAMESPACE);
    expect(tampPods.length).toBeGreaterThanOrEqual(9);
    for (const pod of tampPods) {
      expect(pod.status.phase, pod.metadata.name).toBe('Running');
      expect(
        pod.status.conditions?.find((c) => c.type === 'Ready')?.status,
        pod.metadata.name,
      ).toBe('True');
      for (const container of pod.status.containerStatuses ?? []) {
        expect(container.image).toMatch(/^tamp\.local\/tamp-[a-z-]+:/);
      }
    }
    // A default install autoscales every worker through a WorkerPool the operator reconciles.
    const workerPools = JSON.parse(
      await tamp.kubectl(['get', 'workerpools', '--all-namespaces', '-o', 'json']),
    ) as { items: Array<{ metadata: { name: string } }> };
    expect(workerPools.items.map((pool) => pool.metadata.name).sort()).toEqual([
      `${RELEASE}-worker-audio`,
      `${RELEASE}-worker-image`,
      `${RELEASE}-worker-text`,
    ]);
    // The chart's topology spread puts a service's replicas on different nodes where it can.
    const gatewayNodes = tampPods
      .filter((pod) => pod.metadata.labels['app.kubernetes.io/component'] === 'gateway')
      .map((pod) => pod.spec.nodeName);
    expect(new Set(gatewayNodes).size).toBe(Math.min(CLUSTER_NODES, gatewayNodes.length));
    const output = await tamp.helm(
      // No --logs: the hook pod is deleted once it succeeded (hook-delete-policy).
      ['test', RELEASE, '--namespace', TAMP_NAMESPACE],
      300_000,
    );
    expect(output).toContain('Phase:          Succeeded');
    expect(output).not.toContain('FAIL');
  }, 600_000);

  it('runs an image, a text and an audio job through the gateway Service', async () => {
    const imageId = await upload('photo.jpg', await photo(1600, 1200));
    const imageJob = await api<Job>('POST', '/v1/image', { imageId, preset: 'thumbnail' });
    expect([200, 202], JSON.stringify(imageJob.raw)).toContain(imageJob.status);
    const image = await waitForTerminal(imageJob.data.id, 120_000);
    expect(image.status, JSON.stringify(image)).toBe('completed');
    const thumbnail = await sharp(await download(image.result!.outputUrl!)).metadata();
    expect(thumbnail.format).toBe('webp');
    expect(Math.max(thumbnail.width!, thumbnail.height!)).toBeLessThan(1600);

    const text = await api<Job>('POST', '/v1/text', {
      text: 'Hello   Kubernetes!\n\n\n\nBye.',
      preset: 'medium',
    });
    const textJob = await waitForTerminal(text.data.id, 60_000);
    expect(textJob.result?.outputText).toBe('Hello Kubernetes!\n\nBye.');

    const audioId = await upload('speech.wav', await speechWav('Tamp runs on Kubernetes now.'));
    const audio = await api<Job>('POST', '/v1/audio', { audioId, preset: 'podcast' });
    expect(audio.status, JSON.stringify(audio.raw)).toBe(202);
    const audioJob = await waitForTerminal(audio.data.id, 180_000);
    expect(audioJob.status, JSON.stringify(audioJob)).toBe('completed');
    const encoded = join(dataDir, 'result-audio');
    await writeFile(encoded, await download(audioJob.result!.outputUrl!));
    expect(await probeDurationSec(encoded)).toBeGreaterThan(1);
  }, 600_000);

  it('delivers a signed webhook to a receiver pod allow-listed through the chart values', async () => {
    const queued = await api<Job>('POST', '/v1/text', {
      text: `Hello   receiver ${Date.now()}`,
      preset: 'chill',
      webhookUrl: `http://${RECEIVER_IP}:8080/hook`,
    });
    expect(queued.status, JSON.stringify(queued.raw)).toBe(202);
    const delivery = await pollUntil(
      'the webhook delivery',
      async () => (await receivedDeliveries()).find((d) => d.body.includes(queued.data.id)),
      120_000,
      1_000,
    );
    const verification = verifyTampDelivery(
      Buffer.from(delivery.body),
      delivery.headers,
      account.webhookSecret,
    );
    expect(verification).toMatchObject({ ok: true });
    if (verification.ok) {
      expect(verification.event).toMatchObject({
        event: 'job.completed',
        job: { id: queued.data.id, status: 'completed' },
      });
    }
  }, 300_000);

  it('serves /metrics from every pod, and the API server accepts the monitoring objects', async () => {
    for (const pod of await pods(TAMP_NAMESPACE)) {
      const port = await tamp.cluster.expose(pod.status.podIP, 9090);
      const response = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(response.status, pod.metadata.name).toBe(200);
      expect(await response.text(), pod.metadata.name).toContain('process_cpu_seconds_total');
    }
    const monitors = JSON.parse(
      await tamp.kubectl([
        '-n',
        TAMP_NAMESPACE,
        'get',
        'servicemonitors,prometheusrules',
        '-o',
        'json',
      ]),
    ) as { items: Array<{ kind: string }> };
    expect(monitors.items.map((item) => item.kind).sort()).toEqual([
      'PrometheusRule',
      'ServiceMonitor',
    ]);
    // The CRDs' schemas validate: a malformed object is refused by the API server.
    await expect(
      tamp.kubectl(
        ['-n', TAMP_NAMESPACE, 'apply', '--dry-run=server', '-f', '-'],
        JSON.stringify({
          apiVersion: 'monitoring.coreos.com/v1',
          kind: 'ServiceMonitor',
          metadata: { name: 'malformed' },
          spec: { selector: {}, endpoints: [{ port: 'ops', interval: 'often' }] },
        }),
      ),
    ).rejects.toThrow(/interval/);
  }, 300_000);

  it('completes a job exactly once, charged once, when its worker pod is force-deleted mid-job', async () => {
    const wav = join(dataDir, 'long.wav');
    // Long enough to be running when the pod goes: the static ffmpeg takes a `lecture` job
    // through 120 s of speech in about 3 s of CPU, which the delete below did not catch.
    await generateLongWav(wav, 480);
    const wavBytes = await readFile(wav);
    const audioId = await upload('long.wav', wavBytes);
    const before = await credits();
    const created = await api<Job>('POST', '/v1/audio', {
      audioId,
      preset: 'lecture',
      webhookUrl: `http://${RECEIVER_IP}:8080/hook`,
    });
    expect(created.status, JSON.stringify(created.raw)).toBe(202);
    const jobId = created.data.id;
    await pollUntil(
      'the audio job to be processing',
      async () => ((await jobDocument(jobId))?.status === 'processing' ? true : undefined),
      120_000,
      200,
    );
    const [worker] = (await pods(TAMP_NAMESPACE)).filter(
      (pod) => pod.metadata.labels['app.kubernetes.io/component'] === 'worker-audio',
    );
    await tamp.kubectl([
      '-n',
      TAMP_NAMESPACE,
      'delete',
      'pod',
      worker!.metadata.name,
      '--grace-period=0',
      '--force',
    ]);
    // Deleted while running: otherwise this proves nothing.
    expect(await jobDocument(jobId)).toMatchObject({ status: 'processing', attempts: 1 });

    const job = await waitForTerminal(jobId, 420_000);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    await expectCompletedOnceAfterOneCrash(mongo.db('tamp'), jobId, receivedDeliveries);
    expect(before - (await credits())).toBe(creditCost('audio', wavBytes.byteLength));
  }, 600_000);

  it('scales worker-audio up for a burst of audio jobs and back to minReplicas after (WorkerPool)', async () => {
    interface Pool {
      status?: {
        backlog?: number;
        replicas?: number;
        desiredReplicas?: number;
        conditions?: Array<{ type: string; status: string }>;
      };
    }
    const pool = async () =>
      JSON.parse(
        await tamp.kubectl([
          '-n',
          TAMP_NAMESPACE,
          'get',
          'workerpool',
          'tamp-worker-audio',
          '-o',
          'json',
        ]),
      ) as Pool;
    const readyAudioPods = async () =>
      (await pods(TAMP_NAMESPACE)).filter(
        (pod) =>
          pod.metadata.labels['app.kubernetes.io/component'] === 'worker-audio' &&
          pod.status.conditions?.find((condition) => condition.type === 'Ready')?.status === 'True',
      ).length;
    const timeline: string[] = [];
    const snapshot = async () => {
      const table = await tamp.kubectl(['-n', TAMP_NAMESPACE, 'get', 'workerpools']);
      timeline.push(`${new Date().toISOString()}\n${table.trim()}`);
    };
    await pollUntil(
      'the WorkerPool to be Ready at its minimum',
      async () => {
        const status = (await pool()).status;
        const ready = status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
        return ready && status?.desiredReplicas === 1 ? true : undefined;
      },
      120_000,
      1_000,
    );
    await snapshot();

    const wav = join(dataDir, 'burst.wav');
    await generateLongWav(wav, 40);
    const wavBytes = await readFile(wav);
    const audioId = await upload('burst.wav', wavBytes);
    const before = await credits();
    const jobIds: string[] = [];
    for (let index = 0; index < 6; index++) {
      const created = await api<Job>('POST', '/v1/audio', { audioId, preset: 'podcast' });
      expect(created.status, JSON.stringify(created.raw)).toBe(202);
      jobIds.push(created.data.id);
    }
    let peakBacklog = 0;
    await pollUntil(
      'worker-audio to run 3 Ready pods',
      async () => {
        peakBacklog = Math.max(peakBacklog, (await pool()).status?.backlog ?? 0);
        await snapshot();
        return (await readyAudioPods()) === 3 ? true : undefined;
      },
      300_000,
      2_000,
    );
    expect(peakBacklog).toBeGreaterThanOrEqual(3);
    const events = await tamp.kubectl([
      '-n',
      TAMP_NAMESPACE,
      'get',
      'events',
      '--field-selector',
      'involvedObject.kind=WorkerPool,involvedObject.name=tamp-worker-audio',
      '-o',
      'jsonpath={.items[*].reason}',
    ]);
    expect(events).toContain('ScaledUp');

    for (const id of jobIds) {
      const job = await waitForTerminal(id, 600_000);
      expect(job.status, `${id} ${JSON.stringify(job)}`).toBe('completed');
    }
    await chargedOnceEach(jobIds);
    // Credits follow the input's size: a 40 s WAV costs more than one.
    expect(before - (await credits())).toBe(
      jobIds.length * creditCost('audio', wavBytes.byteLength),
    );

    await pollUntil(
      'worker-audio back to its minimum after the window',
      async () => {
        await snapshot();
        const status = (await pool()).status;
        return status?.replicas === 1 && status.desiredReplicas === 1 ? true : undefined;
      },
      180_000,
      2_000,
    );
    console.log(`WorkerPool during the burst:\n${timeline.join('\n')}`);
    const after = await tamp.kubectl([
      '-n',
      TAMP_NAMESPACE,
      'get',
      'events',
      '--field-selector',
      'involvedObject.kind=WorkerPool,involvedObject.name=tamp-worker-audio',
      '-o',
      'jsonpath={.items[*].reason}',
    ]);
    expect(after).toContain('ScaledDown');
  }, 1_200_000);

  it('keeps every stream in three replicas on the three NATS pods, and loses nothing when the JOBS leader pod is deleted under load', async () => {
    const topology = createTopology('');
    const streamInfo = async (name: string) => {
      // Only the Service's address: the pods' own addresses the servers advertise are not
      // reachable from the host.
      const nats = await connect({ servers: books.natsUrl, ignoreClusterUpdates: true });
      try {
        return await (await jetstreamManager(nats)).streams.info(name);
      } finally {
        await nats.close();
      }
    };
    for (const stream of Object.values(topology.streams)) {
      expect((await streamInfo(stream.name)).config.num_replicas, stream.name).toBe(3);
    }
    const leader = (await streamInfo(topology.streams.jobs.name)).cluster?.leader;
    expect(leader).toMatch(/^nats-[0-2]$/);

    const run = await loadDuring(books, {
      kinds: ['text-queued', 'image-avif', 'text-inline'],
      ratePerSecond: 2,
      durationMs: 45_000,
      disruptAfterMs: 10_000,
      drainMs: 300_000,
      disrupt: async () => {
        await tamp.kubectl([
          '-n',
          'tamp-deps',
          'delete',
          'pod',
          leader!,
          '--grace-period=0',
          '--force',
        ]);
        return pollUntil(
          'the JOBS stream to elect another leader',
          async () => {
            const now = await streamInfo(topology.streams.jobs.name).catch(() => undefined);
            const elected = now?.cluster?.leader;
            return elected !== undefined && elected !== leader ? elected : undefined;
          },
          60_000,
          500,
        );
      },
    });
    await explainDisruptedRun(run);
    expectNothingLostOrChargedTwice(run);
    // The replaced pod came back empty under its old name and caught up from the other two.
    await pollUntil(
      'the JOBS stream to have two current followers',
      async () => {
        const replicas = (await streamInfo(topology.streams.jobs.name)).cluster?.replicas ?? [];
        return replicas.length === 2 && replicas.every((replica) => replica.current)
          ? true
          : undefined;
      },
      120_000,
      1_000,
    );
  }, 900_000);

  it.runIf(CLUSTER_NODES > 1)(
    'drains a node under load: the disruption budgets hold, every job completes, none charged twice',
    async () => {
      const node = tamp.cluster.nodeNames[1]!;
      const podsOn = async (name: string) =>
        (await pods('')).filter(
          (pod) =>
            pod.spec.nodeName === name &&
            pod.metadata.deletionTimestamp === undefined &&
            !pod.metadata.ownerReferences?.some((owner) => owner.kind === 'DaemonSet'),
        );
      const before = await podsOn(node);
      console.log(`pods on ${node} before the drain: ${before.map((p) => p.metadata.name)}`);
      expect(before.some((pod) => pod.metadata.name.startsWith(`${RELEASE}-`))).toBe(true);

      const budgets = new BudgetWatch();
      const watching = new AbortController();
      const watchBudgets = (async () => {
        for (let sample = 0; sample < 2_000 && !watching.signal.aborted; sample++) {
          for (const budget of await disruptionBudgets())
            budgets.observe(budget.name, budget.status);
          await sleep(250);
        }
      })();
      const run = await loadDuring(books, {
        kinds: ['text-queued', 'image-avif', 'audio-1s', 'text-inline'],
        ratePerSecond: 2,
        durationMs: 60_000,
        disruptAfterMs: 10_000,
        drainMs: 600_000,
        disrupt: () =>
          kubectlWithTimeout(
            tamp.kubeconfigPath,
            ['drain', node, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=300s'],
            { timeoutMs: 330_000 },
          ),
      });
      watching.abort();
      await watchBudgets;
      console.log(String(run.disruption));
      if (run.slowestCreationSec > 30) await printWarnings(['gateway', 'job', 'billing']);
      await explainDisruptedRun(run);
      expectNothingLostOrChargedTwice(run);
      expect(budgets.breaches).toEqual([]);
      expect((await podsOn(node)).map((pod) => pod.metadata.name)).toEqual([]);
      await tamp.kubectl(['uncordon', node]);
    },
    1_200_000,
  );

  // Creations flow at 2 a second while every Deployment rolls: each must be accepted within
  // 30 s, and every job complete once, charged once (docs/load-and-faults.md).
  it('rolls every Deployment on helm upgrade while jobs flow; none lost or charged twice, books audited', async () => {
    const generations = await deploymentGenerations();
    const run = await loadDuring(books, {
      kinds: ['text-queued', 'audio-3s', 'image-avif', 'text-inline'],
      ratePerSecond: 2,
      durationMs: 60_000,
      disruptAfterMs: 15_000,
      drainMs: 600_000,
      disrupt: () => mostUnfinishedJobsWhilePodsAreReplaced(rollEveryDeployment()),
    });
    // Jobs were queued or running while old pods went: the rollout had work to lose.
    expect(run.disruption).toBeGreaterThan(0);
    await explainDisruptedRun(run);
    expectNothingLostOrChargedTwice(run);

    await expectEveryDeploymentRolled(generations);
    await capturePods('after helm upgrade');
  }, 1_200_000);

  it('helm uninstall leaves no Tamp object but the Secret the chart keeps on purpose', async () => {
    await tamp.helm([
      'uninstall',
      RELEASE,
      '--namespace',
      TAMP_NAMESPACE,
      '--wait',
      '--timeout',
      '5m',
    ]);
    const labelled = async () =>
      (
        JSON.parse(
          await tamp.kubectl([
            'get',
            'all,configmaps,secrets,serviceaccounts,poddisruptionbudgets,networkpolicies,servicemonitors,prometheusrules,roles,rolebindings,leases,workerpools',
            '--all-namespaces',
            '-l',
            `app.kubernetes.io/instance=${RELEASE}`,
            '-o',
            'json',
          ]),
        ) as { items: Array<{ kind: string; metadata: { name: string } }> }
      ).items.map((item) => `${item.kind}/${item.metadata.name}`);
    // Pods drain within their grace period after their Deployments are gone.
    await pollUntil(
      'the Tamp pods to be gone',
      async () => ((await labelled()).some((name) => name.startsWith('Pod/')) ? undefined : true),
      120_000,
      1_000,
    );
    // helm.sh/resource-policy: keep, so webhook secrets encrypted with its key stay readable.
    expect(await labelled()).toEqual([`Secret/${RELEASE}-secrets`]);
  }, 600_000);

  it('stops the cluster leaving no process, network namespace, mount or CNI cache entry', async () => {
    const pids = tamp.cluster.pids();
    const netns = tamp.cluster.netns;
    await mongo.close();
    await tamp.stop();
    for (const pid of pids) expect(isAlive(pid), `pid ${pid}`).toBe(false);
    expect(execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })).not.toContain(netns);
    expect(await mountsUnder(dataDir)).toEqual([]);
    const ps = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
    expect(ps.split('\n').filter((line) => line.includes(dataDir))).toEqual([]);
    if (existsSync('/var/lib/cni/results')) {
      expect(
        (await readdir('/var/lib/cni/results')).filter((entry) => entry.startsWith(netns)),
      ).toEqual([]);
    }
  }, 300_000);
});
