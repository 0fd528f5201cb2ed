// Builds what the package ships, into dist/ (prepack runs it; so does `npm run build`):
// index.js, the module as one ES module for Node >= 20.19 with `testcontainers` left as the
// dependency it is (the customer's own copy, configured as they configure testcontainers), and
// index.d.ts and its siblings, the declarations tsc emits from src/. Plain JavaScript: it runs
// before anything is compiled.
import { execFile } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
export const DIST = join(root, 'dist');

export async function buildPackage() {
  await rm(DIST, { recursive: true, force: true });
  const { build } = await import('esbuild');
  await build({
    entryPoints: [join(root, 'src', 'index.ts')],
    outfile: join(DIST, 'index.js'),
    bundle: true,
    platform: 'node',
    target: 'node20.19',
    format: 'esm',
    packages: 'external',
    logLevel: 'warning',
  });
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  await promisify(execFile)(process.execPath, [
    tsc,
    ...['--declaration', '--emitDeclarationOnly', '--outDir', DIST],
    ...['--target', 'es2023', '--module', 'nodenext', '--moduleResolution', 'nodenext'],
    ...['--strict', '--skipLibCheck', '--types', 'node'],
    join(root, 'src', 'index.ts'),
  ]);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await buildPackage();
  console.log(`built ${DIST}`);
}
