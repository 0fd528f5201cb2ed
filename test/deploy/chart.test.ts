import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { webhookTargetPolicyFrom } from '@tamp/kit';
import { createTopology, PIPELINES, type Pipeline, WORKER_SERVICES } from '@tamp/proto';
import { PROJECT_ROOT } from '@tamp/scripts/infra/provision';
import { beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { configSchema as billingSchema } from '../../services/billing/src/config';
import { configSchema as gatewaySchema } from '../../services/gateway/src/config';
import { configSchema as jobSchema } from '../../services/job/src/config';
import { configSchema as operatorSchema } from '../../services/operator/src/config';
import { configSchema as uploadSchema } from '../../services/upload/src/config';
import {
  configSchema as webhookSchema,
  webhookSettingsFrom,
} from '../../services/webhook/src/config';
import { configSchema as workerAudioSchema } from '../../services/worker-audio/src/config';
import { configSchema as workerImageSchema } from '../../services/worker-image/src/config';
import { configSchema as workerTextSchema } from '../../services/worker-text/src/config';
import { useControlPlane } from '../support/kubernetes';
import {
  CHART_DIR,
  componentOf,
  helm,
  helmBinary,
  type Manifest,
  NAMESPACE,
  ofKind,
  parseManifests,
  RELEASE,
  render,
  serverDryRun,
  valuesArgs,
} from './helm';

/** Each service's environment schema: the one source of truth for what the chart may set. */
const SCHEMAS: Record<string, z.ZodObject> = {
  gateway: gatewaySchema,
  upload: uploadSchema,
  job: jobSchema,
  billing: billingSchema,
  webhook: webhookSchema,
  operator: operatorSchema,
  'worker-image': workerImageSchema,
  'worker-text': workerTextSchema,
  'worker-audio': workerAudioSchema,
};
const SERVICES = Object.keys(SCHEMAS).sort();
const WORKERS = ['worker-audio', 'worker-image', 'worker-text'];

/** Credentials: never a plain value in a Deployment. */
const CREDENTIALS = [
  'MONGO_URL',
  'S3_ACCESS_KEY',
  'S3_SECRET_KEY',
  'ADMIN_TOKEN',
  'JOB_CURSOR_SECRET',
  'SECRETS_ENCRYPTION_KEY',
];

/** What an operator would put in the Secret, for parsing the rendered environments. */
const SECRET_FIXTURES: Record<string, string> = {
  'mongo-url': 'mongodb://tamp:password@mongodb.data:27017/?authSource=admin',
  's3-access-key': 'tamp-access',
  's3-secret-key': 'tamp-secret-key',
  'admin-token': randomBytes(24).toString('hex'),
  'job-cursor-secret': randomBytes(24).toString('hex'),
  'secrets-encryption-key': randomBytes(32).toString('base64'),
  'nats-url': 'nats://tamp:password@nats.data:4222',
};

const IMAGE_BUDGET = 1100;

/** Everything optional switched on, with a NATS namespace, TLS and a created Secret. */
const FULL_VALUES = {
  nats: { namespace: 'prod-eu', monitoringEndpoint: 'nats.data:8222' },
  s3: { endpoint: 'http://minio.data:9000', publicEndpoint: 'https://s3.example.com' },
  otelEndpoint: 'http://otel-collector.observability:4318',
  logLevel: 'debug',
  shutdownTimeoutMs: 40_000,
  secrets: {
    create: true,
    values: {
      'mongo-url': SECRET_FIXTURES['mongo-url'],
      's3-access-key': SECRET_FIXTURES['s3-access-key'],
      's3-secret-key': SECRET_FIXTURES['s3-secret-key'],
    },
  },
  gateway: {
    autoscaling: { enabled: true, minReplicas: 2, maxReplicas: 6 },
    env: { AUTH_CACHE_TTL_MS: 2000 },
  },
  job: { env: { JOB_RETRY_BASE_MS: '1500' } },
  billing: { env: { PLANS_JSON: '{"free":{"creditsPerPeriod":500}}' } },
  workerImage: {
    env: { IMAGE_MEMORY_BUDGET_MB: IMAGE_BUDGET, WORKER_CONCURRENCY: 3 },
    autoscaling: { enabled: true, mode: 'hpa', minReplicas: 1, maxReplicas: 8 },
  },
  workerAudio: {
    autoscaling: {
      enabled: true,
      mode: 'keda',
      minReplicas: 1,
      maxReplicas: 5,
      targetBacklogPerReplica: 3,
    },
  },
  workerText: {
    autoscaling: {
      enabled: true,
      mode: 'operator',
      minReplicas: 0,
      maxReplicas: 4,
      targetBacklogPerReplica: 20,
      scaleDownStabilizationSeconds: 120,
    },
  },
  operator: { leaderElection: { leaseDurationSeconds: 30 } },
  ingress: {
    enabled: true,
    className: 'nginx',
    annotations: { 'nginx.ingress.kubernetes.io/proxy-body-size': '25m' },
    hosts: [
      { host: 'api.example.com', paths: [{ path: '/', pathType: 'Prefix' }] },
      { host: 'tamp.example.com', paths: [{ path: '/v1', pathType: 'Prefix' }] },
    ],
    tls: [{ secretName: 'tamp-tls', hosts: ['api.example.com', 'tamp.example.com'] }],
  },
  networkPolicy: {
    publicFrom: [
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } },
      },
    ],
    adminFrom: [{ ipBlock: { cidr: '10.20.0.0/16' } }],
    opsFrom: [
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
    ],
  },
  metrics: {
    serviceMonitor: { enabled: true, labels: { release: 'kube-prometheus-stack' } },
    prometheusRule: { enabled: true },
    dashboard: { enabled: true },
  },
};

/** A fake image digest made of one repeated hex character. */
const digest = (hex: string) => `sha256:${hex.repeat(64)}`;

/** A container security context the restricted Pod Security Standard admits. */
const RESTRICTED = {
  runAsNonRoot: true,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

/** Every value added for platform teams, with something in it (each is asserted below). */
const EXTRA_VALUES = {
  image: { digests: { gateway: digest('a'), 'worker-text': digest('b') } },
  podSecurityContext: {
    runAsNonRoot: true,
    runAsUser: 10001,
    runAsGroup: 10001,
    fsGroup: 10001,
    fsGroupChangePolicy: 'OnRootMismatch',
    supplementalGroups: [10002],
    seccompProfile: { type: 'RuntimeDefault' },
  },
  containerSecurityContext: RESTRICTED,
  extraEnv: [
    { name: 'NODE_EXTRA_CA_CERTS', value: '/etc/tamp/ca/ca.crt' },
    { name: 'HTTPS_PROXY', valueFrom: { configMapKeyRef: { name: 'proxy', key: 'url' } } },
    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
  ],
  extraVolumes: [{ name: 'ca-bundle', configMap: { name: 'corporate-ca' } }],
  extraVolumeMounts: [{ name: 'ca-bundle', mountPath: '/etc/tamp/ca', readOnly: true }],
  extraDeploy: [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: '{{ .Release.Name }}-extra' },
      data: { bucket: '{{ .Values.s3.bucket }}' },
    },
    [
      'apiVersion: v1',
      'kind: ConfigMap',
      'metadata:',
      '  name: {{ include "tamp.fullname" . }}-from-text',
      'data:',
      '  release: {{ .Release.Name | quote }}',
    ].join('\n'),
  ],
  podAntiAffinityPreset: 'hard',
  probes: { startup: { path: '/readyz', periodSeconds: 5, failureThreshold: 24 } },
  gateway: {
    extraEnv: [
      { name: 'HTTPS_PROXY', value: 'http://proxy.internal:3128' },
      {
        name: 'PARTNER_TOKEN',
        valueFrom: { secretKeyRef: { name: 'partner', key: 'token', optional: true } },
      },
    ],
    extraVolumes: [{ name: 'proxy-config', secret: { secretName: 'proxy-config' } }],
    extraVolumeMounts: [{ name: 'proxy-config', mountPath: '/etc/proxy', readOnly: true }],
    initContainers: [
      {
        name: 'wait-for-nats',
        image: 'busybox:1.37',
        command: ['sh', '-c', 'until nc -z nats 4222; do sleep 1; done'],
        securityContext: RESTRICTED,
        resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '32Mi' } },
      },
    ],
    sidecars: [
      {
        name: 'proxy',
        image: 'envoyproxy/envoy:v1.33.0',
        ports: [{ name: 'proxy', containerPort: 15000, protocol: 'TCP' }],
        securityContext: RESTRICTED,
        resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { memory: '128Mi' } },
      },
    ],
  },
  workerText: { image: { digest: digest('c') } },
  workerImage: {
    scratch: { sizeLimit: '2900Mi' },
    resources: { requests: { 'ephemeral-storage': '1Gi' }, limits: { 'ephemeral-storage': '3Gi' } },
  },
  workerAudio: {
    initContainers: [
      {
        name: 'log-shipper',
        image: 'fluent/fluent-bit:3.2.0',
        restartPolicy: 'Always',
        securityContext: RESTRICTED,
      },
    ],
  },
  networkPolicy: {
    monitoring: {
      enabled: true,
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
    },
  },
};

/** A Kubernetes storage quantity in MiB (rounded up). */
function toMebibytes(quantity: string | number): number {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(quantity));
  if (match === null) throw new Error(`unexpected quantity ${quantity}`);
  const bytes: Record<string, number> = {
    '': 1,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
  };
  return Math.ceil((Number(match[1]) * bytes[match[2] ?? '']!) / 2 ** 20);
}

