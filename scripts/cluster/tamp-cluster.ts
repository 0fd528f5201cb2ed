import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { parse, stringify } from 'yaml';
import {
  type BuiltImage,
  buildDependencyImages,
  buildServiceImages,
  IMAGE_REPOSITORY,
} from '../infra/images/build-images';
import { kubectl } from '../infra/kubernetes/api';
import { type RunningCluster, removeCluster, startCluster } from '../infra/kubernetes/cluster';
import { CLUSTER_NETWORK } from '../infra/kubernetes/node-config';
import { PROJECT_ROOT, provisionTools, toolPath } from '../infra/provision';

type Log = (message: string) => void;

export const TAMP_NAMESPACE = 'tamp';
export const DEPENDENCIES_NAMESPACE = 'tamp-deps';
export const RELEASE = 'tamp';

export interface TampCluster {
  cluster: RunningCluster;
  kubeconfigPath: string;
  /** The public API through the chart's gateway Service, on a loopback port. */
  publicUrl: string;
  /** The admin API through `<release>-gateway-admin`, on a loopback port. */
  adminUrl: string;
  adminToken: string;
  /** MinIO on a loopback port: the endpoint presigned URLs are signed for. */
  s3PublicUrl: string;
  images: BuiltImage[];
  /** The values the release was installed with (a YAML file in the data folder). */
  valuesFile: string;
  /** Seconds `helm install --wait` took. */
  helmInstallSeconds: number;
  helm(args: string[], timeoutMs?: number): Promise<string>;
  kubectl(args: string[], input?: string): Promise<string>;
  stop(): Promise<void>;
}

/**
 * Images built here, a node-level cluster, the dependencies of k8s/dependencies (with the local
 * images), and `helm install tamp charts/tamp --wait` with production-like values adjusted to
 * one small node. Used by `npm run cluster` and by the cluster test.
 */
