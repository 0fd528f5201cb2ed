/**
 * What each Tamp service needs from its environment, as the Helm chart gives it
 * (charts/tamp/templates/_helpers.tpl, `tamp.components` and `tamp.plainEnv`): whether it
 * talks to MongoDB and S3, and which secrets it reads. The operator is left out: it scales
 * Kubernetes Deployments and, outside a cluster, has nothing to do.
 */
export const TAMP_SERVICES = {
  gateway: { mongo: false, s3: true },
  upload: { mongo: true, s3: true },
  job: { mongo: true, s3: true },
  billing: { mongo: true, s3: false },
  webhook: { mongo: true, s3: false },
  'worker-image': { mongo: false, s3: true },
  'worker-text': { mongo: false, s3: true },
  'worker-audio': { mongo: false, s3: true },
} as const;

export type TampService = keyof typeof TAMP_SERVICES;
export const TAMP_SERVICE_NAMES = Object.keys(TAMP_SERVICES) as TampService[];

/** Where the dependencies are and the secrets of one installation. */
export interface Installation {
  natsUrl: string;
  mongoUrl: string;
  s3: { endpoint: string; publicEndpoint: string; accessKey: string; secretKey: string };
  adminToken: string;
  cursorSecret: string;
  encryptionKey: string;
  /** Plain-http webhook targets in these CIDRs are allowed (the chart's webhook values). */
  webhookCidrs: readonly string[];
}

/** Ports and the address a service listens on. */
export interface Listening {
  host: string;
  opsPort: number;
  /** The gateway's public and admin ports. */
  port?: number;
  adminPort?: number;
}

/**
 * The environment of one service: the chart's plain variables and the secrets it reads, with
 * the listening addresses of this placement. Every name is a key of the service's own schema
 * (testcontainers/test/unit/service-environment.test.ts parses them with it).
 */
export function serviceEnvironment(
  service: TampService,
  installation: Installation,
  listening: Listening,
): Record<string, string> {
  const facts = TAMP_SERVICES[service];
  const env: Record<string, string> = {
    LOG_LEVEL: 'info',
    OPS_HOST: listening.host,
    OPS_PORT: String(listening.opsPort),
    NATS_URL: installation.natsUrl,
    NATS_STREAM_REPLICAS: 'auto',
  };
  if (facts.mongo) {
    Object.assign(env, { MONGO_URL: installation.mongoUrl, MONGO_DATABASE: 'tamp' });
  }
  if (facts.s3) {
    Object.assign(env, {
      S3_ENDPOINT: installation.s3.endpoint,
      S3_PUBLIC_ENDPOINT: installation.s3.publicEndpoint,
      S3_REGION: 'us-east-1',
      S3_BUCKET: 'tamp',
      S3_ACCESS_KEY: installation.s3.accessKey,
      S3_SECRET_KEY: installation.s3.secretKey,
    });
  }
  if (service === 'gateway' || service === 'webhook') {
    Object.assign(env, {
      WEBHOOK_ALLOW_HTTP: 'true',
      WEBHOOK_ALLOW_CIDRS: installation.webhookCidrs.join(','),
    });
  }
  if (service === 'gateway') {
    Object.assign(env, {
      HOST: listening.host,
      PORT: String(listening.port),
      ADMIN_HOST: listening.host,
      ADMIN_PORT: String(listening.adminPort),
      ADMIN_TOKEN: installation.adminToken,
      // Every client arrives from one address (loopback, or the bridge's gateway for published
      // ports), as behind the chart's ingress: no limit per address.
      MAX_CONNECTIONS_PER_ADDRESS: '0',
    });
  }
  if (service === 'job') env.JOB_CURSOR_SECRET = installation.cursorSecret;
  if (service === 'billing') env.SECRETS_ENCRYPTION_KEY = installation.encryptionKey;
  return env;
}