/** A pod that would connect: its namespace's labels and its own. */
interface Peer {
  namespace: Record<string, string>;
  pod: Record<string, string>;
}

interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}

function selects(selector: LabelSelector, labels: Record<string, string>): boolean {
  const byLabels = Object.entries(selector.matchLabels ?? {}).every(
    ([key, value]) => labels[key] === value,
  );
  const byExpressions = (selector.matchExpressions ?? []).every(({ key, operator, values }) => {
    if (operator === 'Exists') return key in labels;
    if (operator === 'DoesNotExist') return !(key in labels);
    const inValues = key in labels && (values ?? []).includes(labels[key]!);
    return operator === 'In' ? inValues : !inValues;
  });
  return byLabels && byExpressions;
}

/** Whether a NetworkPolicy's ingress rules admit a pod (not an ipBlock) to a named port. */
function admits(policy: Manifest, peer: Peer, port: string): boolean {
  const rules = (policy.spec.ingress ?? []) as Array<{
    ports?: Array<{ port: string }>;
    from?: Array<{ namespaceSelector?: LabelSelector; podSelector?: LabelSelector }>;
  }>;
  return rules.some((rule) => {
    if (rule.ports !== undefined && !rule.ports.some((candidate) => candidate.port === port)) {
      return false;
    }
    if (rule.from === undefined || rule.from.length === 0) return true;
    return rule.from.some((from) => {
      if (from.namespaceSelector === undefined && from.podSelector === undefined) return false;
      // Without a namespaceSelector a peer is a pod of the policy's own namespace.
      const namespaceMatches =
        from.namespaceSelector === undefined
          ? peer.namespace['kubernetes.io/metadata.name'] === policy.metadata.namespace
          : selects(from.namespaceSelector, peer.namespace);
      return (
        namespaceMatches && (from.podSelector === undefined || selects(from.podSelector, peer.pod))
      );
    });
  });
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}

/** The service's own container (a pod may also have sidecars). */
function container(deployment: Manifest) {
  const name = componentOf(deployment);
  const main = deployment.spec.template.spec.containers.find(
    (candidate: { name: string }) => candidate.name === name,
  );
  expect(main, `${deployment.metadata.name}: container ${name}`).toBeDefined();
  return main;
}

function envOf(deployment: Manifest): EnvVar[] {
  return container(deployment).env as EnvVar[];
}

/** The environment a pod would see, with secretKeyRefs resolved from a rendered or fixture Secret. */
function resolvedEnv(deployment: Manifest, manifests: Manifest[]): Record<string, string> {
  const secrets = new Map(ofKind(manifests, 'Secret').map((s) => [s.metadata.name, s.data ?? {}]));
  const env: Record<string, string> = {};
  for (const variable of envOf(deployment)) {
    const ref = variable.valueFrom?.secretKeyRef;
    if (ref !== undefined) {
      const rendered = secrets.get(ref.name)?.[ref.key];
      const value =
        rendered !== undefined
          ? Buffer.from(rendered, 'base64').toString('utf8')
          : SECRET_FIXTURES[ref.key];
      expect(value, `${variable.name}: no value for Secret key ${ref.key}`).toBeDefined();
      env[variable.name] = value!;
    } else {
      expect(typeof variable.value, `${variable.name} has neither value nor secretKeyRef`).toBe(
        'string',
      );
      env[variable.name] = variable.value!;
    }
  }
  return env;
}

function deploymentOf(manifests: Manifest[], service: string): Manifest {
  const found = ofKind(manifests, 'Deployment').filter((d) => componentOf(d) === service);
  expect(found, `Deployment of ${service}`).toHaveLength(1);
  return found[0]!;
}

function mebibytes(quantity: string): number {
  const match = /^(\d+)(Mi|Gi)$/.exec(quantity);
  if (match === null) throw new Error(`unexpected memory quantity ${quantity}`);
  return Number(match[1]) * (match[2] === 'Gi' ? 1024 : 1);
}

function portNumber(deployment: Manifest, name: string): number | undefined {
  return (container(deployment).ports as Array<{ name: string; containerPort: number }>).find(
    (port) => port.name === name,
  )?.containerPort;
}

