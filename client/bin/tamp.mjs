#!/usr/bin/env node
// The `tamp` command. An installed package ships the bundle (dist/tamp.mjs, built by prepack);
// in a clone of the repository, where dist/ is not committed, the bundle is built here first
// whenever the sources are newer than it (about half a second, once).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 20 || (major === 20 && minor < 19)) {
  console.error(`tamp needs Node.js >= 20.19 (this is ${process.versions.node})`);
  process.exit(2);
}

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const bundle = join(root, 'dist', 'tamp.mjs');
const sources = [join(root, 'src'), join(root, '..', 'proto', 'src'), join(root, 'package.json')];

function newestChange(path) {
  if (!existsSync(path)) return 0;
  const stats = statSync(path);
  if (!stats.isDirectory()) return stats.mtimeMs;
  return Math.max(
    stats.mtimeMs,
    ...readdirSync(path).map((name) => newestChange(join(path, name))),
  );
}

if (existsSync(join(root, 'src'))) {
  const built = existsSync(bundle) ? statSync(bundle).mtimeMs : 0;
  if (Math.max(...sources.map(newestChange)) > built) {
    const { buildCli } = await import('../scripts/build.mjs');
    await buildCli();
  }
}
await import(pathToFileURL(bundle).href);
