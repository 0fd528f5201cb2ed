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
  type ClusterNode,
  CORE_DNS_RBAC,
  clusterNode,
  cniConfig,
  containerdConfig,
  corefile,
  kubeletConfig,
  kubeProxyConfig,
  type NodePaths,
  podLogsDirOf,
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
  /** How many nodes (kubelets), 1 by default; each imports the images into its own containerd. */
  nodes?: number;
  provision?: boolean;
  log?: Log;
}

export interface RunningCluster {
  /** Cluster-admin kubeconfig for the host: the API server through a loopback port. */
  kubeconfigPath: string;
  server: string;
  controlPlane: RunningControlPlane;
  /** The first node's network namespace (`ip netns list` shows it while the cluster runs). */
  netns: string;
  /** Every node's network namespace, the first node's first. */
  nodeNetns: string[];
  /** The nodes' names, the first node's first. */
  nodeNames: string[];
  /** Each node's folder of container logs, the first node's first. */
  podLogDirs: string[];
  /** Every process the launcher started. */
  pids(): number[];
  /** Forwards a loopback port of the host to `host:port` inside the cluster (a Service IP). */
  expose(host: string, port: number, localPort?: number): Promise<number>;
  importImages(archives: string[]): Promise<void>;
  /** Stops pods, processes, mounts and the namespace; idempotent. */
  stop(): Promise<void>;
}

const START_TIMEOUT_MS = 120_000;
const stateFile = z.object({
  pids: z.array(z.number()),
  netns: z.string(),
  nodeNetns: z.array(z.string()).optional(),
});

/** One node's own pieces: where its files are, its namespace, its CNI network's name. */
interface NodeSite {
  node: ClusterNode;
  index: number;
  paths: NodePaths;
  netns: string;
  networkName: string;
  /** Suffix of its processes' names (and log files): '' for the first node, '-2' for the second. */
  suffix: string;
}

function nodeSites(dataDir: string, count: number): NodeSite[] {
  const id = createHash('sha256').update(dataDir).digest('hex').slice(0, 10);
  return Array.from({ length: count }, (_, index) => {
    const suffix = index === 0 ? '' : `-${index + 1}`;
    return {
      node: clusterNode(index),
      index,
      paths: nodePaths(dataDir, index === 0 ? dataDir : join(dataDir, `node${suffix}`)),
      netns: `tamp-${id}${suffix}`,
      networkName: `tamp-${id}${suffix}`,
      suffix,
    };
  });
}

/**
 * A Kubernetes cluster of one or more nodes, each inside a network namespace of its own: the
 * control plane, the scheduler and CoreDNS on the first node, and on every node containerd with
 * runc, the kubelet, kube-proxy and a CNI bridge. The nodes' namespaces are joined by veth
 * links and routes; nothing in them has a route out; the host reaches the API server (and
 * whatever `expose` forwards) on loopback ports through a relay. Run as root (namespaces,
 * mounts, iptables).
 *
 * Safe to run again on the same data folder: what a crashed run left (processes recorded in
 * `cluster.json`, containers, mounts, the namespaces) is cleaned up first.
 */
