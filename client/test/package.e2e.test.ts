import { execFile as execFileCallback } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '@tamp/scripts/infra/provision';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack } from '../../test/support/stack';

/**
 * The SDK as a customer gets it: `npm pack` of this package, installed from the tarball into a
 * project of its own outside the repository, then run by Node.js against every service of the
 * real stack, bundled for a browser and type-checked against its declarations. What works only
 * from the sources (exports, `#platform`, declarations naming @tamp/proto) fails here.
 */

const execFile = promisify(execFileCallback);
const TSC = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const INSTALLED = join('node_modules', '@tamp', 'client');

let stack: TestStack;
let scratch: string;
let project: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'tamp-package-'));
  [stack, project] = await Promise.all([startTestStack(), installFromTarball(scratch)]);
}, 300_000);

afterAll(async () => {
  await stack?.stop();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/** Packs the package as `npm publish` would and installs the tarball into a new project. */
async function installFromTarball(folder: string): Promise<string> {
  await execFile('npm', ['pack', '-w', 'client', '--pack-destination', folder], {
    cwd: PROJECT_ROOT,
  });
  const tarball = (await readdir(folder)).find((name) => name.endsWith('.tgz'));
  if (tarball === undefined) throw new Error(`npm pack left no tarball in ${folder}`);
  const consumer = join(folder, 'consumer');
  await mkdir(consumer);
  await writeFile(
    join(consumer, 'package.json'),
    JSON.stringify({ name: 'tamp-consumer', private: true, type: 'module' }),
  );
  // The package has no dependencies, so nothing is fetched from a registry.
  const install = ['install', '--offline', '--no-audit', '--no-fund', join(folder, tarball)];
  await execFile('npm', install, { cwd: consumer });
  return consumer;
}

/** A customer's script: the catalogue, then a .txt file through the whole flow. */
const NODE_CONSUMER = `
import { Tamp } from '@tamp/client';

const [input, output] = process.argv.slice(2);
const tamp = new Tamp();
const { presets } = await tamp.presets('text');
const result = await tamp.compress(input, { preset: 'chill', output });
console.log(JSON.stringify({
  entry: import.meta.resolve('@tamp/client'),
  presets: presets.map((preset) => preset.name),
  status: result.job.status,
  output: result.output,
}));
`;

describe('the SDK installed from its tarball', () => {
  it('runs in Node.js against the real stack', async () => {
    const account = await stack.createAccount({ plan: 'pro' });
    const input = join(scratch, 'notes.txt');
    await writeFile(input, 'Some   text,   with   spaces.\n\n\n\n'.repeat(50));
    await writeFile(join(project, 'node-consumer.mjs'), NODE_CONSUMER);

    // Nothing of the test's own environment (loaders, NODE_OPTIONS) reaches the customer's Node.
    const { stdout } = await execFile(
      process.execPath,
      ['node-consumer.mjs', input, join(scratch, 'out', 'notes.txt')],
      {
        cwd: project,
        env: {
          PATH: process.env.PATH,
          TAMP_API_KEY: account.apiKey,
          TAMP_BASE_URL: stack.publicUrl,
        },
      },
    );

    const run = JSON.parse(stdout) as {
      entry: string;
      presets: string[];
      status: string;
      output: string;
    };
    expect(run.entry).toMatch(/\/node_modules\/@tamp\/client\/dist\/node\/index\.js$/);
    expect(run.presets).toContain('medium');
    expect(run.status).toBe('completed');
    const written = await readFile(run.output, 'utf8');
    expect(written.length).toBeGreaterThan(0);
    expect(written.length).toBeLessThan((await stat(input)).size);
  });

  it('bundles for a browser with no Node.js built-in', async () => {
    await writeFile(
      join(project, 'browser-consumer.js'),
      "export { Tamp, verifyWebhook } from '@tamp/client';\n",
    );
    const result = await build({
      entryPoints: [join(project, 'browser-consumer.js')],
      absWorkingDir: project,
      bundle: true,
      platform: 'browser',
      format: 'esm',
      target: 'es2022',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs).toContain(`${INSTALLED}/dist/browser/index.js`);
    expect(inputs.filter((input) => !input.startsWith(INSTALLED))).toEqual(['browser-consumer.js']);
    expect(result.outputFiles[0]!.text).not.toMatch(/["']node:/);
  });

  it('type-checks against its declarations, in Node.js and in a bundler', async () => {
    await writeFile(
      join(project, 'typed-consumer.ts'),
      `import { type Job, type PresetCatalogue, Tamp, TampApiError } from '@tamp/client';

const tamp = new Tamp({ apiKey: 'sk_live_example' });
const catalogue: PresetCatalogue = await tamp.presets('image');
const job: Job = await tamp.getJob('job_example');
const status: 'created' | 'pending' | 'processing' | 'completed' | 'failed' = job.status;
// @ts-expect-error a status is no number: the declarations carry real types, not any
const wrong: number = job.status;
export { catalogue, status, TampApiError, wrong };
`,
    );
    // Our declarations are checked too (skipLibCheck off): one naming a module the customer
    // does not have fails here, not only where it is used.
    const common = ['--noEmit', '--strict', '--skipLibCheck', 'false', '--target', 'es2022'];
    const nodeProject = [
      ...common,
      ...['--module', 'nodenext', '--moduleResolution', 'nodenext'],
      ...['--typeRoots', join(PROJECT_ROOT, 'node_modules', '@types'), '--types', 'node'],
    ];
    const bundlerProject = [
      ...common,
      ...['--module', 'esnext', '--moduleResolution', 'bundler', '--lib', 'es2022,dom'],
    ];
    await Promise.all([nodeProject, bundlerProject].map((options) => typeCheck(options)));
  }, 120_000);
});

/** The repository's TypeScript on the consumer's file; its diagnostics are the failure. */
async function typeCheck(options: string[]): Promise<void> {
  try {
    await execFile(process.execPath, [TSC, ...options, 'typed-consumer.ts'], { cwd: project });
  } catch (error) {
    const { stdout } = error as { stdout?: string };
    throw new Error(`tsc ${options.join(' ')}\n${stdout ?? String(error)}`);
  }
}
