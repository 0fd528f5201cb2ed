/**
 * Builds each service into one ES module under `dist/<service>/main.mjs`: our TypeScript
 * (the service, kit and proto) bundled, third-party packages left as imports resolved from
 * node_modules at run time (native addons such as sharp cannot be bundled, and keeping them
 * out keeps the build exact to the lockfile). This is what a container runs; `npm start` and
 * the tests run the sources through tsx, which costs each process ~60 MiB more (the loader
 * thread and transpiled sources), so memory measurements of a worker use the bundle.
 *
 * worker-text's thread entries are emitted next to its bundle, where its thread pools look
 * for them (`text-pipeline-thread.mjs` and `pdf-thread.mjs` beside `main.mjs`).
 *
 * A service that pins a package to another version than the hoisted one has it in
 * `services/<service>/node_modules` (the gateway's lru-cache and fastify-plugin). Node resolves
 * a bundle's imports from its own folder upwards, so `dist/<service>/node_modules` links there:
 * the bundle then loads the versions the lockfile gives that service, as the container image
 * does (it copies that folder beside the bundle).
 *
 * Run: node --import tsx scripts/build/bundle.ts
 */
import { existsSync } from 'node:fs';
import { cp, rm, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { PROJECT_ROOT } from '../infra/provision';
import { SERVICE_NAMES, type ServiceName } from '../stack/service-names';

export const BUNDLE_DIR = join(PROJECT_ROOT, 'dist');

export function bundledServiceEntry(name: ServiceName): string {
  return join(BUNDLE_DIR, name, 'main.mjs');
}

/** Extra entry points a service loads by path at run time, beside its main bundle. */
const EXTRA_ENTRIES: Partial<Record<ServiceName, Record<string, string>>> = {
  'worker-text': {
    'text-pipeline-thread': 'services/worker-text/src/adapters/text-pipeline-thread.ts',
    'pdf-thread': 'services/worker-text/src/adapters/pdf-thread.ts',
  },
};

/**
 * Files a service reads at run time next to its code (`new URL('./assets/…', import.meta.url)`),
 * copied next to main.mjs: the gateway's dashboard stylesheet and script.
 */
const ASSET_FOLDERS: Partial<Record<ServiceName, string>> = {
  gateway: 'services/gateway/src/api/dashboard/assets',
};

/** Workspace packages (@tamp/*) are bundled; every other bare import stays external. */
const externalThirdParty: Plugin = {
  name: 'external-third-party',
  setup(builder) {
    builder.onResolve({ filter: /^[^./]/ }, (args) =>
      args.path.startsWith('@tamp/') ? undefined : { path: args.path, external: true },
    );
  },
};

export async function bundleServices(): Promise<void> {
  await Promise.all(
    SERVICE_NAMES.map((name) =>
      build({
        entryPoints: {
          main: join(PROJECT_ROOT, 'services', name, 'src/main.ts'),
          ...Object.fromEntries(
            Object.entries(EXTRA_ENTRIES[name] ?? {}).map(([entry, path]) => [
              entry,
              join(PROJECT_ROOT, path),
            ]),
          ),
        },
        outdir: join(BUNDLE_DIR, name),
        outExtension: { '.js': '.mjs' },
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node20.19',
        sourcemap: 'linked',
        plugins: [externalThirdParty],
        logLevel: 'warning',
      }).then(() => Promise.all([linkPinnedPackages(name), copyAssets(name)])),
    ),
  );
}

async function copyAssets(name: ServiceName): Promise<void> {
  const folder = ASSET_FOLDERS[name];
  if (folder === undefined) return;
  await cp(join(PROJECT_ROOT, folder), join(BUNDLE_DIR, name, 'assets'), { recursive: true });
}

async function linkPinnedPackages(name: ServiceName): Promise<void> {
  const pinned = join(PROJECT_ROOT, 'services', name, 'node_modules');
  const link = join(BUNDLE_DIR, name, 'node_modules');
  await rm(link, { recursive: true, force: true });
  if (existsSync(pinned)) await symlink(pinned, link, 'dir');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await bundleServices();
  console.log(`bundled ${SERVICE_NAMES.length} services into ${BUNDLE_DIR}`);
}
