import { execFile as execFileCallback } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, readlink, rm, rmdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { z } from 'zod';
import { type LaunchedServer, stopProcess, tail, waitUntil } from '../processes';
import { provisionTools, toolPath } from '../provision';
import { apiRequest, kubectl, writeKubeconfig } from './api';
import { launchInNetns, type RunningControlPlane, startControlPlane } from './control-plane';
import {
  CLUSTER_NETWORK,
  CORE_DNS_RBAC,
  cniConfig,
  containerdConfig,
  corefile,
  kubeletConfig,
  kubeProxyConfig,
  type NodePaths,
} from './node-config';
import { CLIENT_IDENTITIES, kubeletIdentity } from './pki';
import {
  commandLineMentions,
  isAlive,
  once,
  pollUntil,
  stopRecordedProcess,
  writeStateFile,
} from './processes';
import { NetnsRelay } from './relay';

const execFile = promisify(execFileCallback);
type Log = (message: string) => void;

export interface ClusterOptions {
  /** Every file the cluster writes stays in here (certificates, etcd, containerd, kubelet, logs). */
  dataDir: string;
  /** OCI archives to import into containerd before pods start (`ctr images import`). */
  images?: string[];
  provision?: boolean;
  log?: Log;
}

export interface RunningCluster {
  /** Cluster-admin kubeconfig for the host: the API server through a loopback port. */
  kubeconfigPath: string;
  server: string;
  controlPlane: RunningControlPlane;
  /** The cluster's network namespace (`ip netns list` shows it while the cluster runs). */
  netns: string;
  /** Every process the launcher started. */
  pids(): number[];
  /** Forwards a loopback port of the host to `host:port` inside the cluster (a Service IP). */
  expose(host: string, port: number, localPort?: number): Promise<number>;
  importImages(archives: string[]): Promise<void>;
  /** Stops pods, processes, mounts and the namespace; idempotent. */
  stop(): Promise<void>;
}

const START_TIMEOUT_MS = 120_000;
const stateFile = z.object({ pids: z.array(z.number()), netns: z.string() });

/**
 * A one-node Kubernetes cluster inside a network namespace of its own: the control plane, the
 * scheduler, containerd with runc, the kubelet, kube-proxy, a CNI bridge and CoreDNS. Nothing in
 * the namespace has a route out of it; the host reaches the API server (and whatever `expose`
 * forwards) on loopback ports through a relay. Run as root (namespaces, mounts, iptables).
 *
 * Safe to run again on the same data folder: what a crashed run left (processes recorded in
 * `cluster.json`, containers, mounts, the namespace) is cleaned up first.
 */
