import { execFile as execFileCallback } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '@tamp/scripts/infra/provision';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The module as a customer gets it: `npm pack` of this package, installed from the tarball into
 * a project of its own outside the repository, then used by plain Node.js (no loader, no alias
 * to the sources) to start a real Tamp on the project's engine, and type-checked against its
 * declarations. The project's own testcontainers is the repository's, linked (no registry here).
 */

const execFile = promisify(execFileCallback);
const TSC = createRequire(import.meta.url).resolve('typescript/bin/tsc');

let scratch: string;
let consumer: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'tamp-testcontainers-package-'));
  await execFile('npm', ['pack', '-w', 'testcontainers', '--pack-destination', scratch], {
    cwd: PROJECT_ROOT,
  });
  const tarball = (await readdir(scratch)).find((name) => name.endsWith('.tgz'));
  if (tarball === undefined) throw new Error(`npm pack left no tarball in ${scratch}`);
  consumer = join(scratch, 'consumer');
  await mkdir(consumer);
  await writeFile(
    join(consumer, 'package.json'),
    JSON.stringify({
      name: 'tamp-testcontainers-consumer',
      private: true,
      type: 'module',
      dependencies: { testcontainers: `file:${join(PROJECT_ROOT, 'node_modules/testcontainers')}` },
    }),
  );
  const install = ['install', '--offline', '--no-audit', '--no-fund', join(scratch, tarball)];
  await execFile('npm', install, { cwd: consumer });
}, 300_000);

afterAll(async () => {
  if (scratch !== undefined) await rm(scratch, { recursive: true, force: true });
});

/** A customer's script: a Tamp, one text job through it, stopped. */
const CONSUMER = `
import { TampContainer } from '@tamp/testcontainers';

const tamp = await new TampContainer().start();
try {
  const response = await fetch(tamp.baseUrl + '/v1/text', {
    method: 'POST',
    headers: { authorization: 'Bearer ' + tamp.apiKey, 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'Packed   and   installed.', preset: 'medium' }),
  });
  const { data } = await response.json();
  console.log(JSON.stringify({
    entry: import.meta.resolve('@tamp/testcontainers'),
    secret: tamp.webhookSecret.slice(0, 6),
    status: data.status,
    output: data.result.outputText,
  }));
} finally {
  await tamp.stop();
}
`;

describe('@tamp/testcontainers installed from its tarball', () => {
  it('starts a Tamp from plain Node.js', async () => {
    await writeFile(join(consumer, 'consumer.mjs'), CONSUMER);
    // The engine and images the project's setup put in this process's environment, and
    // nothing else of the test's (no loader, no NODE_OPTIONS).
    const names = Object.keys(process.env).filter(
      (name) => name.startsWith('TAMP_') || name.startsWith('TESTCONTAINERS_'),
    );
    const { stdout } = await execFile(process.execPath, ['consumer.mjs'], {
      cwd: consumer,
      env: {
        PATH: process.env.PATH,
        DOCKER_HOST: process.env.DOCKER_HOST,
        ...Object.fromEntries(names.map((name) => [name, process.env[name]])),
      },
    });
    const run = JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, string>;
    expect(run.entry).toMatch(/\/node_modules\/@tamp\/testcontainers\/dist\/index\.js$/);
    expect(run.secret).toBe('whsec_');
    expect(run).toMatchObject({ status: 'completed', output: 'Packed and installed.' });
  }, 300_000);

  it('type-checks a customer’s suite against its declarations', async () => {
    await writeFile(
      join(consumer, 'typed.ts'),
      `import { type StartedTampContainer, TampContainer, type WebhookDelivery } from '@tamp/testcontainers';

const tamp: StartedTampContainer = await new TampContainer({ tag: '0.1.0' })
  .withNetworkMode('host')
  .withAccount({ plan: 'free', credits: 10 })
  .withServiceEnvironment('job', { JOB_RETRY_BASE_MS: '500' })
  .start();
const receiver = await tamp.startWebhookReceiver();
const delivery: WebhookDelivery = await receiver.waitForDelivery((d) => d.path === '/hook');
const key: string = tamp.apiKey;
// @ts-expect-error a service the module does not run
tamp.service('operator');
export { delivery, key };
`,
    );
    const options = [
      ...['--noEmit', '--strict', '--target', 'es2022'],
      ...['--module', 'nodenext', '--moduleResolution', 'nodenext'],
      ...['--typeRoots', join(PROJECT_ROOT, 'node_modules', '@types'), '--types', 'node'],
    ];
    try {
      await execFile(process.execPath, [TSC, ...options, 'typed.ts'], { cwd: consumer });
    } catch (error) {
      throw new Error(`tsc: ${(error as { stdout?: string }).stdout ?? String(error)}`);
    }
  }, 120_000);
});
