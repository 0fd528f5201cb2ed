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

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}

function container(deployment: Manifest) {
  const containers = deployment.spec.template.spec.containers;
  expect(containers, deployment.metadata.name).toHaveLength(1);
  return containers[0];
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
  let fullArgs: string[];

  beforeAll(async () => {
    await helmBinary();
    fullArgs = await valuesArgs(FULL_VALUES);
    [defaults, full] = await Promise.all([render(), render(fullArgs)]);
  }, 600_000);

  it('passes helm lint --strict with the default and the full values', async () => {
    for (const args of [[], fullArgs]) {
      const result = await helm(['lint', '--strict', CHART_DIR, ...args]);
      expect(result.code, result.stdout + result.stderr).toBe(0);
      expect(result.stdout).toContain('0 chart(s) failed');
    }
  });

  it('renders a Deployment, Service, PodDisruptionBudget and NetworkPolicy per service', () => {
    for (const manifests of [defaults, full]) {
      for (const kind of ['Deployment', 'PodDisruptionBudget', 'NetworkPolicy']) {
        expect(ofKind(manifests, kind).map(componentOf).sort(), kind).toEqual(SERVICES);
      }
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
        const env = resolvedEnv(deployment, manifests);
        // The named port the probes use is the port the service's ops server listens on.
        expect(portNumber(deployment, 'ops'), name).toBe(Number(env.OPS_PORT ?? 9090));
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
    // Without autoscaling the Deployments keep their replica counts.
    for (const deployment of ofKind(defaults, 'Deployment')) {
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
      'secrets.values.mongo-url=mongodb://m:27017',
    ]);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('secrets.values.s3-access-key is required');
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