export async function startCluster(options: ClusterOptions): Promise<RunningCluster> {
  const log = options.log ?? (() => {});
  const dataDir = resolve(options.dataDir);
  const logDir = join(dataDir, 'logs');
  await mkdir(logDir, { recursive: true });
  if (options.provision !== false) await provisionTools('kubernetes-node', log);

  const id = createHash('sha256').update(dataDir).digest('hex').slice(0, 10);
  const netns = `tamp-${id}`;
  const netnsPath = `/run/netns/${netns}`;
  const networkName = `tamp-${id}`;
  const statePath = join(dataDir, 'cluster.json');
  const paths = nodePaths(dataDir);

  await cleanUpAfter(dataDir, statePath, paths, netns, networkName, log);

  const launched: LaunchedServer[] = [];
  const recorded = new Set<number>();
  const record = () =>
    writeStateFile(statePath, {
      netns,
      pids: [...launched.map((server) => server.child.pid!), ...recorded],
    });
  let relay: NetnsRelay | undefined;
  let controlPlane: RunningControlPlane | undefined;

  const stop = once(async () => {
    const stopNamed = async (name: string) => {
      for (const server of launched.filter((candidate) => candidate.name === name)) {
        await stopProcess(server.child);
      }
    };
    // Nothing may replace the pods while they go: controllers and scheduler stop first. Then
    // the kubelet itself stops every pod (CNI teardown, the sandboxes' network namespaces,
    // volume mounts), and only what it left is killed through containerd.
    await stopNamed('kube-scheduler');
    if (controlPlane !== undefined) {
      await stopRecordedProcess(controlPlane.pids.at(-1)!, dataDir);
      await deleteAllPods(controlPlane.kubeconfigPath, paths, log);
    }
    for (const name of ['coredns', 'kube-proxy', 'kubelet']) await stopNamed(name);
    await removeAllContainers(paths, log);
    await stopNamed('containerd');
    await controlPlane?.stop();
    await relay?.close();
    await cleanUpNode(dataDir, paths, netns, networkName);
    await rm(statePath, { force: true });
  });

  try {
    await createNetworkNamespace(netns);
    relay = await NetnsRelay.start({
      netnsPath,
      socketPath: join(dataDir, 'relay.sock'),
      logDir,
      launched,
    });
    await record();
    controlPlane = await startControlPlane({
      dataDir,
      netns: { path: netnsPath, reach: (host, port) => relay!.expose(host, port) },
      address: CLUSTER_NETWORK.nodeAddress,
      serviceClusterIpRange: CLUSTER_NETWORK.serviceRange,
      provision: false,
      log,
    });
    for (const pid of controlPlane.pids) recorded.add(pid);
    await record();
    const { pki } = controlPlane;
    const internal = (client: { cert: string; key: string }) => ({
      server: controlPlane!.internalServer,
      caFile: pki.ca.cert,
      client,
    });

    // containerd, and the images pods will run (there is no registry to pull from).
    await mkdir(paths.cniConfDir, { recursive: true });
    await mkdir(paths.containerdDir, { recursive: true });
    await writeFile(join(paths.containerdDir, 'config.toml'), containerdConfig(paths));
    await writeFile(join(paths.cniConfDir, '10-tamp.conflist'), cniConfig(paths, networkName));
    await writeFile(paths.resolvConf, '# no upstream DNS: nothing leaves the cluster\n');
    const containerd = launchInNetns(
      launched,
      logDir,
      netnsPath,
      'containerd',
      toolPath('containerd'),
      ['--config', join(paths.containerdDir, 'config.toml'), '--log-level', 'warn'],
    );
    await record();
    await waitUntil(containerd, async () => existsSync(paths.containerdSocket), START_TIMEOUT_MS);
    await pollUntil(
      'containerd to answer',
      async () => {
        await ctr(paths, ['version']);
        return true;
      },
      30_000,
    );
    await importImages(paths, options.images ?? [], log);

    // The scheduler, the kubelet, then kube-proxy once the node exists.
    const schedulerKubeconfig = join(dataDir, 'kube-scheduler.kubeconfig');
    await writeKubeconfig(
      schedulerKubeconfig,
      internal(await pki.client(CLIENT_IDENTITIES.scheduler)),
      'kube-scheduler',
    );
    launchInNetns(launched, logDir, netnsPath, 'kube-scheduler', toolPath('kube-scheduler'), [
      `--kubeconfig=${schedulerKubeconfig}`,
      `--authentication-kubeconfig=${schedulerKubeconfig}`,
      `--authorization-kubeconfig=${schedulerKubeconfig}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      '--secure-port=10259',
      '--profiling=false',
    ]);

    const kubeletServing = await pki.serving('kubelet-serving', [
      CLUSTER_NETWORK.nodeAddress,
      CLUSTER_NETWORK.nodeName,
    ]);
    paths.kubeletCert = kubeletServing.cert;
    paths.kubeletKey = kubeletServing.key;
    const kubeletKubeconfig = join(dataDir, 'kubelet.kubeconfig');
    await writeKubeconfig(
      kubeletKubeconfig,
      internal(await pki.client(kubeletIdentity(CLUSTER_NETWORK.nodeName))),
      `system:node:${CLUSTER_NETWORK.nodeName}`,
    );
    await mkdir(paths.kubeletDir, { recursive: true });
    await writeFile(join(paths.kubeletDir, 'config.yaml'), kubeletConfig(paths));
    launchInNetns(launched, logDir, netnsPath, 'kubelet', toolPath('kubelet'), [
      `--config=${join(paths.kubeletDir, 'config.yaml')}`,
      `--kubeconfig=${kubeletKubeconfig}`,
      `--root-dir=${join(paths.kubeletDir, 'root')}`,
      `--cert-dir=${join(paths.kubeletDir, 'pki')}`,
      `--hostname-override=${CLUSTER_NETWORK.nodeName}`,
      `--node-ip=${CLUSTER_NETWORK.nodeAddress}`,
      '--v=1',
    ]);
    await record();
    const admin = controlPlane.credentials;
    await pollUntil(
      'the node to register',
      async () =>
        (await apiRequest(admin, 'GET', `/api/v1/nodes/${CLUSTER_NETWORK.nodeName}`)).status === 200
          ? true
          : undefined,
      START_TIMEOUT_MS,
    );
    log('the kubelet registered the node');

    const proxyKubeconfig = join(dataDir, 'kube-proxy.kubeconfig');
    await writeKubeconfig(
      proxyKubeconfig,
      internal(await pki.client(CLIENT_IDENTITIES.kubeProxy)),
      'kube-proxy',
    );
    await writeFile(join(dataDir, 'kube-proxy.yaml'), kubeProxyConfig(proxyKubeconfig));
    launchInNetns(launched, logDir, netnsPath, 'kube-proxy', toolPath('kube-proxy'), [
      `--config=${join(dataDir, 'kube-proxy.yaml')}`,
    ]);

    await kubectl(controlPlane.kubeconfigPath, ['apply', '-f', '-'], {
      input: CORE_DNS_RBAC.map((object) => JSON.stringify(object)).join('\n'),
    });
    const coreDnsKubeconfig = join(dataDir, 'coredns.kubeconfig');
    await writeKubeconfig(
      coreDnsKubeconfig,
      internal(await pki.client({ name: 'coredns', commonName: 'tamp-coredns' })),
      'tamp-coredns',
    );
    await writeFile(join(dataDir, 'Corefile'), corefile(coreDnsKubeconfig));
    launchInNetns(launched, logDir, netnsPath, 'coredns', toolPath('coredns'), [
      '-conf',
      join(dataDir, 'Corefile'),
    ]);
    await record();

    await pollUntil(
      'the node to be Ready',
      async () => {
        const node = JSON.parse(
          (await apiRequest(admin, 'GET', `/api/v1/nodes/${CLUSTER_NETWORK.nodeName}`)).body,
        ) as { status?: { conditions?: Array<{ type: string; status: string }> } };
        return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')
          ? true
          : undefined;
      },
      START_TIMEOUT_MS,
      500,
    );
    log('the node is Ready');

    return {
      kubeconfigPath: controlPlane.kubeconfigPath,
      server: controlPlane.server,
      controlPlane,
      netns,
      pids: () => [...launched.map((server) => server.child.pid!), ...recorded],
      expose: (host, port, localPort) => relay!.expose(host, port, localPort),
      importImages: (archives) => importImages(paths, archives, log),
      stop,
    };
  } catch (error) {
    const logs = await Promise.all(
      launched.map(async (server) => `--- ${server.name}\n${await tail(server.logFile)}`),
    );
    await stop();
    throw new Error(`${String(error)}\n${logs.join('\n')}`);
  }
}

/**
 * Removes a stopped (or crashed) cluster's data folder, after cleaning what a crashed run left
 * outside it; a running cluster's processes recorded there are stopped first.
 */
export async function removeCluster(dataDir: string): Promise<void> {
  const dir = resolve(dataDir);
  if (!existsSync(dir)) return;
  const id = createHash('sha256').update(dir).digest('hex').slice(0, 10);
  await cleanUpAfter(
    dir,
    join(dir, 'cluster.json'),
    nodePaths(dir),
    `tamp-${id}`,
    `tamp-${id}`,
    () => {},
  );
  await rm(dir, { recursive: true, force: true });
}

function nodePaths(dataDir: string): NodePaths {
  return {
    dataDir,
    containerdDir: join(dataDir, 'containerd'),
    containerdSocket: join(dataDir, 'containerd', 'containerd.sock'),
    cniConfDir: join(dataDir, 'cni', 'net.d'),
    cniIpamDir: join(dataDir, 'cni', 'ipam'),
    cniBinDir: '/usr/lib/cni',
    kubeletDir: join(dataDir, 'kubelet'),
    caFile: join(dataDir, 'pki', 'ca.crt'),
    kubeletCert: '',
    kubeletKey: '',
    runcBinary: toolPath('runc'),
    resolvConf: join(dataDir, 'resolv.conf'),
  };
}

async function sh(command: string[], timeoutMs = 30_000): Promise<string> {
  const [file, ...args] = command;
  const { stdout } = await execFile(file!, args, { timeout: timeoutMs });
  return stdout;
}

/**
 * The namespace, with the node's address on its loopback interface and a route for Service
 * addresses only (kube-proxy rewrites them to pod addresses after routing). There is no default
 * route: a packet to any other address fails at once, so nothing leaves the namespace.
 */
async function createNetworkNamespace(netns: string): Promise<void> {
  await sh(['ip', 'netns', 'add', netns]);
  const inNs = ['ip', '-n', netns];
  await sh([...inNs, 'link', 'set', 'lo', 'up']);
  await sh([...inNs, 'addr', 'add', `${CLUSTER_NETWORK.nodeAddress}/32`, 'dev', 'lo']);
  await sh([...inNs, 'route', 'add', CLUSTER_NETWORK.serviceRange, 'dev', 'lo']);
  await sh([
    'nsenter',
    `--net=/run/netns/${netns}`,
    '--',
    'sysctl',
    '-q',
    '-w',
    'net.ipv4.ip_forward=1',
    'net.bridge.bridge-nf-call-iptables=1',
    'net.ipv4.conf.all.route_localnet=1',
  ]);
}

async function ctr(paths: NodePaths, args: string[], timeoutMs = 120_000): Promise<string> {
  return sh(
    [toolPath('ctr'), '--address', paths.containerdSocket, '--namespace', 'k8s.io', ...args],
    timeoutMs,
  );
}

async function importImages(paths: NodePaths, archives: string[], log: Log): Promise<void> {
  // A few at a time: each import is partly waiting on the disk.
  const queue = [...archives];
  const importNext = async (): Promise<void> => {
    for (let archive = queue.shift(); archive !== undefined; archive = queue.shift()) {
      const started = Date.now();
      await ctr(paths, ['images', 'import', '--all-platforms', archive], 600_000);
      log(`imported ${archive} in ${Date.now() - started} ms`);
    }
  };
  await Promise.all([importNext(), importNext(), importNext()]);
}

/**
 * Deletes every pod at once (grace period 0) and waits, bounded, until the kubelet has stopped
 * their containers and sandboxes; a stuck pod is left to removeAllContainers.
 */
async function deleteAllPods(kubeconfigPath: string, paths: NodePaths, log: Log): Promise<void> {
  try {
    await kubectl(
      kubeconfigPath,
      [
        'delete',
        'pods',
        '--all',
        '--all-namespaces',
        '--grace-period=0',
        '--force',
        '--wait=false',
      ],
      { timeoutMs: 30_000 },
    );
    await pollUntil(
      'the kubelet to stop every pod',
      // Stopped tasks stay listed until the kubelet's garbage collection; only running ones count.
      async () =>
        /\bRUNNING\b/.test(await ctr(paths, ['tasks', 'ls'], 10_000)) ? undefined : true,
      60_000,
      500,
    );
  } catch (error) {
    log(`pods left to containerd: ${String(error)}`);
  }
}

/**
 * Kills and deletes every container task the kubelet left, so no container process outlives
 * the cluster, and removes the network namespaces containerd made for their sandboxes
 * (/run/netns/cni-…), which only the kubelet's own teardown would have removed.
 */
async function removeAllContainers(paths: NodePaths, log: Log): Promise<void> {
  if (!existsSync(paths.containerdSocket)) return;
  let containers: string[];
  let tasks: string[];
  try {
    containers = (await ctr(paths, ['containers', 'ls', '-q'], 10_000)).split('\n').filter(Boolean);
    tasks = (await ctr(paths, ['tasks', 'ls', '-q'], 10_000)).split('\n').filter(Boolean);
  } catch {
    return;
  }
  const sandboxNetworks = new Set<string>();
  for (const container of containers) {
    try {
      const info = JSON.parse(await ctr(paths, ['containers', 'info', container], 10_000)) as {
        Spec?: { linux?: { namespaces?: Array<{ type: string; path?: string }> } };
      };
      for (const namespace of info.Spec?.linux?.namespaces ?? []) {
        if (namespace.type === 'network' && namespace.path?.startsWith('/var/run/netns/cni-')) {
          sandboxNetworks.add(namespace.path);
        }
      }
    } catch {
      // Gone meanwhile.
    }
  }
  await Promise.all(
    tasks.map((task) =>
      ctr(paths, ['tasks', 'kill', '--all', '--signal', 'SIGKILL', task], 10_000).catch(() => {}),
    ),
  );
  for (const task of tasks) {
    try {
      await pollUntil(
        `container ${task} to stop`,
        async () => {
          await ctr(paths, ['tasks', 'delete', task], 10_000);
          return true;
        },
        15_000,
        200,
      );
    } catch (error) {
      log(String(error));
    }
  }
  for (const path of sandboxNetworks) {
    await sh(['umount', path]).catch(() => {});
    await rm(path, { force: true });
  }
}

/**
 * Everything outside the data folder that a run can leave, plus mounts inside it: shims of our
 * containerd, mounts under the data folder, the CNI result cache (containerd 1.6 writes it to
 * /var/lib/cni/results whatever its configuration says), and the network namespace.
 */
async function cleanUpNode(
  dataDir: string,
  paths: NodePaths,
  netns: string,
  networkName: string,
): Promise<void> {
  for (const pid of await processesMentioning(paths.containerdSocket)) {
    await stopRecordedProcess(pid, paths.containerdSocket, 5_000);
  }
  await unmountUnder(dataDir);
  await removeLinksInto('/var/log/containers', dataDir);
  const results = '/var/lib/cni/results';
  if (existsSync(results)) {
    for (const entry of await readdir(results)) {
      if (entry.startsWith(`${networkName}-`)) await rm(join(results, entry), { force: true });
    }
  }
  if (existsSync(`/run/netns/${netns}`)) await sh(['ip', 'netns', 'delete', netns]);
  await removeHostTraces();
}

/**
 * Places outside the data folder that the kubelet, containerd and runc use whatever they are
 * told: the kubelet's device-plugin socket, containerd 1.6's shim socket folder, the CNI result
 * cache and container log links folders, and the `k8s.io` cgroup of the containers. Removed
 * when empty, so a second cluster running at the same time keeps what it uses.
 */
async function removeHostTraces(): Promise<void> {
  await rm('/var/lib/kubelet/device-plugins/kubelet.sock', { force: true });
  const folders = [
    '/var/lib/kubelet/device-plugins',
    '/var/lib/kubelet',
    '/run/containerd/s',
    '/run/containerd',
    '/var/lib/cni/results',
    '/var/lib/cni',
    '/var/log/containers',
    ...(existsSync('/sys/fs/cgroup')
      ? (await readdir('/sys/fs/cgroup')).map((controller) => `/sys/fs/cgroup/${controller}/k8s.io`)
      : []),
  ];
  for (const folder of folders) await rmdir(folder).catch(() => {});
}

async function cleanUpAfter(
  dataDir: string,
  statePath: string,
  paths: NodePaths,
  netns: string,
  networkName: string,
  log: Log,
): Promise<void> {
  if (!existsSync(statePath) && !existsSync(`/run/netns/${netns}`)) return;
  log('cleaning up after an earlier run in this data folder');
  try {
    const state = stateFile.parse(JSON.parse(await readFile(statePath, 'utf8')));
    for (const pid of state.pids.reverse()) await stopRecordedProcess(pid, dataDir);
  } catch {
    // No usable state: the namespace and mounts below are still cleaned.
  }
  await removeAllContainersOfDeadContainerd(paths);
  await cleanUpNode(dataDir, paths, netns, networkName);
  await rm(statePath, { force: true });
}

/** After a crash containerd is gone but container processes may remain in our cgroups. */
async function removeAllContainersOfDeadContainerd(paths: NodePaths): Promise<void> {
  for (const pid of await processesMentioning(paths.containerdDir)) {
    await stopRecordedProcess(pid, paths.containerdDir, 5_000);
  }
}

async function processesMentioning(marker: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (
      Number.isInteger(pid) &&
      pid !== process.pid &&
      isAlive(pid) &&
      commandLineMentions(pid, marker)
    ) {
      pids.push(pid);
    }
  }
  return pids;
}

/** The kubelet links every container log into /var/log/containers, whatever its podLogsDir. */
async function removeLinksInto(dir: string, target: string): Promise<void> {
  if (!existsSync(dir)) return;
  for (const entry of await readdir(dir)) {
    const path = join(dir, entry);
    try {
      if ((await readlink(path)).startsWith(`${target}/`)) await rm(path, { force: true });
    } catch {
      // Not a link.
    }
  }
}

/** Unmounts every mount point under `dir`, deepest first. */
export async function unmountUnder(dir: string): Promise<void> {
  const mounts = (await readFile('/proc/self/mountinfo', 'utf8'))
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter(
      (point): point is string =>
        point !== undefined && (point === dir || point.startsWith(`${dir}/`)),
    )
    .map((point) => point.replace(/\\040/g, ' '))
    .sort((a, b) => b.length - a.length);
  for (const point of mounts) {
    try {
      await sh(['umount', point]);
    } catch {
      await sh(['umount', '-l', point]).catch(() => {});
    }
  }
}

export async function mountsUnder(dir: string): Promise<string[]> {
  return (await readFile('/proc/self/mountinfo', 'utf8'))
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((point): point is string => point?.startsWith(dir) === true);
}
