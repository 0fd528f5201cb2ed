import { randomBytes } from 'node:crypto';
import {
  ApiException,
  AppsV1Api,
  type ConfigurationOptions,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type Informer,
  KubeConfig,
  type KubernetesListObject,
  makeInformer,
  type ObjectCache,
  Observable,
  PatchStrategy,
  type RequestContext,
  setHeaderOptions,
  type V1Deployment,
  type V1LabelSelector,
  type V1Lease,
} from '@kubernetes/client-node';
import type { LeaseRecord } from '../domain/lease';
import type { DeploymentObservation, PoolEvent } from '../domain/plan';
import { WORKER_POOL_API, type WorkerPool, type WorkerPoolStatus } from '../domain/worker-pool';

/**
 * The kubeconfig in `path` (KUBECONFIG) or, without one, the pod's service account when the
 * process runs in a cluster. Never ~/.kube/config: an operator started on a developer's machine
 * must not scale whatever cluster that file points at.
 */
export function loadKubeConfig(
  path: string | undefined,
  inCluster = false,
): KubeConfig | undefined {
  const config = new KubeConfig();
  if (path !== undefined) {
    config.loadFromFile(path);
    return config;
  }
  if (inCluster) {
    config.loadFromCluster();
    return config;
  }
  return undefined;
}

/** The namespace of the kubeconfig's context (in a pod: the pod's own namespace). */
export function contextNamespace(config: KubeConfig): string {
  return config.getContextObject(config.getCurrentContext())?.namespace ?? 'default';
}

export type CachedInformer<T extends { metadata?: object }> = Informer<T & { metadata: object }> &
  ObjectCache<T & { metadata: object }>;

export interface LeaseStore {
  read(): Promise<{ record: LeaseRecord; resourceVersion: string } | undefined>;
  create(record: LeaseRecord): Promise<void>;
  /** Fails with a conflict when the lease changed since `resourceVersion` was read. */
  replace(record: LeaseRecord, resourceVersion: string): Promise<void>;
}

/** Every call the operator makes to the Kubernetes API, each bounded by `timeoutMs`. */
export class KubernetesApi {
  private readonly apps: AppsV1Api;
  private readonly core: CoreV1Api;
  private readonly custom: CustomObjectsApi;
  private readonly coordination: CoordinationV1Api;

  constructor(
    private readonly config: KubeConfig,
    readonly namespace: string,
    private readonly timeoutMs: number,
  ) {
    this.apps = config.makeApiClient(AppsV1Api);
    this.core = config.makeApiClient(CoreV1Api);
    this.custom = config.makeApiClient(CustomObjectsApi);
    this.coordination = config.makeApiClient(CoordinationV1Api);
  }

  /** List once, then watch: the cache the reconciler reads instead of asking the API server. */
  workerPoolInformer(): CachedInformer<WorkerPool> {
    const { group, version, plural } = WORKER_POOL_API;
    return makeInformer(
      this.config,
      `/apis/${group}/${version}/namespaces/${this.namespace}/${plural}`,
      async () =>
        (await this.custom.listNamespacedCustomObject(
          { group, version, plural, namespace: this.namespace },
          this.bounded(),
        )) as KubernetesListObject<WorkerPool>,
    );
  }

  deploymentInformer(): CachedInformer<V1Deployment> {
    return makeInformer(this.config, `/apis/apps/v1/namespaces/${this.namespace}/deployments`, () =>
      this.apps.listNamespacedDeployment({ namespace: this.namespace }, this.bounded()),
    ) as CachedInformer<V1Deployment>;
  }

  /**
   * A merge patch of the status subresource: every field is written, absent ones as null so
   * the server drops them (a backlog that could not be read is not shown as a stale number).
   */
  async patchWorkerPoolStatus(name: string, status: WorkerPoolStatus): Promise<void> {
    const { group, version, plural } = WORKER_POOL_API;
    await this.custom.patchNamespacedCustomObjectStatus(
      {
        group,
        version,
        plural,
        namespace: this.namespace,
        name,
        body: { status: nullFor(status) },
      },
      this.bounded(setHeaderOptions('Content-Type', PatchStrategy.MergePatch)),
    );
  }

  /** The Deployment's replica count read now, not from the cache; undefined when it is gone. */
  async readDeploymentReplicas(name: string): Promise<number | undefined> {
    try {
      const scale = await this.apps.readNamespacedDeploymentScale(
        { name, namespace: this.namespace },
        this.bounded(),
      );
      return scale.spec?.replicas ?? 0;
    } catch (error) {
      if (error instanceof ApiException && error.code === 404) return undefined;
      throw error;
    }
  }

  /** Through the scale subresource: the only part of the Deployment the operator may change. */
  async scaleDeployment(name: string, replicas: number): Promise<void> {
    await this.apps.patchNamespacedDeploymentScale(
      { name, namespace: this.namespace, body: { spec: { replicas } } },
      this.bounded(setHeaderOptions('Content-Type', PatchStrategy.MergePatch)),
    );
  }

