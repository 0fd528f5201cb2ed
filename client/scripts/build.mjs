// Bundles the `tamp` command into dist/tamp.mjs with esbuild: our TypeScript, @tamp/proto and
// every third-party package in one file for Node >= 20.19, so an installed package needs no
// dependencies. bin/tamp.mjs runs it (and calls this first in a clone when sources changed).
// Plain JavaScript: it runs before anything is compiled.
import { readFileSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
export const BUNDLE = join(root, 'dist', 'tamp.mjs');

export async function buildCli() {
  const { build } = await import('esbuild');
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  // Built beside and renamed into place: concurrent first runs never see half a file.
  const partial = `${BUNDLE}.${process.pid}.tmp`;
  await build({
    entryPoints: [join(root, 'src', 'cli', 'bin.ts')],
    outfile: partial,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20.19',
    conditions: ['node'],
    define: { TAMP_CLIENT_VERSION: JSON.stringify(version) },
    // CommonJS packages in the bundle (commander, cli-progress) call require() on built-ins.
    banner: {
      js: "import { createRequire as __tampCreateRequire } from 'node:module';\nconst require = __tampCreateRequire(import.meta.url);",
    },
    legalComments: 'linked',
    logLevel: 'warning',
  });
  await rename(partial, BUNDLE);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await buildCli();
  console.log(`built ${BUNDLE}`);
}
