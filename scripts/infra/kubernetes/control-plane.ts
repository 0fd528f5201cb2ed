import { existsSync } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import {
  freePort,
  httpOk,
  type LaunchedServer,
  launch,
  stopProcess,
  tail,
  waitUntil,
} from '../processes';
import { provisionTools, toolPath } from '../provision';
import { type ApiCredentials, apiReady, apiRequest, writeKubeconfig } from './api';
import { CLIENT_IDENTITIES, ClusterPki } from './pki';
import { isAlive, once, pollUntil, stopRecordedProcess, writeStateFile } from './processes';

type Log = (message: string) => void;

export interface ControlPlaneOptions {
  /** Everything the control plane writes (certificates, etcd data, logs) stays in here. */
  dataDir: string;
  /**
   * Network namespace to run every process in (the node-level cluster), and how the host
   * reaches an address inside it (a loopback port, see NetnsRelay); the host's loopback
   * otherwise, on free ports.
   */
  netns?: { path: string; reach(host: string, port: number): Promise<number> };
  /** The API server's address; 127.0.0.1 by default. */
  address?: string;
  /** More names and addresses the API server's certificate must be valid for. */
  extraServingNames?: string[];
  /** Cluster IPs of Services; the first one is the `kubernetes` Service. */
  serviceClusterIpRange?: string;
  /** Installs missing binaries first (minutes on a cold Go cache); true by default. */
  provision?: boolean;
  log?: Log;
}

export interface RunningControlPlane {
  /** Cluster-admin kubeconfig (certificates embedded), under `dataDir`. */
  kubeconfigPath: string;
  /** https://address:port of the API server, as the host reaches it. */
  server: string;
  /** The API server as processes inside the cluster's network reach it. */
  internalServer: string;
  /** Administrator credentials for direct API requests (`apiRequest`). */
  credentials: ApiCredentials;
  pki: ClusterPki;
  /** etcd, kube-apiserver and kube-controller-manager. */
  pids: number[];
  /** Stops every process by its id and waits for it to exit; idempotent. */
  stop(): Promise<void>;
}

export const DEFAULT_SERVICE_RANGE = '10.0.0.0/24';
const START_TIMEOUT_MS = 90_000;

const stateFile = z.object({
  server: z.string(),
  internalServer: z.string(),
  pids: z.array(z.number()),
});

/**
 * etcd, kube-apiserver and kube-controller-manager for tests and scripts: Deployments get real
 * ReplicaSets, Pods and status, but nothing schedules or runs pods (see `startCluster` for a node).
 *
 * Idempotent per data folder: certificates are made once, and when the processes recorded in
 * `control-plane.json` still run and the API answers, they are reused instead of started again.
 * Processes are started and stopped by their own ids; stale ones from a crashed run are stopped
 * only when their command line names this data folder.
 */
