import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';

/**
 * The shared servers plus names private to the calling test file: its own MongoDB database,
 * bucket and NATS namespace, so files run in parallel without seeing each other's data.
 */
export function isolatedInfrastructure() {
  const infrastructure = inject('infrastructure');
  const id = `t${randomBytes(5).toString('hex')}`;
  return {
    ...infrastructure,
    id,
    database: `tamp_${id}`,
    bucket: `tamp-${id}`,
    namespace: id,
    /** Environment for a service process running against this file's isolated slice. */
    serviceEnv: {
      NATS_URL: infrastructure.natsUrl,
      NATS_NAMESPACE: id,
      MONGO_URL: infrastructure.mongoUrl,
      MONGO_DATABASE: `tamp_${id}`,
      S3_ENDPOINT: infrastructure.s3.endpoint,
      S3_ACCESS_KEY: infrastructure.s3.accessKey,
      S3_SECRET_KEY: infrastructure.s3.secretKey,
      S3_REGION: infrastructure.s3.region,
      S3_BUCKET: `tamp-${id}`,
    },
  };
}
