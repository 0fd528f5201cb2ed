import { randomBytes } from 'node:crypto';
import { connectNats, type NatsConnection, ObjectStore, provisionTopology, Rpc } from '@tamp/kit';
import {
  type AccountLimits,
  billingEndpoints,
  type CreateJobRequest,
  createTopology,
  jobEndpoints,
  newId,
  type PublicJob,
  ServiceError,
  type TargetPolicy,
  type Topology,
  uploadEndpoints,
  webhookEndpoints,
} from '@tamp/proto';
import { type Logger, pino } from 'pino';
import { isolatedInfrastructure } from '../../../test/support/infrastructure';
import type { HttpLimits } from '../src/api/http-server';
import { configSchema, type GatewaySettings, gatewaySettingsFrom } from '../src/config';
import { type Gateway, startGatewayService } from '../src/service';

/**
 * Real NATS and MinIO; billing, upload, job and webhook are small NATS responders (test doubles
 * of peer services) that record what the gateway sent them.
 */
export class Harness {
  readonly infrastructure = isolatedInfrastructure();
  /** What the gateway's schema gives this file's environment; `start` overrides some. */
  readonly defaults: GatewaySettings = gatewaySettingsFrom(
    configSchema.parse(this.infrastructure.serviceEnv),
  );
  topology!: Topology;
  peers!: NatsConnection;
  objectStore!: ObjectStore;
  readonly gateways: Gateway[] = [];
  private readonly connections: NatsConnection[] = [];

  readonly accounts = new Map<string, AccountLimits & { keyId: string }>();
  readonly revoked = new Set<string>();
  authenticateCalls = 0;
  readonly createJobRequests: CreateJobRequest[] = [];
  readonly jobs = new Map<string, PublicJob>();
  readonly adminCalls: { endpoint: string; request: unknown }[] = [];
  /** An account id the billing double does not know. */
  static readonly UNKNOWN_ACCOUNT = 'acct_unknown';

  /** The gateways' and the doubles' logger: silent unless a test reads what is logged. */
  constructor(readonly logger: Logger = pino({ level: 'silent' })) {}

  async start(
    options: {
      gateways?: number;
      authCacheTtlMs?: number;
      httpLimits?: Partial<HttpLimits>;
      createJobBudgetMs?: number;
      webhookTargets?: TargetPolicy;
      publicUrl?: string;
      /** False: no job service serves creations (every one reaches nobody). */
      jobService?: boolean;
    } = {},
  ): Promise<this> {
    this.topology = createTopology(this.infrastructure.namespace);
    this.peers = await connectNats({
      url: this.infrastructure.natsUrl,
      name: 'peers',
      logger: this.logger,
    });
    this.connections.push(this.peers);
    // As every Tamp process does on start: the gateway counts requests in a stream of it.
    await provisionTopology(this.peers, this.topology, 1);
    const { s3 } = this.infrastructure;
    this.objectStore = new ObjectStore({ ...s3, bucket: this.infrastructure.bucket });
    await this.objectStore.provision([]);
    this.servePeers(new Rpc(this.peers, this.topology, this.logger), options.jobService ?? true);
    await this.peers.flush();
    for (let index = 0; index < (options.gateways ?? 1); index++) {
      const nats = await connectNats({
        url: this.infrastructure.natsUrl,
        name: `gateway-${index}`,
        logger: this.logger,
      });
      this.connections.push(nats);
      this.gateways.push(
        await startGatewayService({
          logger: this.logger,
          nats,
          topology: this.topology,
          rpc: new Rpc(nats, this.topology, this.logger),
          objectStore: this.objectStore,
          settings: {
            ...this.defaults,
            adminToken: 'test-admin-token-0123456789',
            authCacheTtlMs: options.authCacheTtlMs ?? 300,
            httpLimits: { ...this.defaults.httpLimits, ...options.httpLimits },
            createJobBudgetMs: options.createJobBudgetMs ?? this.defaults.createJobBudgetMs,
            webhookTargets: options.webhookTargets ?? this.defaults.webhookTargets,
            publicUrl: options.publicUrl ?? this.defaults.publicUrl,
          },
        }),
      );
    }
    return this;
  }

  async stop(): Promise<void> {
    for (const gateway of this.gateways) await gateway.stop();
    for (const connection of this.connections) await connection.close();
  }

  get app() {
    return this.gateways[0]!.publicApp;
  }

  /** A new account with its own key (and so its own rate-limit counter). */
  account(overrides: Partial<AccountLimits> = {}): { apiKey: string; accountId: string } {
    const apiKey = `sk_live_${randomBytes(24).toString('hex')}`;
    const accountId = newId('account');
    this.accounts.set(apiKey, {
      accountId,
      plan: 'free',
      maxUploadBytes: 25 * 1024 * 1024,
      rateLimitPerMinute: 10_000,
      keyId: newId('apiKey'),
      ...overrides,
    });
    return { apiKey, accountId };
  }

  private serveCreations(rpc: Rpc): void {
    rpc.serve(jobEndpoints.createJob, async (request) => {
      this.createJobRequests.push(request);
      // A job service that died or stalled mid-creation: no answer at all.
      if (request.idempotencyKey === 'silent') return new Promise<never>(() => undefined);
      if (request.idempotencyKey === 'reused') {
        throw new ServiceError('IDEMPOTENCY_KEY_REUSED', 'key reused');
      }
      if (request.pipeline === 'text' && request.source.kind === 'text' && !request.webhookUrl) {
        const job: PublicJob = {
          id: request.jobId,
          status: 'completed',
          result: {
            outputText: request.source.text.trim(),
            metrics: {
              inputSize: 1,
              outputSize: 1,
              compressionRatio: 1,
              operationsApplied: request.operations.map((operation) => operation.type),
              processingMs: 1,
            },
          },
        };
        this.jobs.set(request.jobId, job);
        return { httpStatus: 200 as const, job };
      }
      const job: PublicJob = { id: request.jobId, status: 'created' };
      this.jobs.set(request.jobId, job);
      return { httpStatus: 202 as const, job };
    });
  }