  async recordEvent(pool: WorkerPool, event: PoolEvent, reporter: string): Promise<void> {
    const now = new Date();
    await this.core.createNamespacedEvent(
      {
        namespace: this.namespace,
        body: {
          metadata: {
            name: `${pool.metadata.name}.${randomBytes(8).toString('hex')}`,
            namespace: this.namespace,
          },
          involvedObject: {
            apiVersion: `${WORKER_POOL_API.group}/${WORKER_POOL_API.version}`,
            kind: WORKER_POOL_API.kind,
            name: pool.metadata.name,
            namespace: this.namespace,
            uid: pool.metadata.uid,
            resourceVersion: pool.metadata.resourceVersion,
          },
          type: event.type,
          reason: event.reason,
          action: event.action,
          message: event.note,
          source: { component: 'tamp-operator' },
          reportingComponent: 'tamp.dev/operator',
          reportingInstance: reporter,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      },
      this.bounded(),
    );
  }

  leaseStore(name: string): LeaseStore {
    const namespace = this.namespace;
    return {
      read: async () => {
        try {
          const lease = await this.coordination.readNamespacedLease(
            { name, namespace },
            this.bounded(),
          );
          return {
            record: leaseRecordOf(lease),
            resourceVersion: lease.metadata!.resourceVersion!,
          };
        } catch (error) {
          if (error instanceof ApiException && error.code === 404) return undefined;
          throw error;
        }
      },
      create: async (record) => {
        await this.coordination.createNamespacedLease(
          { namespace, body: { metadata: { name, namespace }, spec: leaseSpecOf(record) } },
          this.bounded(),
        );
      },
      replace: async (record, resourceVersion) => {
        await this.coordination.replaceNamespacedLease(
          {
            name,
            namespace,
            body: { metadata: { name, namespace, resourceVersion }, spec: leaseSpecOf(record) },
          },
          this.bounded(),
        );
      },
    };
  }

  /** Aborts a request that outlives the timeout: a hung API server never hangs the loop. */
  private bounded(options: ConfigurationOptions = {}): ConfigurationOptions {
    const timeoutMs = this.timeoutMs;
    return {
      ...options,
      middleware: [
        ...(options.middleware ?? []),
        {
          pre: (context: RequestContext) => {
            context.setSignal(AbortSignal.timeout(timeoutMs));
            return new Observable(Promise.resolve(context));
          },
          post: (response) => new Observable(Promise.resolve(response)),
        },
      ],
      middlewareMergeStrategy: 'append',
    };
  }
}

/** What the plan needs of a Deployment. */
export function observeDeployment(deployment: V1Deployment): DeploymentObservation {
  return {
    replicas: deployment.spec?.replicas ?? 1,
    podReplicas: deployment.status?.replicas ?? 0,
    selector: formatSelector(deployment.spec?.selector),
  };
}

/** A label selector in the string form the scale subresource reports (`a=b,c in (d,e)`). */
export function formatSelector(selector: V1LabelSelector | undefined): string {
  const labels = Object.entries(selector?.matchLabels ?? {}).map(
    ([key, value]) => `${key}=${value}`,
  );
  const expressions = (selector?.matchExpressions ?? []).map((expression) => {
    const values = (expression.values ?? []).join(',');
    switch (expression.operator) {
      case 'In':
        return `${expression.key} in (${values})`;
      case 'NotIn':
        return `${expression.key} notin (${values})`;
      case 'Exists':
        return expression.key;
      default:
        return `!${expression.key}`;
    }
  });
  return [...labels, ...expressions].join(',');
}

/** True for errors that mean the object changed underneath us: read again and retry. */
export function isConflict(error: unknown): boolean {
  return error instanceof ApiException && (error.code === 409 || error.code === 422);
}

function nullFor(status: WorkerPoolStatus): Record<string, unknown> {
  const keys: Array<keyof Required<WorkerPoolStatus>> = [
    'observedGeneration',
    'backlog',
    'replicas',
    'desiredReplicas',
    'lastScaleTime',
    'selector',
    'recommendations',
    'conditions',
  ];
  return Object.fromEntries(keys.map((key) => [key, status[key] ?? null]));
}

function leaseRecordOf(lease: V1Lease): LeaseRecord {
  const spec = lease.spec ?? {};
  return {
    holderIdentity: spec.holderIdentity ?? '',
    leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
    acquireTime: toIso(spec.acquireTime),
    renewTime: toIso(spec.renewTime),
    leaseTransitions: spec.leaseTransitions ?? 0,
  };
}

function leaseSpecOf(record: LeaseRecord): V1Lease['spec'] {
  return {
    holderIdentity: record.holderIdentity,
    leaseDurationSeconds: record.leaseDurationSeconds,
    acquireTime: microTime(record.acquireTime),
    renewTime: microTime(record.renewTime),
    leaseTransitions: record.leaseTransitions,
  };
}

function toIso(time: Date | string | undefined): string {
  if (time === undefined) return new Date(0).toISOString();
  return typeof time === 'string' ? time : time.toISOString();
}

/**
 * Lease times are MicroTime: the API server wants six fractional digits, and the client passes
 * a MicroTime through as given (a Date would be written with three).
 */
function microTime(iso: string): Date {
  return iso.replace(/\.(\d{3})Z$/, '.$1000Z') as unknown as Date;
}
