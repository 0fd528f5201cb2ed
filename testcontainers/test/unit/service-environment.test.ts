import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PROJECT_ROOT } from '@tamp/scripts/infra/provision';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { z } from 'zod';
import { configSchema as billingSchema } from '../../../services/billing/src/config';
import { configSchema as gatewaySchema } from '../../../services/gateway/src/config';
import { configSchema as jobSchema } from '../../../services/job/src/config';
import { configSchema as uploadSchema } from '../../../services/upload/src/config';
import { configSchema as webhookSchema } from '../../../services/webhook/src/config';
import { configSchema as workerAudioSchema } from '../../../services/worker-audio/src/config';
import { configSchema as workerImageSchema } from '../../../services/worker-image/src/config';
import { configSchema as workerTextSchema } from '../../../services/worker-text/src/config';
import { DEFAULT_IMAGES } from '../../src/images';
import {
  type Installation,
  serviceEnvironment,
  TAMP_SERVICE_NAMES,
  TAMP_SERVICES,
  type TampService,
} from '../../src/services';

/**
 * The module runs the services with the environment the chart gives them; these keep it so
 * without starting anything: every variable is one the service's own schema knows and parses,
 * the services' needs are the chart's, and the default dependency images are those
 * k8s/dependencies pins.
 */

const SCHEMAS: Record<TampService, z.ZodObject> = {
  gateway: gatewaySchema,
  upload: uploadSchema,
  job: jobSchema,
  billing: billingSchema,
  webhook: webhookSchema,
  'worker-image': workerImageSchema,
  'worker-text': workerTextSchema,
  'worker-audio': workerAudioSchema,
};

const INSTALLATION: Installation = {
  natsUrl: 'nats://nats:4222',
  mongoUrl: 'mongodb://ferretdb:27017/',
  s3: {
    endpoint: 'http://minio:9000',
    publicEndpoint: 'http://localhost:32768',
    accessKey: 'tamp-access',
    secretKey: 'tamp-secret-key',
  },
  adminToken: 'a'.repeat(48),
  cursorSecret: 'c'.repeat(64),
  encryptionKey: Buffer.alloc(32, 7).toString('base64'),
  webhookCidrs: ['10.89.0.0/24'],
};

describe('the environment @tamp/testcontainers gives each service', () => {
  it('is parsed by the service’s own schema, every variable one it knows', () => {
    for (const service of TAMP_SERVICE_NAMES) {
      const env = serviceEnvironment(service, INSTALLATION, {
        host: '0.0.0.0',
        opsPort: 9090,
        port: 8080,
        adminPort: 8081,
      });
      const schema = SCHEMAS[service];
      expect(
        Object.keys(env).filter((name) => !(name in schema.shape)),
        service,
      ).toEqual([]);
      const parsed = schema.safeParse(env);
      expect(parsed.success, `${service}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
    }
  });

  it('connects each service to what the chart connects it to', async () => {
    const helpers = await readFile(
      join(PROJECT_ROOT, 'charts/tamp/templates/_helpers.tpl'),
      'utf8',
    );
    const block = /define "tamp\.components" -\}\}\n([\s\S]*?)\{\{- end \}\}/.exec(helpers)?.[1];
    const components = parse(block ?? '') as Record<string, { mongo: boolean; s3: boolean }>;
    const chart = Object.fromEntries(
      Object.entries(components)
        .filter(([name]) => name !== 'operator')
        .map(([name, facts]) => [name, { mongo: facts.mongo, s3: facts.s3 }]),
    );
    expect(chart).toEqual(TAMP_SERVICES);
  });

  it('defaults to the dependency images k8s/dependencies pins', async () => {
    const kustomization = parse(
      await readFile(join(PROJECT_ROOT, 'k8s/dependencies/kustomization.yaml'), 'utf8'),
    ) as { images: Array<{ name: string; newName?: string; newTag: string }> };
    const pinned = kustomization.images.map(
      (image) => `${image.newName ?? image.name}:${image.newTag}`,
    );
    expect(pinned.sort()).toEqual(
      [DEFAULT_IMAGES.nats, DEFAULT_IMAGES.minio, DEFAULT_IMAGES.ferretdb].sort(),
    );
  });
});
