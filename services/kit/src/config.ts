import { isCidr, type TargetPolicy } from '@tamp/proto';
import { z } from 'zod';

/** Raised when the environment does not satisfy a service's schema; lists every problem. */
export class ConfigError extends Error {
  readonly problems: string[];

  constructor(service: string, problems: string[]) {
    super(
      `${service}: invalid configuration\n${problems.map((problem) => `  - ${problem}`).join('\n')}`,
    );
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** Parses the environment with one zod schema; a bad or missing variable is named, never guessed. */
export function loadConfig<Schema extends z.ZodType>(
  service: string,
  schema: Schema,
  env: NodeJS.ProcessEnv = process.env,
): z.output<Schema> {
  const result = schema.safeParse(env);
  const problems = result.success
    ? []
    : result.error.issues.map((issue) => {
        const variable = issue.path.join('.') || '(environment)';
        const received =
          issue.code === 'invalid_type' && env[variable] === undefined ? 'missing' : issue.message;
        return `${variable}: ${received === 'missing' ? 'is required but not set' : received}`;
      });
  problems.push(...sharedGroupProblems(schema, env));
  if (result.success && problems.length === 0) return result.data;
  throw new ConfigError(service, problems);
}

/**
 * Rules across the variables of a shared group, which spreading the group (`...s3Env`) cannot
 * carry into a service's schema: checked for every schema that has the group's variables.
 */
function sharedGroupProblems(schema: z.ZodType, env: NodeJS.ProcessEnv): string[] {
  const shape: Record<string, unknown> = schema instanceof z.ZodObject ? schema.shape : {};
  const problems: string[] = [];
  if ('S3_ACCESS_KEY' in shape && 'S3_SECRET_KEY' in shape) {
    const problem = s3KeyPairProblem(env);
    if (problem !== undefined) problems.push(problem);
  }
  return problems;
}

/** Static S3 keys come in pairs: one alone is a mistake, not a request for the chain. */
function s3KeyPairProblem(env: NodeJS.ProcessEnv): string | undefined {
  const given = (['S3_ACCESS_KEY', 'S3_SECRET_KEY'] as const).filter(
    (name) => env[name] !== undefined,
  );
  if (given.length !== 1) return undefined;
  const missing = given[0] === 'S3_ACCESS_KEY' ? 'S3_SECRET_KEY' : 'S3_ACCESS_KEY';
  return (
    `${missing}: is not set while ${given[0]} is. Set both for static keys, or neither to ` +
    'take credentials from the AWS credential chain (IRSA, EKS Pod Identity, instance role)'
  );
}

const port = z.coerce.number().int().min(0).max(65_535);
const booleanFlag = z
  .enum(['true', 'false', '1', '0', ''])
  .default('false')
  .transform((value) => value === 'true' || value === '1');

/** Variables every service reads. */
export const serviceEnv = {
  /** pino level. */
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Port of the /healthz, /readyz and /metrics server. */
  OPS_PORT: port.default(9090),
  /** Address of the `/healthz`, `/readyz` and `/metrics` server. */
  OPS_HOST: z.string().default('0.0.0.0'),
  /**
   * OpenTelemetry stays off unless an OTLP endpoint is configured (OTLP over HTTP, e.g.
   * `http://collector:4318`; see docs/tracing.md).
   */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url().optional(),
  /** Upper bound for a graceful stop. */
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().positive().default(25_000),
};

export const natsEnv = {
  /** NATS server(s), comma-separated. */
  NATS_URL: z.string().min(1),
  /** Prefix for every subject and stream, so installations can share a NATS server. */
  NATS_NAMESPACE: z.string().default(''),
  /**
   * Replicas of every JetStream stream: `auto` is three when the server reports a cluster of
   * three or more servers, one otherwise. On start, a number is applied to existing streams as
   * it is; `auto` only raises them (on start, and when the cluster grows later), so a start
   * while a node is down never lowers them. A cluster that does not advertise its servers
   * (`no_advertise`) needs the number itself.
   */
  NATS_STREAM_REPLICAS: z
    .union([z.literal('auto'), z.coerce.number().int().min(1).max(5)])
    .default('auto'),
};

export const mongoEnv = {
  /** MongoDB connection string. */
  MONGO_URL: z.string().regex(/^mongodb(\+srv)?:\/\//, 'must be a mongodb:// URL'),
  /** Database name. */
  MONGO_DATABASE: z.string().min(1).default('tamp'),
};

export const s3Env = {
  /** S3 endpoint reached by the services. */
  S3_ENDPOINT: z.url(),
  /** The endpoint clients reach; presigned URLs are signed for it. Defaults to S3_ENDPOINT. */
  S3_PUBLIC_ENDPOINT: z.url().optional(),
  /**
   * Static S3 access key, set together with S3_SECRET_KEY (one alone is refused), or neither of
   * them: the services then take their credentials from the AWS SDK's standard chain
   * (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a web identity token file as IRSA
   * mounts it, ECS or EKS Pod Identity container credentials, instance metadata) and refresh
   * temporary ones before they expire (see docs/kubernetes.md).
   */
  S3_ACCESS_KEY: z.string().min(1).optional(),
  /** Static S3 secret key: set with S3_ACCESS_KEY, or neither (the AWS credential chain). */
  S3_SECRET_KEY: z.string().min(1).optional(),
  /** S3 region. */
  S3_REGION: z.string().min(1).default('us-east-1'),
  /** S3 bucket. */
  S3_BUCKET: z.string().min(3).default('tamp'),
  /**
   * Whether the services provision the bucket at start: create it when it is missing, and merge
   * Tamp's lifecycle rules (IDs starting with `tamp-`: expiry of `uploads/` and `inputs/` after
   * 2 days, `results/` after 8) into its configuration, keeping every other rule and writing
   * nothing when they are already there. `false`: the bucket and its rules are the operator's;
   * the services only check that the bucket exists (HeadBucket) and do not start without it, and
   * need no permission to create buckets or read or write lifecycle configurations.
   */
  S3_MANAGE_BUCKET: z
    .enum(['true', 'false', '1', '0'])
    .default('true')
    .transform((value) => value === 'true' || value === '1'),
};

/** Comma-separated CIDRs, e.g. `127.0.0.0/8,::1/128`; empty: none. */
const cidrList = z
  .string()
  .default('')
  .transform((value, context) => {
    const entries = value
      .split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry !== '');
    for (const entry of entries) {
      if (!isCidr(entry)) {
        context.addIssue({
          code: 'custom',
          message: `"${entry}" is not a CIDR (e.g. 127.0.0.0/8)`,
        });
      }
    }
    return entries;
  });

/**
 * Where webhooks may be sent (docs/decisions.md#webhooks): the webhook service applies it at
 * delivery, the gateway applies what needs no DNS when a webhookUrl is given. A deployment sets
 * the same values on both (the chart and the local stack do).
 */
export const webhookTargetEnv = {
  /** Plain http targets; the local stack sets it, the production default refuses them. */
  WEBHOOK_ALLOW_HTTP: booleanFlag,
  /** CIDRs exempt from the private/loopback refusals (cloud metadata stays refused). */
  WEBHOOK_ALLOW_CIDRS: cidrList,
};

export type ServiceEnv = z.output<z.ZodObject<typeof serviceEnv>>;
export type WebhookTargetEnv = z.output<z.ZodObject<typeof webhookTargetEnv>>;

/** The deployment's target policy; with nothing set it is PRODUCTION_POLICY (https, public only). */
export function webhookTargetPolicyFrom(config: WebhookTargetEnv): TargetPolicy {
  return Object.freeze({
    allowHttp: config.WEBHOOK_ALLOW_HTTP,
    allowCidrs: Object.freeze([...config.WEBHOOK_ALLOW_CIDRS]),
  });
}

export const envFlag = booleanFlag;
export const envPort = port;

export type NatsEnv = z.output<z.ZodObject<typeof natsEnv>>;
export type MongoEnv = z.output<z.ZodObject<typeof mongoEnv>>;
export type S3Env = z.output<z.ZodObject<typeof s3Env>>;

/**
 * The object-store settings of a service whose schema includes `s3Env`; without the keys the
 * store uses the AWS credential chain.
 */
export function objectStoreConfigFrom(config: S3Env) {
  return {
    endpoint: config.S3_ENDPOINT,
    publicEndpoint: config.S3_PUBLIC_ENDPOINT,
    accessKey: config.S3_ACCESS_KEY,
    secretKey: config.S3_SECRET_KEY,
    region: config.S3_REGION,
    bucket: config.S3_BUCKET,
  };
}