export async function startTampCluster(options: {
  dataDir: string;
  log?: Log;
  /**
   * Kubernetes nodes, 1 by default. With more, the dependencies that keep their data in an
   * emptyDir (FerretDB, MinIO) stay on the first node, so a drain of another loses nothing.
   */
  nodes?: number;
  /** Extra values merged over the local ones (the test allow-lists its webhook receiver). */
  values?: Record<string, unknown>;
  /** Runs before `helm install` (the test creates its webhook receiver there). */
  beforeInstall?: (
    kubectl: (args: string[], input?: string) => Promise<string>,
    images: BuiltImage[],
  ) => Promise<void>;
}): Promise<TampCluster> {
  const log = options.log ?? (() => {});
  const dataDir = resolve(options.dataDir);
  await mkdir(dataDir, { recursive: true });
  // The node's binaries and Helm; the image builders provision the tools they run themselves.
  await provisionTools(['kubernetes-node', 'helm'], log);
  const tag = JSON.parse(await readFile(join(PROJECT_ROOT, 'package.json'), 'utf8'))
    .version as string;

  const started = Date.now();
  const images = [
    ...(await buildDependencyImages({ log })),
    ...(await buildServiceImages({ tag, log })),
  ];
  log(`images ready in ${Math.round((Date.now() - started) / 1000)} s`);

  // A fresh cluster each time: the images are what is worth keeping, and they live elsewhere.
  await removeCluster(join(dataDir, 'cluster'));
  const cluster = await startCluster({
    dataDir: join(dataDir, 'cluster'),
    images: images.map((image) => image.archive),
    nodes: options.nodes,
    log,
  });
  const kubeconfigPath = cluster.kubeconfigPath;
  const run = (args: string[], input?: string) => kubectl(kubeconfigPath, args, { input });
  const helmEnv = {
    PATH: process.env.PATH ?? '',
    HOME: join(dataDir, 'helm-home'),
    KUBECONFIG: kubeconfigPath,
    HELM_CACHE_HOME: join(dataDir, 'helm-home', 'cache'),
    HELM_CONFIG_HOME: join(dataDir, 'helm-home', 'config'),
    HELM_DATA_HOME: join(dataDir, 'helm-home', 'data'),
  };
  const helm = async (args: string[], timeoutMs = 600_000) => {
    const { execFile } = await import('node:child_process');
    return new Promise<string>((resolvePromise, reject) => {
      execFile(
        toolPath('helm'),
        args,
        { cwd: PROJECT_ROOT, env: helmEnv, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 },
        (error, stdout, stderr) =>
          error
            ? reject(
                new Error(`helm ${args.join(' ')} failed: ${stderr || error.message}\n${stdout}`),
              )
            : resolvePromise(stdout),
      );
    });
  };

  try {
    // Dependencies: the manifests a user applies, with the images built here.
    const credentials = { accessKey: 'tamp-minio', secretKey: randomBytes(18).toString('hex') };
    await run(['create', 'namespace', DEPENDENCIES_NAMESPACE]);
    await run([
      '-n',
      DEPENDENCIES_NAMESPACE,
      'create',
      'secret',
      'generic',
      'minio-credentials',
      `--from-literal=access-key=${credentials.accessKey}`,
      `--from-literal=secret-key=${credentials.secretKey}`,
    ]);
    const overlay = join(dataDir, 'dependencies-overlay');
    await mkdir(overlay, { recursive: true });
    const byName = (prefix: string) => images.find((image) => image.name.startsWith(prefix))!.name;
    const [natsImage, minioImage, ferretImage] = [
      byName('tamp.local/nats:'),
      byName('tamp.local/minio:'),
      byName('tamp.local/ferretdb:'),
    ];
    await writeFile(
      join(overlay, 'kustomization.yaml'),
      stringify({
        apiVersion: 'kustomize.config.k8s.io/v1beta1',
        kind: 'Kustomization',
        // Kustomize takes a base only by a relative path.
        resources: [relative(overlay, join(PROJECT_ROOT, 'k8s/dependencies'))],
        images: [
          imageOverride('nats', natsImage),
          imageOverride('quay.io/minio/minio', minioImage),
          imageOverride('ghcr.io/ferretdb/ferretdb', ferretImage),
        ],
        patches: (options.nodes ?? 1) > 1 ? [onFirstNode('Deployment', cluster.nodeNames[0]!)] : [],
      }),
    );
    await run(['-n', DEPENDENCIES_NAMESPACE, 'apply', '-k', overlay]);
    await run([
      '-n',
      DEPENDENCIES_NAMESPACE,
      'rollout',
      'status',
      'deployment',
      '--timeout=180s',
      '--watch',
    ]);
    await run([
      '-n',
      DEPENDENCIES_NAMESPACE,
      'rollout',
      'status',
      'statefulset/nats',
      '--timeout=180s',
      '--watch',
    ]);
    log('dependencies are ready');

    const minioIp = (
      await run([
        '-n',
        DEPENDENCIES_NAMESPACE,
        'get',
        'service',
        'minio',
        '-o',
        'jsonpath={.spec.clusterIP}',
      ])
    ).trim();
    const s3Port = await cluster.expose(minioIp, 9000);
    const s3PublicUrl = `http://127.0.0.1:${s3Port}`;

    const localValues = parse(
      await readFile(join(PROJECT_ROOT, 'k8s/values-local-cluster.yaml'), 'utf8'),
    ) as Record<string, unknown>;
    const dns = (service: string) =>
      `${service}.${DEPENDENCIES_NAMESPACE}.svc.${CLUSTER_NETWORK.clusterDomain}`;
    const values = deepMerge(localValues, {
      image: { repository: IMAGE_REPOSITORY, tag },
      nats: { url: `nats://${dns('nats')}:4222`, monitoringEndpoint: `${dns('nats')}:8222` },
      s3: { endpoint: `http://${dns('minio')}:9000`, publicEndpoint: s3PublicUrl },
      secrets: {
        create: true,
        seed: randomBytes(24).toString('hex'),
        values: {
          'mongo-url': `mongodb://${dns('ferretdb')}:27017/`,
          's3-access-key': credentials.accessKey,
          's3-secret-key': credentials.secretKey,
        },
      },
      ...(options.values ?? {}),
    });
    const valuesFile = join(dataDir, 'values.yaml');
    await writeFile(valuesFile, stringify(values), { mode: 0o600 });

    await options.beforeInstall?.(run, images);
    await run(['apply', '-f', join(PROJECT_ROOT, 'k8s/crds')]);
    const installStarted = Date.now();
    await helm([
      'install',
      RELEASE,
      join(PROJECT_ROOT, 'charts/tamp'),
      '--namespace',
      TAMP_NAMESPACE,
      '--create-namespace',
      '--values',
      valuesFile,
      '--wait',
      '--timeout',
      '10m',
    ]);
    const helmInstallSeconds = (Date.now() - installStarted) / 1000;
    log(`helm install --wait took ${helmInstallSeconds.toFixed(1)} s`);

    const serviceIp = async (name: string) =>
      (
        await run([
          '-n',
          TAMP_NAMESPACE,
          'get',
          'service',
          name,
          '-o',
          'jsonpath={.spec.clusterIP}',
        ])
      ).trim();
    const publicPort = await cluster.expose(await serviceIp(`${RELEASE}-gateway`), 80);
    const adminPort = await cluster.expose(await serviceIp(`${RELEASE}-gateway-admin`), 8081);
    const adminToken = Buffer.from(
      (
        await run([
          '-n',
          TAMP_NAMESPACE,
          'get',
          'secret',
          `${RELEASE}-secrets`,
          '-o',
          'jsonpath={.data.admin-token}',
        ])
      ).trim(),
      'base64',
    ).toString();

    return {
      cluster,
      kubeconfigPath,
      publicUrl: `http://127.0.0.1:${publicPort}`,
      adminUrl: `http://127.0.0.1:${adminPort}`,
      adminToken,
      s3PublicUrl,
      images,
      valuesFile,
      helmInstallSeconds,
      helm,
      kubectl: run,
      stop: async () => {
        await cluster.stop();
        await removeCluster(join(dataDir, 'cluster'));
      },
    };
  } catch (error) {
    await cluster.stop();
    throw error;
  }
}

/** A kustomize patch keeping every object of `kind` on one node. */
function onFirstNode(kind: string, nodeName: string) {
  return {
    target: { kind },
    patch: stringify([
      {
        op: 'add',
        path: '/spec/template/spec/nodeSelector',
        value: { 'kubernetes.io/hostname': nodeName },
      },
    ]),
  };
}

function imageOverride(name: string, image: string) {
  const at = image.lastIndexOf(':');
  return { name, newName: image.slice(0, at), newTag: image.slice(at + 1) };
}

function deepMerge(
  base: Record<string, unknown>,
  over: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const current = out[key];
    out[key] = isPlainObject(current) && isPlainObject(value) ? deepMerge(current, value) : value;
  }
  return out;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