export async function startCluster(options: ClusterOptions): Promise<RunningCluster> {
  const log = options.log ?? (() => {});
  const dataDir = resolve(options.dataDir);
  const logDir = join(dataDir, 'logs');
  await mkdir(logDir, { recursive: true });
  if (options.provision !== false) await provisionTools('kubernetes-node', log);

  const sites = nodeSites(dataDir, options.nodes ?? 1);
  const first = sites[0]!;
  const netnsPath = `/run/netns/${first.netns}`;
  const statePath = join(dataDir, 'cluster.json');

  await cleanUpAfter(dataDir, statePath, log);

  const launched: LaunchedServer[] = [];
  const recorded = new Set<number>();
  const record = () =>
    writeStateFile(statePath, {
      netns: first.netns,
      nodeNetns: sites.map((site) => site.netns),
      pids: [...launched.map((server) => server.child.pid!), ...recorded],
    });
  let relay: NetnsRelay | undefined;
  let controlPlane: RunningControlPlane | undefined;

  const stop = once(async () => {
    const stopNamed = async (name: string) => {
      for (const site of sites) {
        for (const server of launched.filter((c) => c.name === `${name}${site.suffix}`)) {
          await stopProcess(server.child);
        }
      }
    };
    // Nothing may replace the pods while they go: controllers and scheduler stop first. Then
    // the kubelets themselves stop every pod (CNI teardown, the sandboxes' network namespaces,
    // volume mounts), and only what they left is killed through containerd.
    await stopNamed('kube-scheduler');
    if (controlPlane !== undefined) {
      await stopRecordedProcess(controlPlane.pids.at(-1)!, dataDir);
      await deleteAllPods(
        controlPlane.kubeconfigPath,
        sites.map((site) => site.paths),
        log,
      );
    }
    for (const name of ['coredns', 'kube-proxy', 'kubelet']) await stopNamed(name);
    for (const site of sites) await removeAllContainers(site.paths, log);
    await stopNamed('containerd');
    await controlPlane?.stop();
    await relay?.close();
    for (const site of sites) await cleanUpNode(site);
    await unmountUnder(dataDir);
    await removeHostTraces();
    await rm(statePath, { force: true });
  });

  try {
    for (const site of sites) await createNetworkNamespace(site);
    for (const site of sites.slice(1)) await linkNodes(first, site);
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
      address: first.node.address,
      serviceClusterIpRange: CLUSTER_NETWORK.serviceRange,
      provision: false,
      log,
    });
    for (const pid of controlPlane.pids) recorded.add(pid);
    await record();
    const context: NodeContext = {
      dataDir,
      logDir,
      launched,
      record,
      controlPlane,
      images: options.images ?? [],
      log,
    };

    const schedulerKubeconfig = join(dataDir, 'kube-scheduler.kubeconfig');
    await writeKubeconfig(
      schedulerKubeconfig,
      internalAccess(controlPlane, await controlPlane.pki.client(CLIENT_IDENTITIES.scheduler)),
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
    // The nodes one after the other: each import is mostly disk, and two at once only compete.
    for (const site of sites) await startNode(site, context);
    await startCoreDns(first, context);
    for (const site of sites) await nodeReady(site, context);

    return {
      kubeconfigPath: controlPlane.kubeconfigPath,
      server: controlPlane.server,
      controlPlane,
      netns: first.netns,
      nodeNetns: sites.map((site) => site.netns),
      nodeNames: sites.map((site) => site.node.name),
      podLogDirs: sites.map((site) => podLogsDirOf(site.paths)),
      pids: () => [...launched.map((server) => server.child.pid!), ...recorded],
      expose: (host, port, localPort) => relay!.expose(host, port, localPort),
      importImages: async (archives) => {
        for (const site of sites) await importImages(site.paths, archives, log);
      },
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

interface NodeContext {
  dataDir: string;
  logDir: string;
  launched: LaunchedServer[];
  record: () => Promise<void>;
  controlPlane: RunningControlPlane;
  images: string[];
  log: Log;
}

/** How a component inside the cluster reaches the API server, as `client`. */
function internalAccess(controlPlane: RunningControlPlane, client: { cert: string; key: string }) {
  return { server: controlPlane.internalServer, caFile: controlPlane.pki.ca.cert, client };
}

/**
 * containerd with the images pods will run (there is no registry to pull from), the kubelet
 * until the node registers, then kube-proxy.
 */
async function startNode(site: NodeSite, context: NodeContext): Promise<void> {
  const { paths, node, suffix } = site;
  const { launched, logDir, controlPlane, log } = context;
  const netnsPath = `/run/netns/${site.netns}`;
  const launchHere = (name: string, file: string, args: string[]) =>
    launchInNetns(launched, logDir, netnsPath, `${name}${suffix}`, file, args);

  await mkdir(paths.cniConfDir, { recursive: true });
  await mkdir(paths.containerdDir, { recursive: true });
  await writeFile(join(paths.containerdDir, 'config.toml'), containerdConfig(paths));
  await writeFile(
    join(paths.cniConfDir, '10-tamp.conflist'),
    cniConfig(paths, site.networkName, node.podRange),
  );
  await writeFile(paths.resolvConf, '# no upstream DNS: nothing leaves the cluster\n');
  const containerd = launchHere('containerd', toolPath('containerd'), [
    '--config',
    join(paths.containerdDir, 'config.toml'),
    '--log-level',
    'warn',
  ]);
  await context.record();
  await waitUntil(containerd, async () => existsSync(paths.containerdSocket), START_TIMEOUT_MS);
  await pollUntil(
    `containerd of ${node.name} to answer`,
    async () => {
      await ctr(paths, ['version']);
      return true;
    },
    30_000,
  );
  await importImages(paths, context.images, log);

  const kubeletServing = await controlPlane.pki.serving(`kubelet-serving${suffix}`, [
    node.address,
    node.name,
  ]);
  paths.kubeletCert = kubeletServing.cert;
  paths.kubeletKey = kubeletServing.key;
  const kubeletKubeconfig = join(paths.kubeletDir, 'kubelet.kubeconfig');
  await mkdir(paths.kubeletDir, { recursive: true });
  await writeKubeconfig(
    kubeletKubeconfig,
    internalAccess(controlPlane, await controlPlane.pki.client(kubeletIdentity(node.name))),
    `system:node:${node.name}`,
  );
  await writeFile(join(paths.kubeletDir, 'config.yaml'), kubeletConfig(paths, node));
  launchHere('kubelet', toolPath('kubelet'), [
    `--config=${join(paths.kubeletDir, 'config.yaml')}`,
    `--kubeconfig=${kubeletKubeconfig}`,
    `--root-dir=${join(paths.kubeletDir, 'root')}`,
    `--cert-dir=${join(paths.kubeletDir, 'pki')}`,
    `--hostname-override=${node.name}`,
    `--node-ip=${node.address}`,
    '--v=1',
  ]);
  await context.record();
  const admin = controlPlane.credentials;
  await pollUntil(
    `${node.name} to register`,
    async () =>
      (await apiRequest(admin, 'GET', `/api/v1/nodes/${node.name}`)).status === 200
        ? true
        : undefined,
    START_TIMEOUT_MS,
  );
  log(`the kubelet registered ${node.name}`);

  const proxyKubeconfig = join(paths.kubeletDir, 'kube-proxy.kubeconfig');
  await writeKubeconfig(
    proxyKubeconfig,
    internalAccess(controlPlane, await controlPlane.pki.client(CLIENT_IDENTITIES.kubeProxy)),
    'kube-proxy',
  );
  await writeFile(
    join(paths.kubeletDir, 'kube-proxy.yaml'),
    kubeProxyConfig(proxyKubeconfig, node),
  );
  launchHere('kube-proxy', toolPath('kube-proxy'), [
    `--config=${join(paths.kubeletDir, 'kube-proxy.yaml')}`,
  ]);
  await context.record();
}

/** CoreDNS, a process of the first node on its address, answering for the whole cluster. */
async function startCoreDns(first: NodeSite, context: NodeContext): Promise<void> {
  const { controlPlane, dataDir } = context;
  await kubectl(controlPlane.kubeconfigPath, ['apply', '-f', '-'], {
    input: CORE_DNS_RBAC.map((object) => JSON.stringify(object)).join('\n'),
  });
  const coreDnsKubeconfig = join(dataDir, 'coredns.kubeconfig');
  await writeKubeconfig(
    coreDnsKubeconfig,
    internalAccess(
      controlPlane,
      await controlPlane.pki.client({ name: 'coredns', commonName: 'tamp-coredns' }),
    ),
    'tamp-coredns',
  );
  await writeFile(join(dataDir, 'Corefile'), corefile(coreDnsKubeconfig));
  launchInNetns(
    context.launched,
    context.logDir,
    `/run/netns/${first.netns}`,
    'coredns',
    toolPath('coredns'),
    ['-conf', join(dataDir, 'Corefile')],
  );
  await context.record();
}

async function nodeReady(site: NodeSite, context: NodeContext): Promise<void> {
  await pollUntil(
    `${site.node.name} to be Ready`,
    async () => {
      const response = await apiRequest(
        context.controlPlane.credentials,
        'GET',
        `/api/v1/nodes/${site.node.name}`,
      );
      const node = JSON.parse(response.body) as {
        status?: { conditions?: Array<{ type: string; status: string }> };
      };
      return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')
        ? true
        : undefined;
    },
    START_TIMEOUT_MS,
    500,
  );
  context.log(`${site.node.name} is Ready`);
}

/**
 * Removes a stopped (or crashed) cluster's data folder, after cleaning what a crashed run left
 * outside it; a running cluster's processes recorded there are stopped first.
 */
export async function removeCluster(dataDir: string): Promise<void> {
  const dir = resolve(dataDir);
  if (!existsSync(dir)) return;
  await cleanUpAfter(dir, join(dir, 'cluster.json'), () => {});
  await rm(dir, { recursive: true, force: true });
}

/** A node's folders; the CA is the cluster's, in its data folder. */
function nodePaths(clusterDir: string, nodeDir: string): NodePaths {
  return {
    dataDir: nodeDir,
    containerdDir: join(nodeDir, 'containerd'),
    containerdSocket: join(nodeDir, 'containerd', 'containerd.sock'),
    cniConfDir: join(nodeDir, 'cni', 'net.d'),
    cniIpamDir: join(nodeDir, 'cni', 'ipam'),
    cniBinDir: '/usr/lib/cni',
    kubeletDir: join(nodeDir, 'kubelet'),
    caFile: join(clusterDir, 'pki', 'ca.crt'),
    kubeletCert: '',
    kubeletKey: '',
    runcBinary: toolPath('runc'),
    resolvConf: join(nodeDir, 'resolv.conf'),
  };
}

async function sh(command: string[], timeoutMs = 30_000): Promise<string> {
  const [file, ...args] = command;
  const { stdout } = await execFile(file!, args, { timeout: timeoutMs });
  return stdout;
}

/**
 * A node's namespace, with the node's address on its loopback interface and a route for Service
 * addresses only (kube-proxy rewrites them to pod addresses after routing). There is no default
 * route: a packet to any other address fails at once, so nothing leaves the namespace.
 */
async function createNetworkNamespace(site: NodeSite): Promise<void> {
  const { netns } = site;
  await sh(['ip', 'netns', 'add', netns]);
  const inNs = ['ip', '-n', netns];
  await sh([...inNs, 'link', 'set', 'lo', 'up']);
  await sh([...inNs, 'addr', 'add', `${site.node.address}/32`, 'dev', 'lo']);
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
    // Pods of one node answer pods of another through the link, not the way they were reached.
    'net.ipv4.conf.all.rp_filter=0',
    'net.ipv4.conf.default.rp_filter=0',
  ]);
}