export async function startControlPlane(
  options: ControlPlaneOptions,
): Promise<RunningControlPlane> {
  const log = options.log ?? (() => {});
  const dataDir = resolve(options.dataDir);
  const logDir = join(dataDir, 'logs');
  await mkdir(logDir, { recursive: true });
  if (options.provision !== false) {
    await provisionTools('kubernetes-control-plane', log);
  }
  const pki = new ClusterPki(dataDir);
  const address = options.address ?? '127.0.0.1';
  const serviceRange = options.serviceClusterIpRange ?? DEFAULT_SERVICE_RANGE;
  const kubeconfigPath = join(dataDir, 'kubeconfig');
  const statePath = join(dataDir, 'control-plane.json');

  await pki.ensureAuthority();
  const admin = await pki.client(CLIENT_IDENTITIES.admin);

  // Reused only on the host's loopback: a namespace's loopback ports die with the launcher that
  // relayed them, so the node-level cluster starts afresh (its own launcher keeps it alive).
  const previous = await readState(statePath);
  if (previous !== undefined && options.netns === undefined) {
    const credentials = { server: previous.server, caFile: pki.ca.cert, client: admin };
    if (previous.pids.every(isAlive) && (await apiReady(credentials))) {
      log(`control plane already running at ${previous.server}`);
      const stop = once(async () => {
        // Dependants first, as stop() does for processes it started itself.
        for (const pid of [...previous.pids].reverse()) await stopRecordedProcess(pid, dataDir);
        await rm(statePath, { force: true });
      });
      return {
        kubeconfigPath,
        server: previous.server,
        internalServer: previous.internalServer,
        credentials,
        pki,
        pids: previous.pids,
        stop,
      };
    }
  }
  if (previous !== undefined) {
    for (const pid of [...previous.pids].reverse()) await stopRecordedProcess(pid, dataDir);
    await rm(statePath, { force: true });
  }

  const netns = options.netns;
  const [etcdPort, etcdPeerPort, apiPort] =
    netns !== undefined
      ? [2379, 2380, 6443]
      : await Promise.all([freePort(), freePort(), freePort()]);
  const internalServer = `https://${address}:${apiPort}`;
  const server =
    netns === undefined
      ? internalServer
      : `https://127.0.0.1:${await netns.reach(address, apiPort)}`;
  const serving = await pki.serving('kube-apiserver', [
    address,
    firstAddress(serviceRange),
    '127.0.0.1',
    'localhost',
    'kubernetes',
    'kubernetes.default',
    'kubernetes.default.svc',
    'kubernetes.default.svc.cluster.local',
    ...(options.extraServingNames ?? []),
  ]);
  const kubeletClient = await pki.client(CLIENT_IDENTITIES.apiserverKubeletClient);
  const controllerManager = await pki.client(CLIENT_IDENTITIES.controllerManager);
  const credentials = { server, caFile: pki.ca.cert, client: admin };
  await writeKubeconfig(kubeconfigPath, credentials, 'tamp-admin');
  const controllerManagerKubeconfig = join(dataDir, 'kube-controller-manager.kubeconfig');
  await writeKubeconfig(
    controllerManagerKubeconfig,
    { server: internalServer, caFile: pki.ca.cert, client: controllerManager },
    'kube-controller-manager',
  );

  const servers: LaunchedServer[] = [];
  const start = (name: string, args: string[]) =>
    netns === undefined
      ? launch(servers, logDir, name, toolPath(name), args, {})
      : launchInNetns(servers, logDir, netns.path, name, toolPath(name), args);
  const stop = once(async () => {
    // Dependants first: nothing logs errors about a server that is already gone.
    for (const launched of [...servers].reverse()) await stopProcess(launched.child);
    await rm(statePath, { force: true });
  });

  try {
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const peerUrl = `http://127.0.0.1:${etcdPeerPort}`;
    const etcd = start('etcd', [
      '--name=tamp',
      `--data-dir=${join(dataDir, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=tamp=${peerUrl}`,
      '--log-level=warn',
      // Development and test data only: skipping fsync makes every API write far cheaper on a
      // shared disk; a crash may lose the last writes, never the machine's data.
      '--unsafe-no-fsync',
    ]);
    const etcdHealth =
      netns === undefined
        ? `${etcdUrl}/health`
        : `http://127.0.0.1:${await netns.reach('127.0.0.1', etcdPort)}/health`;
    await waitUntil(etcd, () => httpOk(etcdHealth), START_TIMEOUT_MS);
    log('etcd is ready');

    const apiserver = start('kube-apiserver', [
      `--etcd-servers=${etcdUrl}`,
      `--bind-address=${address}`,
      `--advertise-address=${address}`,
      `--secure-port=${apiPort}`,
      // The `kubernetes` Service's endpoints cannot point at a loopback address; inside a network
      // namespace with an address of its own the normal lease reconciler works.
      ...(isLoopback(address) ? ['--endpoint-reconciler-type=none'] : []),
      `--service-cluster-ip-range=${serviceRange}`,
      `--client-ca-file=${pki.ca.cert}`,
      `--tls-cert-file=${serving.cert}`,
      `--tls-private-key-file=${serving.key}`,
      `--kubelet-client-certificate=${kubeletClient.cert}`,
      `--kubelet-client-key=${kubeletClient.key}`,
      `--kubelet-certificate-authority=${pki.ca.cert}`,
      '--kubelet-preferred-address-types=InternalIP',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${pki.serviceAccount.publicKey}`,
      `--service-account-signing-key-file=${pki.serviceAccount.privateKey}`,
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
      '--anonymous-auth=false',
      '--profiling=false',
      `--cert-dir=${join(dataDir, 'apiserver-certs')}`,
    ]);
    await waitUntil(apiserver, () => apiReady(credentials), START_TIMEOUT_MS);
    log(`kube-apiserver is ready at ${server}`);

    const controllers = start('kube-controller-manager', [
      `--kubeconfig=${controllerManagerKubeconfig}`,
      `--authentication-kubeconfig=${controllerManagerKubeconfig}`,
      `--authorization-kubeconfig=${controllerManagerKubeconfig}`,
      '--bind-address=127.0.0.1',
      '--secure-port=0',
      '--leader-elect=false',
      `--service-account-private-key-file=${pki.serviceAccount.privateKey}`,
      `--root-ca-file=${pki.ca.cert}`,
      // Each controller acts with its own service account, so RBAC limits each one.
      '--use-service-account-credentials=true',
      `--service-cluster-ip-range=${serviceRange}`,
      '--profiling=false',
    ]);
    // Pods cannot be created before the service account controller made `default`.
    await waitUntil(
      controllers,
      async () => {
        try {
          const response = await apiRequest(
            credentials,
            'GET',
            '/api/v1/namespaces/default/serviceaccounts/default',
            { timeoutMs: 2_000 },
          );
          return response.status === 200;
        } catch {
          return false;
        }
      },
      START_TIMEOUT_MS,
    );
    log('kube-controller-manager is ready');

    const pids = servers.map((launched) => launched.child.pid!);
    await writeStateFile(statePath, { server, internalServer, pids });
    return { kubeconfigPath, server, internalServer, credentials, pki, pids, stop };
  } catch (error) {
    const logs = await Promise.all(
      servers.map(async (launched) => `--- ${launched.name}\n${await tail(launched.logFile)}`),
    );
    await stop();
    throw new Error(`${String(error)}\n${logs.join('\n')}`);
  }
}

/** The first host address of an IPv4 range: the cluster IP of the `kubernetes` Service. */
export function firstAddress(cidr: string): string {
  const [base] = cidr.split('/');
  const octets = base!.split('.').map(Number);
  octets[3] = octets[3]! + 1;
  return octets.join('.');
}

function isLoopback(address: string): boolean {
  return address.startsWith('127.') || address === '::1';
}

/**
 * Starts a process in the cluster's network namespace with nsenter, which enters only the
 * network namespace: every process keeps the host's mount namespace, so volumes the kubelet
 * mounts are what containerd and runc see. nsenter execs the program: the pid is the program's.
 */
export function launchInNetns(
  servers: LaunchedServer[],
  logDir: string,
  netnsPath: string,
  name: string,
  file: string,
  args: string[],
  env: Record<string, string> = {},
): LaunchedServer {
  return launch(servers, logDir, name, 'nsenter', [`--net=${netnsPath}`, '--', file, ...args], env);
}

async function readState(path: string): Promise<z.infer<typeof stateFile> | undefined> {
  if (!existsSync(path)) return undefined;
  try {
    return stateFile.parse(JSON.parse(await readFile(path, 'utf8')));
  } catch {
    return undefined;
  }
}

export { pollUntil };