  private servePeers(rpc: Rpc, serveCreations: boolean): void {
    rpc.serve(billingEndpoints.authenticate, async ({ apiKey }) => {
      this.authenticateCalls++;
      const account = this.accounts.get(apiKey);
      if (account === undefined || this.revoked.has(apiKey)) {
        throw new ServiceError('UNAUTHORIZED', 'Unknown or revoked API key');
      }
      return account;
    });
    rpc.serve(uploadEndpoints.createUpload, async (request) => {
      if (request.size > request.maxUploadBytes) {
        throw new ServiceError('FILE_TOO_LARGE', 'too large');
      }
      return {
        id: newId('upload'),
        uploadUrl: 'http://127.0.0.1:9/put',
        contentType: 'image/png',
        uploadUrlExpiresIn: 900,
        expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
      };
    });
    if (serveCreations) this.serveCreations(rpc);
    rpc.serve(jobEndpoints.getJob, async ({ jobId }) => {
      const job = this.jobs.get(jobId);
      if (job === undefined) throw new ServiceError('JOB_NOT_FOUND', 'No such job');
      return job;
    });
    rpc.serve(jobEndpoints.listJobs, async (request) => {
      this.adminCalls.push({ endpoint: 'listJobs', request });
      return { items: [], nextCursor: null };
    });
    // getUsage is deliberately not served: it is the "dependency down" case.
    const admin =
      <Request, Response>(name: string, answer: (request: Request) => Response) =>
      async (request: Request) => {
        this.adminCalls.push({ endpoint: name, request });
        return answer(request);
      };
    rpc.serve(
      billingEndpoints.createAccount,
      admin('createAccount', () => ({
        accountId: newId('account'),
        apiKey: `sk_live_${randomBytes(24).toString('hex')}`,
        webhookSecret: `whsec_${randomBytes(32).toString('base64')}`,
      })),
    );
    const accountView = (
      accountId: string,
      plan: 'free' | 'pro',
      webhookUrl: string | null,
      billingCycleAnchor: string | null,
    ) => ({
      accountId,
      plan,
      maxUploadBytes: 1,
      rateLimitPerMinute: 60,
      webhookUrl,
      webhookSecret: 'whsec_x',
      previousWebhookSecret: null,
      billingCycleAnchor:
        billingCycleAnchor === null ? null : new Date(billingCycleAnchor).toISOString(),
      createdAt: new Date().toISOString(),
      credits: { allowanceRemaining: 100, grantedRemaining: 0, available: 100 },
    });
    rpc.serve(
      billingEndpoints.updateAccount,
      admin('updateAccount', (request) =>
        accountView(
          request.accountId,
          request.plan ?? 'free',
          request.webhookUrl ?? null,
          request.billingCycleAnchor ?? null,
        ),
      ),
    );
    rpc.serve(
      billingEndpoints.rotateWebhookSecret,
      admin('rotateWebhookSecret', (request) => {
        if (request.accountId === Harness.UNKNOWN_ACCOUNT) {
          throw new ServiceError('NOT_FOUND', `Account ${request.accountId} not found`);
        }
        const graceMs = (request.gracePeriodSeconds ?? 86_400) * 1000;
        return {
          webhookSecret: `whsec_${randomBytes(32).toString('base64')}`,
          previousValidUntil: new Date(Date.now() + graceMs).toISOString(),
        };
      }),
    );
    rpc.serve(
      billingEndpoints.addCredits,
      admin('addCredits', (request) => ({
        accountId: request.accountId,
        grantedCredits: request.credits,
      })),
    );
    rpc.serve(
      billingEndpoints.createKey,
      admin('createKey', () => ({
        keyId: newId('apiKey'),
        apiKey: `sk_live_${randomBytes(24).toString('hex')}`,
      })),
    );
    const keyView = (keyId: string, accountId: string, revoked: boolean) => ({
      keyId,
      accountId,
      displayPrefix: 'sk_live_ab',
      createdAt: new Date().toISOString(),
      revokedAt: revoked ? new Date().toISOString() : null,
    });
    rpc.serve(
      billingEndpoints.revokeKey,
      admin('revokeKey', (request) => keyView(request.keyId, 'acct_x', true)),
    );
    rpc.serve(
      billingEndpoints.listKeys,
      admin('listKeys', (request) => ({
        keys: [keyView(newId('apiKey'), request.accountId, false)],
      })),
    );
    rpc.serve(
      webhookEndpoints.listDeliveries,
      admin('listDeliveries', (request) => ({
        deliveries: [
          {
            deliveryId: 'd1',
            jobId: request.jobId,
            event: 'job.completed' as const,
            attempt: 1,
            attemptedAt: new Date().toISOString(),
            target: 'https://example.com/hook',
            statusCode: 500,
            latencyMs: 12,
            outcome: 'failed' as const,
            error: 'HTTP 500',
          },
        ],
      })),
    );
    rpc.serve(
      webhookEndpoints.redeliver,
      admin('redeliver', () => ({ scheduled: true })),
    );
  }
}