describe('Helm chart charts/tamp', () => {
  let defaults: Manifest[];
  let full: Manifest[];
  let extras: Manifest[];
  let fullArgs: string[];

  beforeAll(async () => {
    await helmBinary();
    fullArgs = await valuesArgs(FULL_VALUES);
    [defaults, full, extras] = await Promise.all([
      render(),
      render(fullArgs),
      render(await valuesArgs(EXTRA_VALUES)),
    ]);
  }, 600_000);

  it('passes helm lint --strict with the default, the full and the extra values', async () => {
    for (const args of [[], fullArgs, await valuesArgs(EXTRA_VALUES)]) {
      const result = await helm(['lint', '--strict', CHART_DIR, ...args]);
      expect(result.code, result.stdout + result.stderr).toBe(0);
      expect(result.stdout).toContain('0 chart(s) failed');
    }
  });

  it('renders a Deployment, Service, PodDisruptionBudget and NetworkPolicy per service', () => {
    for (const manifests of [defaults, full]) {
      for (const kind of ['Deployment', 'PodDisruptionBudget']) {
        expect(ofKind(manifests, kind).map(componentOf).sort(), kind).toEqual(SERVICES);
      }
      // And one that admits nothing to the `helm test` pod.
      expect(ofKind(manifests, 'NetworkPolicy').map(componentOf).sort()).toEqual(
        [...SERVICES, 'helm-test'].sort(),
      );
      const services = ofKind(manifests, 'Service').filter(
        (s) => s.metadata.labels?.['tamp.dev/scrape'],
      );
      expect(services.map(componentOf).sort()).toEqual(SERVICES);
      for (const manifest of manifests) {
        if (manifest.kind === 'Pod') continue; // the helm test hook
        expect(manifest.metadata.namespace, `${manifest.kind} ${manifest.metadata.name}`).toBe(
          NAMESPACE,
        );
      }
    }
    // Optional objects are off by default.
    for (const kind of [
      'Ingress',
      'HorizontalPodAutoscaler',
      'ScaledObject',
      'ServiceMonitor',
      'PrometheusRule',
      'Secret',
    ]) {
      expect(ofKind(defaults, kind), kind).toEqual([]);
    }
  });

  it('probes every service on its ops port and gives it resources and a locked-down context', () => {
    for (const manifests of [defaults, full]) {
      for (const deployment of ofKind(manifests, 'Deployment')) {
        const name = componentOf(deployment);
        const main = container(deployment);
        const pod = deployment.spec.template.spec;
        // No sidecar, no init container unless asked for.
        expect(pod.containers, name).toHaveLength(1);
        expect(pod.initContainers, name).toBeUndefined();
        const env = resolvedEnv(deployment, manifests);
        // The named port the probes use is the port the service's ops server listens on.
        expect(portNumber(deployment, 'ops'), name).toBe(Number(env.OPS_PORT ?? 9090));
        expect(main.startupProbe.httpGet, name).toEqual({ path: '/healthz', port: 'ops' });
        expect(main.livenessProbe.httpGet, name).toEqual({ path: '/healthz', port: 'ops' });
        expect(main.readinessProbe.httpGet, name).toEqual({ path: '/readyz', port: 'ops' });
        expect(main.resources.requests.cpu, name).toBeDefined();
        expect(main.resources.requests.memory, name).toBeDefined();
        expect(main.resources.limits.memory, name).toBeDefined();
        expect(mebibytes(main.resources.requests.memory)).toBeLessThanOrEqual(
          mebibytes(main.resources.limits.memory),
        );
        expect(pod.securityContext.runAsNonRoot, name).toBe(true);
        expect(pod.securityContext.runAsUser, name).toBeGreaterThan(0);
        // Only the operator calls the Kubernetes API, with a ServiceAccount of its own.
        expect(pod.automountServiceAccountToken, name).toBe(name === 'operator');
        expect(pod.serviceAccountName === `${RELEASE}-operator`, name).toBe(name === 'operator');
        expect(main.securityContext, name).toMatchObject({
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
          capabilities: { drop: ['ALL'] },
        });
        // With a read-only root, /tmp and (for workers) WORKER_TEMP_DIR are emptyDir volumes.
        const mounts = new Map(
          (main.volumeMounts as Array<{ name: string; mountPath: string }>).map((m) => [
            m.mountPath,
            m.name,
          ]),
        );
        const emptyDirs = new Set(
          (pod.volumes as Array<{ name: string; emptyDir?: object }>)
            .filter((volume) => volume.emptyDir !== undefined)
            .map((volume) => volume.name),
        );
        expect(emptyDirs.has(mounts.get('/tmp') ?? ''), `${name} /tmp`).toBe(true);
        if (WORKERS.includes(name)) {
          expect(env.WORKER_TEMP_DIR, name).toBeDefined();
          expect(emptyDirs.has(mounts.get(env.WORKER_TEMP_DIR!) ?? ''), name).toBe(true);
        }
        // Kubernetes waits longer than the service's own graceful-stop bound before SIGKILL.
        const shutdownMs = Number(env.SHUTDOWN_TIMEOUT_MS ?? 25_000);
        const preStopMs = Number(main.lifecycle?.preStop?.exec?.command?.[1] ?? 0) * 1000;
        expect(pod.terminationGracePeriodSeconds * 1000, name).toBeGreaterThan(
          shutdownMs + preStopMs,
        );
      }
    }
  });

  it("sets only variables of each service's zod schema, and the environment parses", () => {
    for (const manifests of [defaults, full]) {
      for (const deployment of ofKind(manifests, 'Deployment')) {
        const name = componentOf(deployment);
        const schema = SCHEMAS[name]!;
        const names = envOf(deployment).map((variable) => variable.name);
        expect(new Set(names).size, `${name}: duplicate variables`).toBe(names.length);
        const unknown = names.filter((variable) => !(variable in schema.shape));
        expect(unknown, `${name}: not in services/${name}/src/config.ts`).toEqual([]);
        const parsed = schema.safeParse(resolvedEnv(deployment, manifests));
        expect(parsed.success, `${name}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
      }
    }
  });

  it('reads credentials only through secretKeyRef', () => {
    for (const manifests of [defaults, full]) {
      for (const deployment of ofKind(manifests, 'Deployment')) {
        const name = componentOf(deployment);
        for (const variable of envOf(deployment)) {
          if (!CREDENTIALS.includes(variable.name)) continue;
          expect(variable.value, `${name} ${variable.name}`).toBeUndefined();
          expect(variable.valueFrom?.secretKeyRef?.key, `${name} ${variable.name}`).toBeTruthy();
        }
        // Every credential the schema has is wired (so a production install sets them all).
        const expected = CREDENTIALS.filter((variable) => variable in SCHEMAS[name]!.shape);
        const wired = envOf(deployment)
          .filter((variable) => variable.valueFrom?.secretKeyRef !== undefined)
          .map((variable) => variable.name);
        expect(wired.sort(), name).toEqual(expected.sort());
      }
    }
  });

  it('leaves the webhook SSRF policy at its production default', () => {
    for (const manifests of [defaults, full]) {
      for (const deployment of ofKind(manifests, 'Deployment')) {
        const names = envOf(deployment).map((variable) => variable.name);
        expect(names).not.toContain('WEBHOOK_ALLOW_HTTP');
        expect(names).not.toContain('WEBHOOK_ALLOW_CIDRS');
      }
      const webhook = webhookSchema.parse(
        resolvedEnv(deploymentOf(manifests, 'webhook'), manifests),
      );
      expect(webhookSettingsFrom(webhook).targetPolicy).toEqual({
        allowHttp: false,
        allowCidrs: [],
      });
    }
  });

  it('allow-lists webhook targets on the webhook service and the gateway alike, when the values ask', async () => {
    const manifests = await render([
      '--set',
      'webhook.allowHttp=true',
      '--set',
      'webhook.allowedPrivateCidrs[0]=10.0.0.200/32',
      '--set',
      'webhook.allowedPrivateCidrs[1]=192.168.10.0/24',
    ]);
    const expected = { allowHttp: true, allowCidrs: ['10.0.0.200/32', '192.168.10.0/24'] };
    const webhook = webhookSchema.parse(resolvedEnv(deploymentOf(manifests, 'webhook'), manifests));
    expect(webhookSettingsFrom(webhook).targetPolicy).toEqual(expected);
    // The gateway refuses a webhookUrl when it is given by the same policy.
    const gateway = gatewaySchema.parse(resolvedEnv(deploymentOf(manifests, 'gateway'), manifests));
    expect(webhookTargetPolicyFrom(gateway)).toEqual(expected);
    for (const deployment of ofKind(manifests, 'Deployment')) {
      if (['webhook', 'gateway'].includes(componentOf(deployment))) continue;
      const names = envOf(deployment).map((variable) => variable.name);
      expect(names).not.toContain('WEBHOOK_ALLOW_CIDRS');
    }
  });

  it('counts no connections per peer address: in the cluster the peers are proxies', () => {
    for (const manifests of [defaults, full]) {
      const gateway = gatewaySchema.parse(
        resolvedEnv(deploymentOf(manifests, 'gateway'), manifests),
      );
      expect(gateway.MAX_CONNECTIONS_PER_ADDRESS).toBe(0);
    }
  });

  it("names the Ingress's first host as the API's public address, https when its TLS covers it", async () => {
    const publicUrl = (manifests: Manifest[]) =>
      gatewaySchema.parse(resolvedEnv(deploymentOf(manifests, 'gateway'), manifests)).PUBLIC_URL;
    expect(publicUrl(full)).toBe('https://api.example.com');
    expect(publicUrl(defaults)).toBeUndefined();
    const plain = await render(
      await valuesArgs({
        ingress: {
          enabled: true,
          hosts: [{ host: 'tamp.internal', paths: [{ path: '/', pathType: 'Prefix' }] }],
        },
      }),
    );
    expect(publicUrl(plain)).toBe('http://tamp.internal');
    const chosen = await render(
      await valuesArgs({
        ingress: { enabled: true },
        gateway: { env: { PUBLIC_URL: 'https://api.example.org' } },
      }),
    );
    expect(publicUrl(chosen)).toBe('https://api.example.org');
  });

  it('exposes only the gateway public port through the Ingress; admin stays ClusterIP', () => {
    const gateway = deploymentOf(full, 'gateway');
    const env = gatewaySchema.parse(resolvedEnv(gateway, full));
    expect(portNumber(gateway, 'http')).toBe(env.PORT);
    expect(portNumber(gateway, 'admin')).toBe(env.ADMIN_PORT);
    // The admin API must listen on the pod address for its Service to reach it.
    expect(env.ADMIN_HOST).toBe('0.0.0.0');

    const services = new Map(ofKind(full, 'Service').map((s) => [s.metadata.name, s]));
    const ingresses = ofKind(full, 'Ingress');
    expect(ingresses).toHaveLength(1);
    const ingress = ingresses[0]!;
    expect(ingress.spec.ingressClassName).toBe('nginx');
    expect(ingress.spec.tls).toEqual([
      { secretName: 'tamp-tls', hosts: ['api.example.com', 'tamp.example.com'] },
    ]);
    const backends = (
      ingress.spec.rules as Array<{
        http: { paths: Array<{ backend: { service: { name: string; port: { name?: string } } } }> };
      }>
    ).flatMap((rule) => rule.http.paths.map((path) => path.backend.service));
    expect(backends).toHaveLength(2);
    for (const backend of backends) {
      const service = services.get(backend.name);
      expect(service && componentOf(service)).toBe('gateway');
      const port = (
        service!.spec.ports as Array<{ name: string; targetPort: string | number }>
      ).find((candidate) => candidate.name === backend.port.name);
      // The Service port behind the Ingress lands on the container's public port, nothing else.
      expect(port?.targetPort).toBe('http');
    }
    const admin = [...services.values()].filter((service) =>
      (service.spec.ports as Array<{ targetPort: string }>).some((p) => p.targetPort === 'admin'),
    );
    expect(admin).toHaveLength(1);
    expect(admin[0]!.spec.type).toBe('ClusterIP');
    expect(admin[0]!.spec.ports).toHaveLength(1);
    expect(backends.map((backend) => backend.name)).not.toContain(admin[0]!.metadata.name);
  });

  it('lets only the gateway public port accept traffic from outside the namespace', () => {
    for (const manifests of [defaults, full]) {
      for (const policy of ofKind(manifests, 'NetworkPolicy')) {
        const name = componentOf(policy);
        expect(policy.spec.podSelector.matchLabels['app.kubernetes.io/component']).toBe(name);
        expect(policy.spec.policyTypes).toContain('Ingress');
        if (name === 'helm-test') {
          expect(policy.spec.ingress, 'the helm test pod admits nothing').toBeUndefined();
          continue;
        }
        for (const rule of policy.spec.ingress as Array<{
          ports: Array<{ port: string }>;
          from?: Array<Record<string, unknown>>;
        }>) {
          const ports = rule.ports.map((port) => port.port);
          const open = rule.from === undefined || rule.from.length === 0;
          if (open) {
            // An unrestricted rule may only be the gateway's public port.
            expect([name, ports]).toEqual(['gateway', ['http']]);
          }
          if (ports.includes('admin') || ports.includes('ops')) {
            expect(rule.from).toContainEqual({ podSelector: {} });
          }
          if (name !== 'gateway') expect(ports).toEqual(['ops']);
        }
      }
    }
    const gatewayPolicy = ofKind(full, 'NetworkPolicy').find((p) => componentOf(p) === 'gateway')!;
    const rules = gatewayPolicy.spec.ingress as Array<{
      ports: Array<{ port: string }>;
      from?: unknown[];
    }>;
    const adminRule = rules.find((rule) => rule.ports.some((port) => port.port === 'admin'))!;
    expect(adminRule.from).toContainEqual({ ipBlock: { cidr: '10.20.0.0/16' } });
    const publicRule = rules.find((rule) => rule.ports.some((port) => port.port === 'http'))!;
    expect(publicRule.from).toContainEqual(FULL_VALUES.networkPolicy.publicFrom[0]);
  });

  it('sizes the image worker pod from IMAGE_MEMORY_BUDGET_MB (budget + 160 MiB, 64 MiB steps)', () => {
    const cases: Array<[Manifest[], number]> = [
      [defaults, 320],
      [full, IMAGE_BUDGET],
    ];
    for (const [manifests, budget] of cases) {
      const worker = deploymentOf(manifests, 'worker-image');
      const env = workerImageSchema.parse(resolvedEnv(worker, manifests));
      expect(env.IMAGE_MEMORY_BUDGET_MB).toBe(budget);
      const limit = mebibytes(container(worker).resources.limits.memory);
      expect(limit).toBeGreaterThanOrEqual(budget + 160);
      expect(limit).toBeLessThan(budget + 160 + 64);
      expect(limit % 64).toBe(0);
      expect(limit).toBe(Math.ceil((budget + 160) / 64) * 64);
      expect(container(worker).resources.requests.memory).toBe(
        container(worker).resources.limits.memory,
      );
    }
    // The documented figure for the default budget.
    expect(container(deploymentOf(defaults, 'worker-image')).resources.limits.memory).toBe('512Mi');
  });

  it('autoscales with an HPA, KEDA or a WorkerPool on the JetStream consumer backlog when asked', () => {
    const deployments = new Map(ofKind(full, 'Deployment').map((d) => [d.metadata.name, d]));
    const hpas = ofKind(full, 'HorizontalPodAutoscaler');
    expect(hpas.map(componentOf).sort()).toEqual(['gateway', 'worker-image']);
    for (const hpa of hpas) {
      const target = deployments.get(hpa.spec.scaleTargetRef.name);
      expect(target && componentOf(target)).toBe(componentOf(hpa));
      expect(hpa.spec.scaleTargetRef.kind).toBe('Deployment');
      // The HPA owns the replica count: the Deployment must not fight it.
      expect(target!.spec.replicas).toBeUndefined();
      expect(hpa.spec.metrics[0].resource.name).toBe('cpu');
    }
    const topology = createTopology(FULL_VALUES.nats.namespace);
    const scaled = ofKind(full, 'ScaledObject');
    expect(scaled.map(componentOf).sort()).toEqual(['worker-audio']);
    for (const object of scaled) {
      const service = componentOf(object) as 'worker-audio';
      expect(deployments.get(object.spec.scaleTargetRef.name)?.spec.replicas).toBeUndefined();
      const trigger = object.spec.triggers[0];
      expect(trigger.type).toBe('nats-jetstream');
      // The names the services actually provision (proto/src/topology.ts).
      expect(trigger.metadata.stream).toBe(topology.streams.jobs.name);
      expect(trigger.metadata.consumer).toBe(topology.consumers[service].durableName);
      expect(trigger.metadata.natsServerMonitoringEndpoint).toBe('nats.data:8222');
      expect(trigger.metadata.lagThreshold).toBe('3');
    }
    const pools = ofKind(full, 'WorkerPool');
    expect(pools.map(componentOf)).toEqual(['worker-text']);
    expect(pools[0]!.apiVersion).toBe('tamp.dev/v1alpha1');
    expect(deployments.get(pools[0]!.spec.deployment)?.spec.replicas).toBeUndefined();
    expect(pools[0]!.spec).toEqual({
      deployment: `${RELEASE}-worker-text`,
      pipeline: 'text',
      minReplicas: 0,
      maxReplicas: 4,
      targetBacklogPerReplica: 20,
      scaleDownStabilizationSeconds: 120,
      pollIntervalSeconds: 15,
    });
    // By default the services but the workers keep their replica counts (the workers' belong
    // to their WorkerPools).
    for (const deployment of ofKind(defaults, 'Deployment')) {
      if (WORKERS.includes(componentOf(deployment))) continue;
      expect(deployment.spec.replicas, deployment.metadata.name).toBeGreaterThanOrEqual(1);
    }
  });

  it('scrapes every ops port and alerts on metrics the services really export', async () => {
    const monitors = ofKind(full, 'ServiceMonitor');
    expect(monitors).toHaveLength(1);
    const monitor = monitors[0]!;
    expect(monitor.metadata.labels?.release).toBe('kube-prometheus-stack');
    expect(monitor.spec.endpoints).toEqual([
      expect.objectContaining({ port: 'ops', path: '/metrics' }),
    ]);
    const selector = monitor.spec.selector.matchLabels as Record<string, string>;
    const selected = ofKind(full, 'Service').filter((service) =>
      Object.entries(selector).every(([key, value]) => service.metadata.labels?.[key] === value),
    );
    expect(selected.map(componentOf).sort()).toEqual(SERVICES);
    for (const service of selected) {
      expect(service.spec.ports.map((port: { name: string }) => port.name)).toContain('ops');
    }

    const rules = ofKind(full, 'PrometheusRule');
    expect(rules).toHaveLength(1);
    const expressions = (
      rules[0]!.spec.groups as Array<{ rules: Array<{ alert: string; expr: string }> }>
    ).flatMap((group) => group.rules.map((rule) => rule.expr));
    expect(expressions.length).toBeGreaterThan(0);
    const sources = await sourceText(join(PROJECT_ROOT, 'services'));
    const metrics = new Set(expressions.flatMap((expr) => expr.match(/\btamp_[a-z_]+/g) ?? []));
    expect(metrics.size).toBeGreaterThan(0);
    for (const metric of metrics) {
      expect(sources, `${metric} is not registered by any service`).toContain(`'${metric}'`);
    }
    for (const expr of expressions) {
      expect(expr).toContain(`namespace="${NAMESPACE}"`);
    }
  });

  it('creates the Secret on request, generating valid keys and refusing missing ones', async () => {
    const secrets = ofKind(full, 'Secret');
    expect(secrets).toHaveLength(1);
    const data = secrets[0]!.data!;
    const decoded = (key: string) => Buffer.from(data[key]!, 'base64').toString('utf8');
    expect(Object.keys(data).sort()).toEqual(
      [
        'admin-token',
        'job-cursor-secret',
        'mongo-url',
        's3-access-key',
        's3-secret-key',
        'secrets-encryption-key',
      ].sort(),
    );
    expect(decoded('mongo-url')).toBe(SECRET_FIXTURES['mongo-url']);
    expect(decoded('admin-token').length).toBeGreaterThanOrEqual(16);
    expect(Buffer.from(decoded('secrets-encryption-key'), 'base64')).toHaveLength(32);
    // Pods restart when the Secret they read changes.
    expect(
      deploymentOf(full, 'billing').spec.template.metadata.annotations['checksum/secrets'],
    ).toMatch(/^[0-9a-f]{64}$/);

    const missing = await helm([
      'template',
      RELEASE,
      CHART_DIR,
      '--set',
      'secrets.create=true',
      '--set',
      'secrets.values.s3-access-key=a',
      '--set',
      'secrets.values.s3-secret-key=b',
    ]);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('secrets.values.mongo-url is required');
  });

  it('renders no S3 keys without them: the services then use the AWS credential chain', async () => {
    const irsa = { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/tamp' };
    const releases = {
      // The chart's Secret, given no S3 keys.
      created: await render(
        await valuesArgs({
          secrets: { create: true, values: { 'mongo-url': SECRET_FIXTURES['mongo-url'] } },
          serviceAccount: { annotations: irsa },
        }),
      ),
      // Your own Secret, told to have none.
      own: await render(
        await valuesArgs({ secrets: { env: { S3_ACCESS_KEY: null, S3_SECRET_KEY: null } } }),
      ),
    };
    for (const [release, manifests] of Object.entries(releases)) {
      for (const deployment of ofKind(manifests, 'Deployment')) {
        const name = componentOf(deployment);
        const names = envOf(deployment).map((variable) => variable.name);
        expect(names, `${release} ${name}`).not.toContain('S3_ACCESS_KEY');
        expect(names, `${release} ${name}`).not.toContain('S3_SECRET_KEY');
        if ('S3_ENDPOINT' in SCHEMAS[name]!.shape) expect(names).toContain('S3_ENDPOINT');
        const parsed = SCHEMAS[name]!.safeParse(resolvedEnv(deployment, manifests));
        expect(parsed.success, `${release} ${name}: ${JSON.stringify(parsed.error?.issues)}`).toBe(
          true,
        );
      }
    }
    expect(Object.keys(ofKind(releases.created, 'Secret')[0]!.data!)).not.toContain(
      's3-access-key',
    );
    // IRSA: the role is the ServiceAccount's, and the S3 services run under it.
    const account = ofKind(releases.created, 'ServiceAccount').find(
      (candidate) => candidate.metadata.name === RELEASE,
    );
    expect(account?.metadata.annotations).toEqual(irsa);
    expect(
      deploymentOf(releases.created, 'worker-image').spec.template.spec.serviceAccountName,
    ).toBe(RELEASE);

    // One key without the other is a mistake, refused before anything is installed.
    for (const values of [
      {
        secrets: {
          create: true,
          values: { 'mongo-url': SECRET_FIXTURES['mongo-url'], 's3-access-key': 'tamp-access' },
        },
      },
      { secrets: { env: { S3_SECRET_KEY: null } } },
    ]) {
      const refused = await helm(['template', RELEASE, CHART_DIR, ...(await valuesArgs(values))]);
      expect(refused.code, JSON.stringify(values)).not.toBe(0);
      expect(refused.stderr).toContain(
        'S3 credentials: S3_ACCESS_KEY is given but S3_SECRET_KEY is not',
      );
    }
  });

  it('renders the same Secret every time from secrets.seed, and checksums that agree with it', async () => {
    const seeded = async (extra: string[] = []) =>
      render([...(await valuesArgs(FULL_VALUES)), '--set', 'secrets.seed=a-secret-seed', ...extra]);
    const [first, second] = [await seeded(), await seeded()];
    // helm template (Argo CD) sees no cluster, so lookup finds nothing: the seed keeps it stable.
    expect(ofKind(second, 'Secret')[0]!.data).toEqual(ofKind(first, 'Secret')[0]!.data);
    const checksums = (manifests: Manifest[]) =>
      new Set(
        ofKind(manifests, 'Deployment')
          .map((deployment) => deployment.spec.template.metadata.annotations?.['checksum/secrets'])
          .filter((checksum) => checksum !== undefined),
      );
    expect(checksums(second)).toEqual(checksums(first));
    expect(checksums(first).size).toBe(1);
    const decoded = (manifests: Manifest[], key: string) =>
      Buffer.from(ofKind(manifests, 'Secret')[0]!.data![key]!, 'base64').toString('utf8');
    expect(decoded(first, 'admin-token').length).toBeGreaterThanOrEqual(16);
    expect(Buffer.from(decoded(first, 'secrets-encryption-key'), 'base64')).toHaveLength(32);
    // Another seed, or a changed credential, gives another Secret and another checksum.
    const other = await seeded(['--set', 'secrets.seed=another-seed']);
    expect(decoded(other, 'admin-token')).not.toBe(decoded(first, 'admin-token'));
    expect(checksums(other)).not.toEqual(checksums(first));

    // Without a seed the generated keys are random, but one render is consistent: every
    // Deployment's checksum is that of the one Secret the render produced.
    const unseeded = ofKind(full, 'Deployment')
      .map((deployment) => deployment.spec.template.metadata.annotations?.['checksum/secrets'])
      .filter((checksum) => checksum !== undefined);
    expect(new Set(unseeded).size).toBe(1);
  });

  it('reads the NATS URL from the Secret when told to', async () => {
    const manifests = await render(['--set', 'secrets.env.NATS_URL.key=nats-url']);
    for (const deployment of ofKind(manifests, 'Deployment')) {
      const nats = envOf(deployment).filter((variable) => variable.name === 'NATS_URL');
      expect(nats).toEqual([
        {
          name: 'NATS_URL',
          valueFrom: { secretKeyRef: { name: `${RELEASE}-secrets`, key: 'nats-url' } },
        },
      ]);
    }
  });

  it('renders a helm test hook that checks the public, dashboard, admin and ops endpoints', () => {
    const pods = ofKind(defaults, 'Pod');
    expect(pods).toHaveLength(1);
    const pod = pods[0]!;
    expect(pod.metadata.annotations['helm.sh/hook']).toBe('test');
    const check = pod.spec.containers[0];
    expect(check.securityContext.readOnlyRootFilesystem).toBe(true);
    const urls = (check.args as string[]).map((arg) => new URL(arg.slice(0, arg.lastIndexOf('='))));
    const services = new Map(ofKind(defaults, 'Service').map((s) => [s.metadata.name, s]));
    for (const url of urls) {
      // Every URL names a rendered Service and one of its ports.
      const service = services.get(url.hostname);
      expect(service, url.href).toBeDefined();
      const ports = service!.spec.ports.map((port: { port: number }) => port.port);
      // URL drops the scheme's default port (80).
      expect(ports, url.href).toContain(Number(url.port || 80));
    }
    const readyz = urls.filter((url) => url.pathname === '/readyz');
    expect(readyz.map((url) => componentOf(services.get(url.hostname)!)).sort()).toEqual(SERVICES);
    expect(check.args).toContain(
      `http://${RELEASE}-gateway-admin:8081/admin/accounts/acct_helmtest=401`,
    );
    expect(check.args).toContain(`http://${RELEASE}-gateway:80/dashboard/sign-in=200`);
  });

  it('rejects bad values through values.schema.json', async () => {
    const bad: Array<[string, string]> = [
      ['workerImage.env.IMAGE_MEMORY_BUDGET_MB=lots', 'IMAGE_MEMORY_BUDGET_MB'],
      ['webhook.env.WEBHOOK_ALLOW_HTTP=true', 'WEBHOOK_ALLOW_HTTP'],
      ['webhook.env.WEBHOOK_ALLOW_CIDRS=127.0.0.0/8', 'WEBHOOK_ALLOW_CIDRS'],
      ['gateway.env.ADMIN_TOKEN=plain-text-admin-token', 'ADMIN_TOKEN'],
      ['workerImage.resources.limits.memory=1Gi', '/workerImage/resources'],
      ['nats.namespace=Prod.EU', '/nats/namespace'],
      ['logLevel=verbose', '/logLevel'],
      ['gateway.replicas=3', 'replicas'],
      // Kubernetes wants strings: an unquoted number or boolean would fail only at install.
      ['podAnnotations.prometheus\\.io/port=9090', '/podAnnotations'],
      ['gateway.service.annotations.internal=true', '/gateway/service/annotations'],
      ['workerAudio.nodeSelector.disk=1', '/workerAudio/nodeSelector'],
      ['tolerations[0].keyy=dedicated', '/tolerations'],
      ['networkPolicy.opsFrom[0].namespaceSelectorr.x=y', '/networkPolicy/opsFrom'],
      ['webhook.allowedPrivateCidrs[0]=everything', '/webhook/allowedPrivateCidrs'],
      ['workerAudio.autoscaling.mode=scale-please', '/workerAudio/autoscaling/mode'],
      // The key is `mode`; the old `type` is refused rather than silently ignored.
      ['workerAudio.autoscaling.type=keda', '/workerAudio/autoscaling'],
      // An HPA cannot scale to zero (gateway autoscaling is an HPA when no mode is given).
      ['gateway.autoscaling.minReplicas=0', '/gateway/autoscaling/minReplicas'],
      ['operator.env.WATCH_NAMESPACE=elsewhere', 'WATCH_NAMESPACE'],
      ['operator.leaderElection.leaseDurationSeconds=1', '/operator/leaderElection'],
    ];
    for (const [assignment, mention] of bad) {
      const result = await helm(['template', RELEASE, CHART_DIR, '--set', assignment]);
      expect(result.code, assignment).not.toBe(0);
      expect(result.stderr, assignment).toContain("values don't meet the specifications");
      expect(result.stderr, assignment).toContain(mention);
    }
    // The same keys with acceptable values render.
    const good = await helm([
      'template',
      RELEASE,
      CHART_DIR,
      '--set',
      'workerImage.env.IMAGE_MEMORY_BUDGET_MB=640',
      '--set',
      'nats.namespace=prod-eu',
      '--set',
      'gateway.replicaCount=3',
    ]);
    expect(good.code, good.stderr).toBe(0);
  });

  it('renders one WorkerPool per enabled worker in operator mode, on the consumer each one reads', async () => {
    const operatorMode = (minReplicas: number) => ({
      autoscaling: { enabled: true, mode: 'operator', minReplicas, maxReplicas: 6 },
    });
    const manifests = await render(
      await valuesArgs({
        workerAudio: operatorMode(1),
        workerText: operatorMode(0),
        workerImage: { enabled: false, ...operatorMode(1) },
      }),
    );
    const pools = ofKind(manifests, 'WorkerPool');
    expect(pools.map(componentOf).sort()).toEqual(['worker-audio', 'worker-text']);
    const deployments = new Map(ofKind(manifests, 'Deployment').map((d) => [d.metadata.name, d]));
    const topology = createTopology('');
    for (const pool of pools) {
      const worker = componentOf(pool);
      const deployment = deployments.get(pool.spec.deployment);
      expect(deployment && componentOf(deployment)).toBe(worker);
      // The operator owns the replica count.
      expect(deployment!.spec.replicas).toBeUndefined();
      // The consumer the operator reads for this pipeline is the one this worker consumes.
      const pipeline = pool.spec.pipeline as Pipeline;
      expect(topology.consumers[WORKER_SERVICES[pipeline]].durableName).toBe(worker);
      expect(pool.spec).toMatchObject({ maxReplicas: 6, scaleDownStabilizationSeconds: 300 });
    }
    const needsOperator = await helm([
      'template',
      RELEASE,
      CHART_DIR,
      ...(await valuesArgs({ operator: { enabled: false }, workerAudio: operatorMode(1) })),
    ]);
    expect(needsOperator.code).not.toBe(0);
    expect(needsOperator.stderr).toContain('autoscaling.mode operator needs operator.enabled');
    const notAWorker = await helm([
      'template',
      RELEASE,
      CHART_DIR,
      ...(await valuesArgs({ gateway: operatorMode(1) })),
    ]);
    expect(notAWorker.code).not.toBe(0);
    expect(notAWorker.stderr).toContain('is for the pipeline workers only');
  });

  it('gives the operator a namespaced Role with only the calls it makes', () => {
    for (const manifests of [defaults, full]) {
      expect(ofKind(manifests, 'ClusterRole')).toEqual([]);
      expect(ofKind(manifests, 'ClusterRoleBinding')).toEqual([]);
      const [role, ...otherRoles] = ofKind(manifests, 'Role');
      expect(otherRoles).toEqual([]);
      expect(role!.metadata.name).toBe(`${RELEASE}-operator`);
      expect(role!.rules).toEqual([
        { apiGroups: ['tamp.dev'], resources: ['workerpools'], verbs: ['list', 'watch'] },
        { apiGroups: ['tamp.dev'], resources: ['workerpools/status'], verbs: ['patch'] },
        { apiGroups: ['apps'], resources: ['deployments'], verbs: ['list', 'watch'] },
        { apiGroups: ['apps'], resources: ['deployments/scale'], verbs: ['get', 'patch'] },
        { apiGroups: [''], resources: ['events'], verbs: ['create'] },
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          resourceNames: [`${RELEASE}-operator`],
          verbs: ['get', 'update'],
        },
      ]);
      const [binding] = ofKind(manifests, 'RoleBinding');
      expect(binding!.roleRef).toMatchObject({ kind: 'Role', name: role!.metadata.name });
      expect(binding!.subjects).toEqual([
        { kind: 'ServiceAccount', name: `${RELEASE}-operator`, namespace: NAMESPACE },
      ]);
      const operator = operatorSchema.parse(
        resolvedEnv(deploymentOf(manifests, 'operator'), manifests),
      );
      // The lease the Role names is the one the operator holds, in the release's namespace.
      expect(operator.LEASE_NAME).toBe(`${RELEASE}-operator`);
      expect(operator.WATCH_NAMESPACE).toBe(NAMESPACE);
    }
    const leaseOf = (manifests: Manifest[]) =>
      operatorSchema.parse(resolvedEnv(deploymentOf(manifests, 'operator'), manifests));
    expect(leaseOf(defaults)).toMatchObject({
      LEASE_DURATION_SECONDS: 15,
      LEASE_RENEW_DEADLINE_MS: 10_000,
      LEASE_RETRY_PERIOD_MS: 2_000,
    });
    expect(leaseOf(full).LEASE_DURATION_SECONDS).toBe(30);
  });

  it('ships the WorkerPool CRD exactly as k8s/crds defines it', async () => {
    const file = 'workerpools.tamp.dev.yaml';
    const [source, shipped] = await Promise.all([
      readFile(join(PROJECT_ROOT, 'k8s/crds', file), 'utf8'),
      readFile(join(CHART_DIR, 'crds', file), 'utf8'),
    ]);
    expect(shipped).toBe(source);
    const [crd] = parseManifests(source);
    const spec = crd!.spec.versions[0].schema.openAPIV3Schema.properties.spec;
    // The pipelines are proto's.
    expect(spec.properties.pipeline.enum).toEqual([...PIPELINES]);
  });

  it('names one image per service, as docker/build.sh tags them', async () => {
    const build = await readFile(join(PROJECT_ROOT, 'docker/build.sh'), 'utf8');
    for (const deployment of ofKind(defaults, 'Deployment')) {
      const name = componentOf(deployment);
      expect(container(deployment).image).toBe(`tamp-${name}:0.1.0`);
      expect(build).toMatch(new RegExp(`\\b${name}\\b`));
    }
  });

  it('renders a WorkerPool per worker by default, leaving their replica counts to the operator', async () => {
    const pools = ofKind(defaults, 'WorkerPool');
    expect(pools.map(componentOf).sort()).toEqual(WORKERS);
    const deployments = new Map(ofKind(defaults, 'Deployment').map((d) => [d.metadata.name, d]));
    const targets: Record<string, number> = {
      'worker-audio': 2,
      'worker-image': 10,
      'worker-text': 20,
    };
    for (const pool of pools) {
      const worker = componentOf(pool);
      const deployment = deployments.get(pool.spec.deployment);
      expect(deployment && componentOf(deployment)).toBe(worker);
      // A replica count in the Deployment would be put back on every upgrade, against the pool.
      expect(deployment!.spec.replicas, worker).toBeUndefined();
      expect(pool.spec).toEqual({
        deployment: `${RELEASE}-${worker}`,
        pipeline: worker.replace('worker-', ''),
        minReplicas: 1,
        maxReplicas: 10,
        targetBacklogPerReplica: targets[worker],
        scaleDownStabilizationSeconds: 300,
        pollIntervalSeconds: 15,
      });
    }
    // The operator that reconciles them runs by default, two replicas behind a Lease.
    expect(deploymentOf(defaults, 'operator').spec.replicas).toBe(2);
    // A fixed replica count instead, for one worker.
    const fixed = await render(['--set', 'workerAudio.autoscaling.enabled=false']);
    expect(ofKind(fixed, 'WorkerPool').map(componentOf).sort()).toEqual([
      'worker-image',
      'worker-text',
    ]);
    expect(deploymentOf(fixed, 'worker-audio').spec.replicas).toBe(1);
    // Without the operator, the default pools cannot work: said, not silently dropped.
    const noOperator = await helm([
      'template',
      RELEASE,
      CHART_DIR,
      '--set',
      'operator.enabled=false',
    ]);
    expect(noOperator.code).not.toBe(0);
    expect(noOperator.stderr).toContain(
      'workerAudio.autoscaling.mode operator needs operator.enabled (or set workerAudio.autoscaling.enabled=false',
    );
  });

  it('pins images by digest, per service or from image.digests', () => {
    const images = new Map(
      ofKind(extras, 'Deployment').map((d) => [componentOf(d), container(d).image as string]),
    );
    expect(images.get('gateway')).toBe(`tamp-gateway@${digest('a')}`);
    // The service's own digest wins over image.digests.
    expect(images.get('worker-text')).toBe(`tamp-worker-text@${digest('c')}`);
    expect(images.get('upload')).toBe('tamp-upload:0.1.0');
    // The helm test pod runs the gateway image, pinned the same way.
    expect(ofKind(extras, 'Pod')[0]!.spec.containers[0].image).toBe(`tamp-gateway@${digest('a')}`);
  });

  it('adds extraEnv, global then per service, as EnvVar objects after the variables the chart sets', () => {
    for (const deployment of ofKind(extras, 'Deployment')) {
      const name = componentOf(deployment);
      const env = envOf(deployment) as Array<EnvVar & { valueFrom?: Record<string, unknown> }>;
      const names = env.map((variable) => variable.name);
      expect(new Set(names).size, `${name}: duplicate variables`).toBe(names.length);
      const extra = env.slice(names.indexOf('NODE_EXTRA_CA_CERTS'));
      // The chart's own variables first, all of them of the service's schema.
      for (const variable of env.slice(0, names.indexOf('NODE_EXTRA_CA_CERTS'))) {
        expect(variable.name in SCHEMAS[name]!.shape, `${name} ${variable.name}`).toBe(true);
      }
      const gateway = name === 'gateway';
      expect(extra).toEqual([
        { name: 'NODE_EXTRA_CA_CERTS', value: '/etc/tamp/ca/ca.crt' },
        // The gateway's own HTTPS_PROXY replaces the global one, in its place.
        gateway
          ? { name: 'HTTPS_PROXY', value: 'http://proxy.internal:3128' }
          : { name: 'HTTPS_PROXY', valueFrom: { configMapKeyRef: { name: 'proxy', key: 'url' } } },
        { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
        ...(gateway
          ? [
              {
                name: 'PARTNER_TOKEN',
                valueFrom: { secretKeyRef: { name: 'partner', key: 'token', optional: true } },
              },
            ]
          : []),
      ]);
    }
  });

  it('mounts extraVolumes (a CA bundle for every service, a Secret for one) where extraVolumeMounts say', () => {
    for (const deployment of ofKind(extras, 'Deployment')) {
      const name = componentOf(deployment);
      const pod = deployment.spec.template.spec;
      const volumes = new Map(
        (pod.volumes as Array<{ name: string }>).map((volume) => [volume.name, volume]),
      );
      expect(volumes.get('ca-bundle'), name).toEqual({
        name: 'ca-bundle',
        configMap: { name: 'corporate-ca' },
      });
      expect(container(deployment).volumeMounts, name).toContainEqual({
        name: 'ca-bundle',
        mountPath: '/etc/tamp/ca',
        readOnly: true,
      });
      const proxy = { name: 'proxy-config', secret: { secretName: 'proxy-config' } };
      if (name === 'gateway') expect(volumes.get('proxy-config')).toEqual(proxy);
      else expect(volumes.has('proxy-config'), name).toBe(false);
    }
  });

  it('runs initContainers and sidecars beside a service, untouched', () => {
    const gateway = deploymentOf(extras, 'gateway').spec.template.spec;
    expect(gateway.initContainers).toEqual(EXTRA_VALUES.gateway.initContainers);
    expect(gateway.containers.map((c: { name: string }) => c.name)).toEqual(['gateway', 'proxy']);
    expect(gateway.containers[1]).toEqual(EXTRA_VALUES.gateway.sidecars[0]);
    // A native sidecar: an init container that keeps running.
    const audio = deploymentOf(extras, 'worker-audio').spec.template.spec;
    expect(audio.initContainers).toEqual([
      expect.objectContaining({ name: 'log-shipper', restartPolicy: 'Always' }),
    ]);
    expect(deploymentOf(extras, 'upload').spec.template.spec.initContainers).toBeUndefined();
  });

  it('renders extraDeploy objects through tpl, as maps or as text', () => {
    const configMaps = new Map(ofKind(extras, 'ConfigMap').map((c) => [c.metadata.name, c]));
    expect(configMaps.get(`${RELEASE}-extra`)?.data).toEqual({ bucket: 'tamp' });
    expect(configMaps.get(`${RELEASE}-from-text`)?.data).toEqual({ release: RELEASE });
  });

  it('gives every service a startup probe on its ops port, configurable or off', async () => {
    for (const deployment of ofKind(defaults, 'Deployment')) {
      const probe = container(deployment).startupProbe;
      expect(probe).toEqual({
        httpGet: { path: '/healthz', port: 'ops' },
        periodSeconds: 2,
        timeoutSeconds: 3,
        failureThreshold: 30,
      });
    }
    for (const deployment of ofKind(extras, 'Deployment')) {
      expect(container(deployment).startupProbe).toEqual({
        httpGet: { path: '/readyz', port: 'ops' },
        periodSeconds: 5,
        timeoutSeconds: 3,
        failureThreshold: 24,
      });
    }
    const off = await render(['--set', 'probes.startup.enabled=false']);
    for (const deployment of ofKind(off, 'Deployment')) {
      expect(container(deployment).startupProbe).toBeUndefined();
    }
  });

  it("sizes every container's ephemeral storage to hold its emptyDirs (/tmp, a worker's scratch)", async () => {
    for (const manifests of [defaults, full, extras]) {
      for (const deployment of ofKind(manifests, 'Deployment')) {
        const name = componentOf(deployment);
        const { requests, limits } = container(deployment).resources;
        expect(requests['ephemeral-storage'], name).toBeDefined();
        const limit = toMebibytes(limits['ephemeral-storage']);
        expect(toMebibytes(requests['ephemeral-storage']), name).toBeLessThanOrEqual(limit);
        const onDisk = (
          deployment.spec.template.spec.volumes as Array<{
            emptyDir?: { sizeLimit?: string; medium?: string };
          }>
        )
          .filter((volume) => volume.emptyDir !== undefined && volume.emptyDir.medium !== 'Memory')
          .reduce((sum, volume) => sum + toMebibytes(volume.emptyDir!.sizeLimit!), 0);
        // Else the kubelet evicts a pod whose scratch fills within its own sizeLimit.
        expect(limit, name).toBeGreaterThanOrEqual(onDisk);
      }
    }
    const workerScratch = (manifests: Manifest[], worker: string) =>
      (deploymentOf(manifests, worker).spec.template.spec.volumes as Array<{ name: string }>).find(
        (volume) => volume.name === 'scratch',
      );
    expect(workerScratch(defaults, 'worker-audio')).toEqual({
      name: 'scratch',
      emptyDir: { sizeLimit: '4Gi' },
    });
    const tooSmall = await helm([
      'template',
      RELEASE,
      CHART_DIR,
      '--set',
      'workerAudio.scratch.sizeLimit=8Gi',
    ]);
    expect(tooSmall.code).not.toBe(0);
    expect(tooSmall.stderr).toContain(
      "workerAudio.resources.limits.ephemeral-storage (4352Mi) must hold the pod's emptyDirs, tmpSizeLimit (64Mi) + workerAudio.scratch.sizeLimit (8Gi) = 8256Mi",
    );
    const badQuantity = await helm(['template', RELEASE, CHART_DIR, '--set', 'tmpSizeLimit=lots']);
    expect(badQuantity.code).not.toBe(0);
    expect(badQuantity.stderr).toContain('tmpSizeLimit: "lots" is not a storage quantity');
    // A scratch in memory (tmpfs) counts against memory, not the node's disk.
    const inMemory = await render([
      '--set',
      'workerAudio.scratch.medium=Memory',
      '--set',
      'workerAudio.resources.limits.ephemeral-storage=256Mi',
    ]);
    expect(workerScratch(inMemory, 'worker-audio')).toEqual({
      name: 'scratch',
      emptyDir: { sizeLimit: '4Gi', medium: 'Memory' },
    });
  });

  it('keeps replicas of a service apart with a pod anti-affinity on the node, soft by default', () => {
    const antiAffinity = (manifests: Manifest[], service: string) =>
      deploymentOf(manifests, service).spec.template.spec.affinity?.podAntiAffinity;
    for (const service of SERVICES) {
      const term = {
        topologyKey: 'kubernetes.io/hostname',
        labelSelector: {
          matchLabels: {
            'app.kubernetes.io/name': 'tamp',
            'app.kubernetes.io/instance': RELEASE,
            'app.kubernetes.io/component': service,
          },
        },
      };
      expect(antiAffinity(defaults, service)).toEqual({
        preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 100, podAffinityTerm: term }],
      });
      expect(antiAffinity(extras, service)).toEqual({
        requiredDuringSchedulingIgnoredDuringExecution: [term],
      });
      // The selector selects the service's own pods.
      const labels = deploymentOf(defaults, service).spec.template.metadata.labels;
      expect(labels).toMatchObject(term.labelSelector.matchLabels);
    }
  });

  it('applies the typed security contexts, and still reads the former securityContext key', async () => {
    for (const deployment of ofKind(extras, 'Deployment')) {
      const pod = deployment.spec.template.spec;
      expect(pod.securityContext).toEqual(EXTRA_VALUES.podSecurityContext);
      expect(container(deployment).securityContext).toEqual(EXTRA_VALUES.containerSecurityContext);
    }
    const former = await render(['--set', 'securityContext.readOnlyRootFilesystem=false']);
    for (const deployment of ofKind(former, 'Deployment')) {
      expect(container(deployment).securityContext).toEqual({
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: false,
        capabilities: { drop: ['ALL'] },
      });
    }
  });

  it('names the values path at fault when a value, an env variable above all, is refused', async () => {
    const bad: Array<[string[], string[]]> = [
      // The env names: refused at the variable's own path (propertyNames errors were reported
      // by Helm at an unrelated path, e.g. /workerImage/scratch).
      [['--set', 'gateway.env.ADMIN_TOKEN=x'], ['/gateway/env/ADMIN_TOKEN']],
      [
        ['--set', 'workerImage.env.MONGO_URL=x'],
        ['/workerImage/env', '/workerImage/env/MONGO_URL'],
      ],
      [['--set', 'upload.env.bad_name=x'], ['/upload/env']],
      [
        ['--set', 'extraEnv[0].name=MONGO_URL', '--set', 'extraEnv[0].value=x'],
        ['/extraEnv/0', '/extraEnv/0/name'],
      ],
      // value and valueFrom together
      [
        [
          '--set',
          'gateway.extraEnv[0].name=A',
          '--set',
          'gateway.extraEnv[0].value=x',
          '--set',
          'gateway.extraEnv[0].valueFrom.secretKeyRef.name=s',
          '--set',
          'gateway.extraEnv[0].valueFrom.secretKeyRef.key=k',
        ],
        ['/gateway/extraEnv/0'],
      ],
      [['--set', 'image.digests.gateway=latest'], ['/image/digests/gateway']],
      [['--set', `image.digests.gatewy=${digest('a')}`], ['/image/digests']],
      [['--set', 'upload.image.digest=sha256:abc'], ['/upload/image/digest']],
      [['--set', 'extraVolumes[0].name=ca'], ['/extraVolumes/0']],
      [
        ['--set', 'extraVolumeMounts[0].name=ca', '--set', 'extraVolumeMounts[0].mountpath=/ca'],
        ['/extraVolumeMounts/0'],
      ],
      [['--set', 'job.sidecars[0].name=proxy'], ['/job/sidecars/0']],
      [
        [
          '--set',
          'job.sidecars[0].name=proxy',
          '--set',
          'job.sidecars[0].image=p:1',
          '--set',
          'job.sidecars[0].restartPolicy=Always',
        ],
        ['/job/sidecars/0'],
      ],
      [['--set', 'extraDeploy[0].kind=ConfigMap'], ['/extraDeploy/0']],
      [['--set', 'probes.startup.path=/metrics'], ['/probes/startup/path']],
      [['--set', 'podAntiAffinityPreset=strict'], ['/podAntiAffinityPreset']],
      [['--set', 'podSecurityContext.runAsUserr=1'], ['/podSecurityContext']],
      [
        ['--set', 'podSecurityContext.seccompProfile.type=Localhost'],
        ['/podSecurityContext/seccompProfile'],
      ],
      [
        ['--set', 'containerSecurityContext.capabilities.drop[0]=all'],
        ['/containerSecurityContext/capabilities/drop/0'],
      ],
      [
        ['--set-string', 'containerSecurityContext.readOnlyRootFilesystem=yes'],
        ['/containerSecurityContext/readOnlyRootFilesystem'],
      ],
      [['--set', 'securityContext.privilegd=true'], ['/securityContext']],
      [
        ['--set', 'networkPolicy.monitoring.enabled=sometimes'],
        ['/networkPolicy/monitoring/enabled'],
      ],
      [
        ['--set', 'networkPolicy.monitoring.podSelector.matchLabelz.a=b'],
        ['/networkPolicy/monitoring/podSelector'],
      ],
    ];
    // Each case is a helm process of its own: run them side by side.
    const badResults = await Promise.all(
      bad.map(([args]) => helm(['template', RELEASE, CHART_DIR, ...args])),
    );
    for (const [index, [args, paths]] of bad.entries()) {
      const result = badResults[index]!;
      const what = args.join(' ');
      expect(result.code, what).not.toBe(0);
      expect(result.stderr, what).toContain("values don't meet the specifications");
      // Every path the error names is the value's (or one above it), none elsewhere.
      const named = [...result.stderr.matchAll(/at '([^']*)'/g)].map((match) => match[1]);
      expect([...new Set(named.filter((path) => path !== ''))], what).toEqual(paths);
    }
    // Refused by the chart itself (not expressible in the schema), naming the values path too.
    const refused: Array<[string[], string]> = [
      [
        [
          '--set',
          'gateway.env.AUTH_CACHE_TTL_MS=1',
          '--set',
          'gateway.extraEnv[0].name=AUTH_CACHE_TTL_MS',
          '--set-string',
          'gateway.extraEnv[0].value=2',
        ],
        'gateway.extraEnv[0]: AUTH_CACHE_TTL_MS is set by the chart for gateway',
      ],
      [
        ['--set', 'extraVolumes[0].name=tmp', '--set', 'extraVolumes[0].emptyDir.medium=Memory'],
        'extraVolumes[0]: the volume name tmp is taken (by the chart)',
      ],
      [
        [
          '--set',
          'webhook.extraVolumeMounts[0].name=ca',
          '--set',
          'webhook.extraVolumeMounts[0].mountPath=/ca',
        ],
        'webhook.extraVolumeMounts[0]: no volume named ca in extraVolumes or webhook.extraVolumes',
      ],
      [
        [
          '--set',
          'extraVolumes[0].name=ca',
          '--set',
          'extraVolumes[0].configMap.name=ca',
          '--set',
          'extraVolumeMounts[0].name=ca',
          '--set',
          'extraVolumeMounts[0].mountPath=/tmp',
        ],
        "extraVolumeMounts[0]: /tmp is already mounted (the chart's tmp volume)",
      ],
      [
        ['--set', 'billing.sidecars[0].name=billing', '--set', 'billing.sidecars[0].image=x:1'],
        "billing.sidecars[0]: the container name billing is the service's own",
      ],
    ];
    const refusedResults = await Promise.all(
      refused.map(([args]) => helm(['template', RELEASE, CHART_DIR, ...args])),
    );
    for (const [index, [args, message]] of refused.entries()) {
      const result = refusedResults[index]!;
      expect(result.code, args.join(' ')).not.toBe(0);
      expect(result.stderr, args.join(' ')).toContain(message);
    }
  });

  it('lets the monitoring stack scrape every ops port from its namespace, and nothing else', async () => {
    const prometheus: Peer = {
      namespace: { 'kubernetes.io/metadata.name': 'monitoring' },
      pod: { 'app.kubernetes.io/name': 'prometheus', 'operator.prometheus.io/name': 'k8s' },
    };
    const stranger: Peer = {
      namespace: { 'kubernetes.io/metadata.name': 'monitoring' },
      pod: { app: 'curl' },
    };
    const elsewhere: Peer = {
      namespace: { 'kubernetes.io/metadata.name': 'tenant-a' },
      pod: { 'app.kubernetes.io/name': 'prometheus' },
    };
    const scrapes = (manifests: Manifest[], peer: Peer, port = 'ops') =>
      ofKind(manifests, 'NetworkPolicy')
        .filter((policy) => componentOf(policy) !== 'helm-test')
        .map((policy) => [componentOf(policy), admits(policy, peer, port)]);
    const all = (allowed: boolean) => SERVICES.map((service) => [service, allowed]);
    // Without a ServiceMonitor nothing outside the namespace reaches the ops ports.
    expect(scrapes(defaults, prometheus)).toEqual(all(false));
    // With one (enabled: auto), Prometheus may: a default install with monitoring is not all
    // "down" because its scrapes are dropped.
    const monitored = await render(['--set', 'metrics.serviceMonitor.enabled=true']);
    expect(scrapes(monitored, prometheus)).toEqual(all(true));
    expect(scrapes(monitored, stranger)).toEqual(all(false));
    const gatewayPolicy = ofKind(monitored, 'NetworkPolicy').find(
      (policy) => componentOf(policy) === 'gateway',
    )!;
    expect(admits(gatewayPolicy, prometheus, 'admin')).toBe(false);
    const rule = (
      gatewayPolicy.spec.ingress as Array<{ ports: Array<{ port: string }>; from: unknown[] }>
    ).find((candidate) => candidate.ports.some((port) => port.port === 'ops'))!;
    expect(rule.from).toContainEqual({
      namespaceSelector: {},
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
    });
    // Turned off, or narrowed to the monitoring namespace.
    const off = await render([
      '--set',
      'metrics.serviceMonitor.enabled=true',
      '--set',
      'networkPolicy.monitoring.enabled=false',
    ]);
    expect(scrapes(off, prometheus)).toEqual(all(false));
    expect(scrapes(extras, prometheus)).toEqual(all(true));
    expect(scrapes(extras, elsewhere)).toEqual(all(false));
  });

  describe('on a real API server', () => {
    const cluster = useControlPlane();
    let kubeconfig: string;

    beforeAll(async () => {
      kubeconfig = cluster.current.kubeconfigPath;
      // The kinds the chart renders beyond Kubernetes' own: its WorkerPool CRD and the
      // Prometheus Operator's (k8s/crds). KEDA's ScaledObject has no CRD here.
      await cluster.kubectl([
        'apply',
        '--server-side',
        '-f',
        join(CHART_DIR, 'crds'),
        '-f',
        join(PROJECT_ROOT, 'k8s/crds'),
      ]);
      await cluster.kubectl([
        'wait',
        '--for=condition=Established',
        'crd',
        '--all',
        '--timeout=60s',
      ]);
      await cluster.kubectl(['create', 'namespace', NAMESPACE]);
    }, 300_000);

    it('accepts every object of the default, full and extra values (server-side dry run, strict fields)', async () => {
      for (const [what, manifests] of [
        ['defaults', defaults],
        ['full', full],
        ['extras', extras],
      ] as const) {
        const checked = manifests.filter((manifest) => manifest.kind !== 'ScaledObject');
        const result = await serverDryRun(kubeconfig, checked);
        expect(result.code, `${what}: ${result.stderr}`).toBe(0);
        // Warnings too (an environment variable defined twice, a deprecated field).
        expect(result.stderr, what).toBe('');
        expect(result.stdout.trim().split('\n'), what).toHaveLength(checked.length);
      }
      // And refuses what is wrong, so the check above means something.
      const broken = structuredClone(deploymentOf(extras, 'gateway'));
      broken.spec.template.spec.containers[1].volumeMount = [];
      const refused = await serverDryRun(kubeconfig, [broken]);
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain(
        'unknown field "spec.template.spec.containers[1].volumeMount"',
      );
    });

    const notes = async (args: string[] = []) => {
      const result = await helm(
        ['install', RELEASE, CHART_DIR, '--namespace', NAMESPACE, '--dry-run=server', ...args],
        { kubeconfig },
      );
      expect(result.code, result.stderr).toBe(0);
      const at = result.stdout.indexOf('\nNOTES:\n');
      expect(at).toBeGreaterThan(0);
      return result.stdout.slice(at + '\nNOTES:\n'.length);
    };

    it('says after install how to reach the API and its docs, and how to get an API key', async () => {
      const text = await notes();
      expect(text).toContain(
        `kubectl -n ${NAMESPACE} port-forward service/${RELEASE}-gateway 8080:80`,
      );
      expect(text).toContain('API reference: http://127.0.0.1:8080/docs');
      expect(text).toContain(
        `kubectl -n ${NAMESPACE} port-forward service/${RELEASE}-gateway-admin 8081:8081`,
      );
      expect(text).toContain(
        `export ADMIN_TOKEN=$(kubectl -n ${NAMESPACE} get secret ${RELEASE}-secrets -o jsonpath='{.data.admin-token}' | base64 -d)`,
      );
      expect(text).toContain('curl -X POST http://127.0.0.1:8081/admin/accounts');
      expect(text).toContain(
        'TAMP_ADMIN_URL=http://127.0.0.1:8081 npm run --silent admin -- account create --plan free --json',
      );
      expect(text).toContain(`kubectl -n ${NAMESPACE} get workerpools`);
      expect(text).toContain(`helm test ${RELEASE} -n ${NAMESPACE}`);
      // A default install makes no insecure choice.
      expect(text).not.toContain('WARNINGS');
      // With an Ingress and TLS, the public address.
      const ingress = await notes(await valuesArgs({ ingress: FULL_VALUES.ingress }));
      expect(ingress).toContain('API reference: https://api.example.com/docs');
    });

    it('says after install when S3 credentials come from the AWS credential chain', async () => {
      expect(await notes()).not.toContain('AWS credential chain');
      const text = await notes(
        await valuesArgs({ secrets: { env: { S3_ACCESS_KEY: null, S3_SECRET_KEY: null } } }),
      );
      expect(text).toContain(
        'S3       http://minio:9000, bucket tamp, credentials from the AWS credential chain',
      );
      // The Secret to create needs no S3 keys.
      expect(text).toContain('--from-literal=mongo-url=');
      expect(text).not.toContain('s3-access-key');
    });

    it('warns after install about insecure choices', async () => {
      const text = await notes(
        await valuesArgs({
          nats: { url: 'nats://tamp:secret@nats:4222' },
          secrets: {
            create: true,
            env: { SECRETS_ENCRYPTION_KEY: null },
            values: {
              'mongo-url': 'mongodb://tamp:password@mongodb:27017/',
              's3-access-key': 'minioadmin',
              's3-secret-key': 'minioadmin',
            },
          },
          webhook: { allowHttp: true },
          networkPolicy: { enabled: false },
          ingress: { enabled: true },
          s3: { publicEndpoint: 'http://s3.example.com' },
          containerSecurityContext: { readOnlyRootFilesystem: false },
        }),
      );
      const warnings = text.slice(text.indexOf('WARNINGS'));
      for (const warning of [
        'secrets.values.s3-access-key is a well-known default credential',
        'secrets.values.s3-secret-key is a well-known default credential',
        'secrets.values.mongo-url carries a default password',
        'secrets.values holds credentials in the Helm values',
        'nats.url carries credentials',
        'secrets.env.SECRETS_ENCRYPTION_KEY is null',
        'webhook.allowHttp / webhook.allowedPrivateCidrs',
        'networkPolicy.enabled is false',
        'The Ingress has no tls',
        's3.publicEndpoint is plain http',
        'The security contexts were loosened',
      ]) {
        expect(warnings).toContain(warning);
      }
    });
  });
});

/** The services' TypeScript sources (tests excluded), concatenated. */
async function sourceText(dir: string): Promise<string> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files = entries.filter(
    (entry) =>
      entry.isFile() &&
      entry.name.endsWith('.ts') &&
      !entry.name.endsWith('.test.ts') &&
      !entry.parentPath.includes('node_modules'),
  );
  const texts = await Promise.all(
    files.map((file) => readFile(join(file.parentPath, file.name), 'utf8')),
  );
  return texts.join('\n');
}
