import { stringify } from 'yaml';

/**
 * The fixed addresses of the node-level cluster. They exist only inside the cluster's own
 * network namespace, which has no default route: pods and components reach one another and
 * nothing else.
 */
export const CLUSTER_NETWORK = {
  nodeName: 'tamp-node',
  nodeAddress: '10.200.0.2',
  podRange: '10.244.0.0/24',
  /** Every node's pod range lies in here (kube-proxy's clusterCIDR). */
  clusterPodRange: '10.244.0.0/16',
  serviceRange: '10.0.0.0/24',
  clusterDomain: 'cluster.local',
  /** CoreDNS runs as a process of the node, on the node's address. */
  dnsAddress: '10.200.0.2',
} as const;

/** One node of the cluster: its name, its address, and the range its pods' addresses come from. */
export interface ClusterNode {
  name: string;
  address: string;
  podRange: string;
}

/**
 * The cluster's nodes by position: the first runs the control plane and CoreDNS beside its
 * kubelet; the others run a kubelet and kube-proxy each, in network namespaces of their own.
 */
export function clusterNode(index: number): ClusterNode {
  if (index === 0) {
    return {
      name: CLUSTER_NETWORK.nodeName,
      address: CLUSTER_NETWORK.nodeAddress,
      podRange: CLUSTER_NETWORK.podRange,
    };
  }
  return {
    name: `${CLUSTER_NETWORK.nodeName}-${index + 1}`,
    address: `10.200.0.${index + 2}`,
    podRange: `10.244.${index}.0/24`,
  };
}

export const PAUSE_IMAGE = 'tamp.local/pause:catatonit';

export interface NodePaths {
  dataDir: string;
  containerdSocket: string;
  containerdDir: string;
  cniConfDir: string;
  cniIpamDir: string;
  cniBinDir: string;
  kubeletDir: string;
  caFile: string;
  kubeletCert: string;
  kubeletKey: string;
  runcBinary: string;
  resolvConf: string;
}

/** containerd 1.6 (Debian) with every path in the data folder and runc as its runtime. */
export function containerdConfig(paths: NodePaths): string {
  const q = JSON.stringify;
  return `version = 2
root = ${q(`${paths.containerdDir}/root`)}
state = ${q(`${paths.containerdDir}/state`)}
disabled_plugins = ["io.containerd.internal.v1.tracing", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = ${q(paths.containerdSocket)}

[ttrpc]
  address = ${q(`${paths.containerdSocket}.ttrpc`)}

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = ${q(`${paths.containerdDir}/opt`)}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ${q(PAUSE_IMAGE)}
  # No CAP_SYS_RESOURCE here: never lower a process's oom_score_adj below containerd's own.
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # crun fails on this machine's hybrid cgroup v1 hierarchy; runc works.
        BinaryName = ${q(paths.runcBinary)}
        Root = ${q(`${paths.containerdDir}/runc`)}
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ${q(paths.cniBinDir)}
    conf_dir = ${q(paths.cniConfDir)}
    max_conf_num = 1
`;
}

/** The bridge network of the pods; host-local keeps its leases in the data folder. */
export function cniConfig(paths: NodePaths, networkName: string, podRange: string): string {
  return JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: networkName,
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          // No masquerading: there is nowhere outside to masquerade to.
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: podRange }]],
            routes: [{ dst: '0.0.0.0/0' }],
            dataDir: paths.cniIpamDir,
          },
        },
      ],
    },
    null,
    2,
  );
}

/** Where a node's kubelet writes its containers' logs (one folder per pod). */
export function podLogsDirOf(paths: Pick<NodePaths, 'kubeletDir'>): string {
  return `${paths.kubeletDir}/pod-logs`;
}

/**
 * The kubelet's configuration for this machine: cgroup v1 (hybrid) accepted, cgroupfs, no QoS
 * cgroups (it may not create them here), every directory in the data folder.
 */
export function kubeletConfig(paths: NodePaths, node: ClusterNode): string {
  return stringify({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    cgroupsPerQOS: false,
    enforceNodeAllocatable: [],
    failSwapOn: false,
    address: node.address,
    port: 10250,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: 10248,
    tlsCertFile: paths.kubeletCert,
    tlsPrivateKeyFile: paths.kubeletKey,
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: paths.caFile },
    },
    authorization: { mode: 'Webhook' },
    clusterDNS: [CLUSTER_NETWORK.dnsAddress],
    clusterDomain: CLUSTER_NETWORK.clusterDomain,
    resolvConf: paths.resolvConf,
    podLogsDir: podLogsDirOf(paths),
    volumePluginDir: `${paths.kubeletDir}/volume-plugins`,
    containerRuntimeEndpoint: `unix://${paths.containerdSocket}`,
    imageServiceEndpoint: `unix://${paths.containerdSocket}`,
    // A shared development disk: never evict pods or collect the imported images because of it.
    evictionHard: {
      'memory.available': '100Mi',
      'nodefs.available': '1%',
      'imagefs.available': '1%',
    },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    serializeImagePulls: false,
    maxPods: 110,
    // Quicker feedback than the defaults, for tests.
    nodeStatusUpdateFrequency: '5s',
    syncFrequency: '10s',
    fileCheckFrequency: '10s',
    shutdownGracePeriod: '0s',
    protectKernelDefaults: false,
    makeIPTablesUtilChains: false,
    logging: { format: 'text' },
  });
}

/** kube-proxy in iptables mode; conntrack sysctls are left alone (not writable here). */
export function kubeProxyConfig(kubeconfigPath: string, node: ClusterNode): string {
  return stringify({
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    clientConnection: { kubeconfig: kubeconfigPath },
    hostnameOverride: node.name,
    clusterCIDR: CLUSTER_NETWORK.clusterPodRange,
    mode: 'iptables',
    bindAddress: node.address,
    healthzBindAddress: '127.0.0.1:10256',
    metricsBindAddress: '127.0.0.1:10249',
    conntrack: {
      maxPerCore: 0,
      min: 0,
      tcpEstablishedTimeout: '0s',
      tcpCloseWaitTimeout: '0s',
    },
  });
}

/** CoreDNS answers for the cluster domain only: with no `forward`, no query leaves the node. */
export function corefile(kubeconfigPath: string): string {
  return `.:53 {
    bind ${CLUSTER_NETWORK.dnsAddress}
    errors
    health 127.0.0.1:18080
    ready 127.0.0.1:18181
    kubernetes ${CLUSTER_NETWORK.clusterDomain} in-addr.arpa ip6.arpa {
        kubeconfig ${kubeconfigPath} tamp-local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
`;
}

/** What CoreDNS may read: the same as the usual system:coredns role. */
export const CORE_DNS_RBAC = [
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'tamp:coredns' },
    rules: [
      {
        apiGroups: [''],
        resources: ['endpoints', 'services', 'pods', 'namespaces'],
        verbs: ['list', 'watch'],
      },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
    ],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'tamp:coredns' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'tamp:coredns' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'tamp-coredns' }],
  },
];
