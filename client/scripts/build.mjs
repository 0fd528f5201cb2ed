// Builds what the package ships, into dist/ (prepack runs it; so does `npm run build`):
// - tamp.mjs, the `tamp` command for Node >= 20.19;
// - node/index.js and browser/index.js, the SDK as ES modules, `#platform` resolved to
//   src/platform/node.ts or browser.ts;
// - types/, the SDK's declarations (scripts/declarations.mjs).
// Each bundle carries our TypeScript, @tamp/proto and every third-party package it uses (zod,
// commander…), so the published package has no dependencies. bin/tamp.mjs builds the command
// alone, in a clone, when sources changed. Plain JavaScript: it runs before anything is compiled.
import { readFileSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const DIST = join(root, 'dist');
export const BUNDLE = join(DIST, 'tamp.mjs');

/** How the SDK is built for each platform its package.json exports. */
const SDK_PLATFORMS = {
  node: { platform: 'node', target: 'node20.19', conditions: ['node'] },
  browser: { platform: 'browser', target: 'es2022' },
};

export async function buildCli() {
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  await bundle({
    entryPoints: [join(root, 'src', 'cli', 'bin.ts')],
    outfile: BUNDLE,
    ...SDK_PLATFORMS.node,
    define: { TAMP_CLIENT_VERSION: JSON.stringify(version) },
    // CommonJS packages in the bundle (commander, cli-progress) call require() on built-ins.
    banner: {
      js: "import { createRequire as __tampCreateRequire } from 'node:module';\nconst require = __tampCreateRequire(import.meta.url);",
    },
  });
}

export async function buildSdk() {
  await Promise.all(
    Object.entries(SDK_PLATFORMS).map(([name, options]) =>
      bundle({
        entryPoints: [join(root, 'src', 'index.ts')],
        outfile: join(DIST, name, 'index.js'),
        ...options,
      }),
    ),
  );
  // Loaded only here: TypeScript takes a second to load, and the command never needs it.
  const { sdkDeclarations } = await import('./declarations.mjs');
  for (const [path, text] of sdkDeclarations(root)) {
    await writeInPlace(join(DIST, 'types', path), text);
  }
}

async function bundle(options) {
  const { build } = await import('esbuild');
  const { outputFiles } = await build({
    bundle: true,
    format: 'esm',
    legalComments: 'linked',
    logLevel: 'warning',
    write: false,
    ...options,
  });
  for (const file of outputFiles) await writeInPlace(file.path, file.contents);
}

/** Written beside and renamed into place: a concurrent build or pack never sees half a file. */
async function writeInPlace(path, contents) {
  await mkdir(dirname(path), { recursive: true });
  const partial = `${path}.${process.pid}.tmp`;
  await writeFile(partial, contents);
  await rename(partial, path);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await Promise.all([buildCli(), buildSdk()]);
  console.log(`built ${DIST}`);
}