/**
 * A veth link between the first node's namespace and another's, with host routes both ways to
 * the other node's address and pod range: the flat pod network a CNI plugin such as flannel's
 * host-gw mode gives, written by hand because two namespaces on one machine need nothing more.
 */
async function linkNodes(first: NodeSite, other: NodeSite): Promise<void> {
  const [toOther, toFirst] = [`vn${other.index + 1}`, 'vn1'];
  await sh([
    'ip',
    'link',
    'add',
    toOther,
    'netns',
    first.netns,
    'type',
    'veth',
    'peer',
    'name',
    toFirst,
    'netns',
    other.netns,
  ]);
  const routes = async (from: NodeSite, device: string, to: NodeSite) => {
    const inNs = ['ip', '-n', from.netns];
    await sh([...inNs, 'link', 'set', device, 'up']);
    await sh([...inNs, 'route', 'add', `${to.node.address}/32`, 'dev', device]);
    await sh([
      ...inNs,
      'route',
      'add',
      to.node.podRange,
      'via',
      to.node.address,
      'dev',
      device,
      'onlink',
    ]);
  };
  await routes(first, toOther, other);
  await routes(other, toFirst, first);
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
 * Deletes every pod at once (grace period 0) and waits, bounded, until the kubelets have stopped
 * their containers and sandboxes; a stuck pod is left to removeAllContainers.
 */
async function deleteAllPods(
  kubeconfigPath: string,
  nodes: readonly NodePaths[],
  log: Log,
): Promise<void> {
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
    for (const paths of nodes) {
      await pollUntil(
        'the kubelet to stop every pod',
        // Stopped tasks stay listed until the kubelet's garbage collection; only running ones count.
        async () =>
          /\bRUNNING\b/.test(await ctr(paths, ['tasks', 'ls'], 10_000)) ? undefined : true,
        60_000,
        500,
      );
    }
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
 * Everything outside the data folder that a node can leave, plus mounts inside its folder: shims
 * of its containerd, mounts, the CNI result cache (containerd 1.6 writes it to
 * /var/lib/cni/results whatever its configuration says), and the network namespace.
 */
async function cleanUpNode(site: NodeSite): Promise<void> {
  const { paths, netns, networkName } = site;
  for (const pid of await processesMentioning(paths.containerdSocket)) {
    await stopRecordedProcess(pid, paths.containerdSocket, 5_000);
  }
  await unmountUnder(paths.dataDir);
  await removeLinksInto('/var/log/containers', paths.dataDir);
  const results = '/var/lib/cni/results';
  if (existsSync(results)) {
    for (const entry of await readdir(results)) {
      if (entry.startsWith(`${networkName}-`)) await rm(join(results, entry), { force: true });
    }
  }
  if (existsSync(`/run/netns/${netns}`)) await sh(['ip', 'netns', 'delete', netns]);
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

async function cleanUpAfter(dataDir: string, statePath: string, log: Log): Promise<void> {
  const state = await readFile(statePath, 'utf8')
    .then((text) => stateFile.parse(JSON.parse(text)))
    .catch(() => undefined);
  // Without a usable state, as many nodes as left a namespace or a folder behind.
  const leftBehind = nodeSites(dataDir, 8).filter(
    (site, index) =>
      index === 0 || existsSync(`/run/netns/${site.netns}`) || existsSync(site.paths.dataDir),
  );
  const sites = nodeSites(dataDir, Math.max(state?.nodeNetns?.length ?? 1, leftBehind.length));
  if (state === undefined && !sites.some((site) => existsSync(`/run/netns/${site.netns}`))) return;
  log('cleaning up after an earlier run in this data folder');
  for (const pid of (state?.pids ?? []).reverse()) await stopRecordedProcess(pid, dataDir);
  for (const site of sites) {
    await removeAllContainersOfDeadContainerd(site.paths);
    await cleanUpNode(site);
  }
  await unmountUnder(dataDir);
  await removeHostTraces();
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
